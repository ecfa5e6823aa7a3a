/* machine.h — what a measurement was taken on: the CPU's model name, its
 * logical cores and the vector extensions it and the OS offer. Every
 * performance figure vt prints carries these (vt bench), because these
 * machines differ (AVX2-only cores, AVX-512 and AMX cores) and a figure
 * without its machine cannot be compared with another. */
#ifndef VT_CORE_MACHINE_H
#define VT_CORE_MACHINE_H

typedef struct vt_machine {
    char cpu[128]; /* /proc/cpuinfo's model name ("unknown" where there is none) */
    int cores;     /* logical CPUs online */
    char isa[192]; /* "avx2 avx512f ... amx_int8": vt_cpu_isa_list */
} vt_machine;

void vt_machine_describe(vt_machine *m);

#endif
