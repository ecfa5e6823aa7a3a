/* machine.c — see machine.h. */
#include "machine.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "vt/vt_cpu.h"

/* The CPU's model name from /proc/cpuinfo (what the kernel read from the
 * CPU's brand string; a hypervisor may shorten it). */
static void cpu_model(char *buf, size_t size) {
    snprintf(buf, size, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        const char *colon = strchr(line, ':');
        if (!colon) continue;
        colon++;
        while (*colon == ' ' || *colon == '\t') colon++;
        snprintf(buf, size, "%s", colon);
        buf[strcspn(buf, "\r\n")] = '\0';
        break;
    }
    fclose(f);
}

void vt_machine_describe(vt_machine *m) {
    cpu_model(m->cpu, sizeof m->cpu);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    m->cores = n > 0 ? (int)n : 1;
    vt_cpu_features f = vt_cpu_detect();
    vt_cpu_isa_list(&f, m->isa, sizeof m->isa);
}
