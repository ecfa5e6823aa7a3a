/* usable_cpus.h — how many CPUs this process may actually run on: the
 * default thread count. Online CPUs overstate it wherever the process is
 * confined (taskset, systemd's CPUAffinity=/AllowedCPUs=, a container's
 * cpuset or CPU quota), and a thread more than the CPUs it may use makes
 * every step wait for the thread that is not running. */
#ifndef VT_CORE_USABLE_CPUS_H
#define VT_CORE_USABLE_CPUS_H

#include <stdint.h>

/* The smallest of: the CPUs online, the CPUs of this thread's affinity
 * mask, and the cgroup v2 CPU quotas (cpu.max, rounded up) of this
 * process's cgroup and its parents. At least 1. */
int32_t vt_usable_cpus(void);

/* The CPUs a cgroup v2 cpu.max line allows ("max 100000": no limit, 0;
 * "150000 100000": 2, a fraction rounded up), or 0 when text is not such a
 * line. */
int32_t vt_cpu_max_quota(const char *text);

#endif
