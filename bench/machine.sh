#!/bin/sh
# machine.sh — one line naming the machine a benchmark ran on, for the top of
# every file under bench/results: the CPU's model name, its logical cores and
# the vector extensions it offers (the ones vt's kernels and llama.cpp's
# variants choose between). These machines differ (AVX2-only cores, AVX-512
# and AMX cores), so a figure without this line cannot be compared.
#
#   . bench/machine.sh; machine_line     (or: sh bench/machine.sh)
machine_line() {
    model=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo 2>/dev/null | head -n 1)
    isa=$(grep -o -w 'avx2\|avx_vnni\|avx512f\|avx512bw\|avx512vl\|avx512_vnni\|avx512_bf16\|avx512_fp16\|amx_tile\|amx_int8\|amx_bf16' \
        /proc/cpuinfo 2>/dev/null | sort -u | tr '\n' ' ')
    echo "machine: ${model:-unknown}, $(nproc) cores; vector extensions: ${isa% }"
}
case "$0" in
*machine.sh) machine_line ;;
esac
