#!/bin/sh
# perf_vs_llama.sh — vt's simd backend (and onednn with simd fallback) against
# llama.cpp on one GGUF, side by side in one run (a benchmark, not part of CI).
#
#   bench/perf_vs_llama.sh [VT_BINARY] [MODEL] [ORACLE_HARNESS]
#
# Defaults: build-perf/bin/vt, /tmp/simd_models/qwen3-0.6b-q4_k_m.gguf
# (written by `vt synth --shape qwen3-0.6b --type q4_k_m`), /tmp/oracle/llama_harness
# (../shared/oracle/build_oracle.sh). 2 threads, pp128 / tg32, 3 repetitions
# each after a warm-up; every run is printed whole, with `uptime` before and
# after (the machine is shared: compare ratios within one run).
# IK_BENCH=PATH (ik_llama.cpp's llama-bench, built as bench/prefill_vs_ik.sh
# says) adds ik_llama.cpp with run-time repacking and flash attention; for
# the side-by-side prefill table with pp512 and medians see prefill_vs_ik.sh.
set -eu
VT=${1:-build-perf/bin/vt}
MODEL=${2:-/tmp/simd_models/qwen3-0.6b-q4_k_m.gguf}
ORACLE=${3:-/tmp/oracle/llama_harness}
REPS=${REPS:-3}
echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
. "$(dirname "$0")/machine.sh"
machine_line
echo "uptime: $(uptime)"
echo "model: $MODEL ($(stat -c %s "$MODEL") bytes)"
echo
echo "== vt simd: $VT bench -m MODEL --backends simd -p 128 -n 32 -r $REPS -t 2"
"$VT" bench -m "$MODEL" --backends simd -p 128 -n 32 -r "$REPS" -t 2
echo
echo "== llama.cpp, f32 KV, flash attention off: $ORACLE MODEL bench -t 2 --pp 128 --tg 32 --reps $REPS"
"$ORACLE" "$MODEL" bench -t 2 --pp 128 --tg 32 --reps "$REPS" 2>&1 | grep -v '^llama\|^load\|^print_info\|^\.' || true
echo
echo "== llama.cpp, f16 KV, flash attention on: $ORACLE MODEL bench -t 2 --kv f16 --fa on --pp 128 --tg 32 --reps $REPS"
"$ORACLE" "$MODEL" bench -t 2 --kv f16 --fa on --pp 128 --tg 32 --reps "$REPS" 2>&1 | grep -v '^llama\|^load\|^print_info\|^\.' || true
echo
if [ -n "${IK_BENCH:-}" ]; then
    echo "== ik_llama.cpp, f16 KV, flash attention, run-time repacking: $IK_BENCH -m MODEL -t 2 -p 128 -n 32 -r $REPS -rtr 1 -fa 1"
    "$IK_BENCH" -m "$MODEL" -t 2 -p 128 -n 32 -r "$REPS" -rtr 1 -fa 1 2> /dev/null
    echo
fi
echo "== vt onednn (+simd fallback): $VT bench -m MODEL --backends onednn --fallback simd -p 128 -n 32 -r $REPS -t 2"
"$VT" bench -m "$MODEL" --backends onednn --fallback simd -p 128 -n 32 -r "$REPS" -t 2
echo
echo "== vt simd again (drift check)"
"$VT" bench -m "$MODEL" --backends simd -p 128 -n 32 -r "$REPS" -t 2
echo
echo "uptime: $(uptime)"
