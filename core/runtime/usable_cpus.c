/* usable_cpus.c — see usable_cpus.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
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
    const long long n = (quota + period - 1) / period;
    return n > INT32_MAX ? INT32_MAX : (int32_t)n;
}

/* The quota of this process's cgroup (v2 only: the "0::/path" line of
 * /proc/self/cgroup), 0 when there is none or it cannot be read. Only the
 * process's own cgroup is read: a limit set on a parent shows there too in
 * containers, where the process's cgroup is the container's root. */
static int32_t cgroup_quota(void) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return 0;
    char line[512], path[600] = "";
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "0::", 3) == 0) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(path, sizeof path, "/sys/fs/cgroup%s/cpu.max", line + 3);
            break;
        }
    fclose(f);
    if (!path[0] || !(f = fopen(path, "r"))) return 0;
    char text[64] = "";
    const int32_t n = fgets(text, sizeof text, f) ? vt_cpu_max_quota(text) : 0;
    fclose(f);
    return n;
}

int32_t vt_usable_cpus(void) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int32_t n = online < 1 ? 1 : online > INT32_MAX ? INT32_MAX : (int32_t)online;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        const int allowed = CPU_COUNT(&set);
        if (allowed >= 1 && allowed < n) n = allowed;
    }
    const int32_t quota = cgroup_quota();
    if (quota >= 1 && quota < n) n = quota;
    return n;
}
