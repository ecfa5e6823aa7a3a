/* usable_cpus.c — see usable_cpus.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_ALLOC, getline */
#endif
#include "usable_cpus.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int32_t vt_cpu_max_quota(const char *text) {
    char *end;
    if (strncmp(text, "max", 3) == 0) return 0;
    const long long quota = strtoll(text, &end, 10);
    if (end == text || quota <= 0 || *end != ' ') return 0;
    const char *p = end + 1;
    const long long period = strtoll(p, &end, 10);
    if (end == p || period <= 0 || (*end != '\n' && *end != '\0')) return 0;
    const long long n = quota / period + (quota % period != 0);
    return n > INT32_MAX ? INT32_MAX : (int32_t)n;
}

/* The cpu.max quota of the cgroup at `dir` (under /sys/fs/cgroup), 0 for
 * none or unreadable. */
static int32_t quota_at(const char *dir) {
    char path[4200];
    if (snprintf(path, sizeof path, "/sys/fs/cgroup%s/cpu.max", dir) >= (int)sizeof path) return 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char text[64] = "";
    const int32_t n = fgets(text, sizeof text, f) ? vt_cpu_max_quota(text) : 0;
    fclose(f);
    return n;
}

/* The smallest quota on the way from this process's cgroup (v2 only: the
 * "0::/path" line of /proc/self/cgroup) up to the root: a limit may sit on
 * the process's own cgroup (a container's) or on a parent (a systemd
 * slice's CPUQuota=). 0 when there is none or nothing can be read (cgroup
 * v1 hosts among them). */
static int32_t cgroup_quota(void) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return 0;
    char *line = NULL;
    size_t cap = 0;
    int32_t best = 0;
    while (getline(&line, &cap, f) > 0) {
        if (strncmp(line, "0::/", 4) != 0) continue;
        char *dir = line + 3; /* "/", or "/a/b" */
        dir[strcspn(dir, "\n")] = '\0';
        for (;;) {
            const char *at = strcmp(dir, "/") == 0 ? "" : dir;
            const int32_t n = quota_at(at);
            if (n > 0 && (best == 0 || n < best)) best = n;
            if (at[0] == '\0') break;
            char *slash = strrchr(dir, '/');
            if (slash == dir) dir[1] = '\0'; /* up to the root */
            else *slash = '\0';
        }
        break;
    }
    free(line);
    fclose(f);
    return best;
}

/* CPUs in this thread's affinity mask, 0 when it cannot be read. The mask
 * grows until it holds every CPU the kernel may have (more than the fixed
 * cpu_set_t's 1024 on large machines). */
static int affinity_cpus(void) {
    for (int n = 1024; n <= (1 << 20); n *= 2) {
        cpu_set_t *set = CPU_ALLOC(n);
        if (!set) return 0;
        const size_t size = CPU_ALLOC_SIZE(n);
        CPU_ZERO_S(size, set);
        if (sched_getaffinity(0, size, set) == 0) {
            const int count = CPU_COUNT_S(size, set);
            CPU_FREE(set);
            return count;
        }
        CPU_FREE(set);
    }
    return 0;
}

int32_t vt_usable_cpus(void) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int32_t n = online < 1 ? 1 : online > INT32_MAX ? INT32_MAX : (int32_t)online;
    const int allowed = affinity_cpus();
    if (allowed >= 1 && allowed < n) n = allowed;
    const int32_t quota = cgroup_quota();
    if (quota >= 1 && quota < n) n = quota;
    return n;
}
