#!/bin/sh
# prefill_vs_ik.sh — vt's simd backend against llama.cpp and ik_llama.cpp
# (the fastest CPU fork) on one GGUF, side by side in one run: issue 15's
# measure (simd pp128 >= 1.1x ik_llama.cpp's pp128). A benchmark, not CI.
#
#   bench/prefill_vs_ik.sh
#
# Variables (defaults in brackets):
#   VT        vt binary [build/bin/vt]
#   MODEL     GGUF [/tmp/q06.gguf, written by
#             `vt synth --shape qwen3-0.6b --type q4_k_m -o /tmp/q06.gguf`]
#   ORACLE    llama.cpp harness [/tmp/oracle/llama_harness, from
#             ../shared/oracle/build_oracle.sh]
#   IK_BENCH  ik_llama.cpp's llama-bench [/tmp/ik_llama/build/bin/llama-bench];
#             IK_BENCH=none leaves it out (its columns print as nan): for a
#             run before it is built, never for the issue's measure
#   ROUNDS    rounds [3]; THREADS [2]
#
# Building IK_BENCH (CPU only, native AVX2; ~25-60 min on 2 cores):
#   git clone https://github.com/ikawrakow/ik_llama.cpp /tmp/ik_llama
#   cd /tmp/ik_llama && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release \
#       -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF
#   cmake --build build -j2 --target llama-bench
# and note `git -C /tmp/ik_llama rev-parse HEAD` (or the COMMIT file left
# there) with the results.
#
# Each round runs, in this order: vt simd (pp128 + tg32, then pp512), vt onednn
# with its default fallback (the same tests), llama.cpp
# (f16 KV, flash attention on: its faster setting here), ik_llama.cpp
# (-rtr 1 -fa 1: run-time repacking, flash attention, f16 KV). Each
# invocation warms up, then times one run per test; the table gives the
# median over the rounds of each test, and the ratios of vt to each peer.
# Every raw line is printed with `uptime` before and after: the machine is
# shared, so compare ratios within one run.
set -eu
VT=${VT:-build/bin/vt}
MODEL=${MODEL:-/tmp/q06.gguf}
ORACLE=${ORACLE:-/tmp/oracle/llama_harness}
IK_BENCH=${IK_BENCH:-/tmp/ik_llama/build/bin/llama-bench}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}

need() { # $1 path, $2 what it is and how to get it
    [ -x "$1" ] || [ -f "$1" ] || { printf 'prefill_vs_ik: no %s at %s\n  %s\n' "$2" "$1" "$3" >&2; exit 2; }
}
need "$VT" "vt binary" "build vt: cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2 (or set VT)"
need "$MODEL" "model" "write it: $VT synth --shape qwen3-0.6b --type q4_k_m -o $MODEL (or set MODEL)"
need "$ORACLE" "llama.cpp harness" "build it: bash ../shared/oracle/build_oracle.sh (or set ORACLE)"
[ "$IK_BENCH" = none ] || need "$IK_BENCH" "ik_llama.cpp llama-bench" "build it as the header of $0 says (or set IK_BENCH)"
command -v python3 > /dev/null || { echo "prefill_vs_ik: needs python3 to read the JSON results" >&2; exit 2; }

raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
. "$(dirname "$0")/machine.sh"
machine_line
echo "uptime: $(uptime)"
echo "model: $MODEL ($(stat -c %s "$MODEL") bytes); threads: $THREADS; rounds: $ROUNDS"
echo "vt: $VT (git $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo "ik_llama.cpp: $IK_BENCH (commit $(cat "$(dirname "$IK_BENCH")/../../COMMIT" 2>/dev/null ||
    git -C "$(dirname "$IK_BENCH")/../.." rev-parse HEAD 2>/dev/null || echo '?'))"
echo

# Each result becomes a line "TOOL TEST TOK_S" in $raw.
record() { echo "$1 $2 $3" | tee -a "$raw"; }
json() { python3 -c "import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print($1)"; }

r=1
while [ "$r" -le "$ROUNDS" ]; do
    echo "== round $r: $(cut -d' ' -f1-3 /proc/loadavg)"
    # vt simd, then vt onednn with its default fallback (the best other
    # loaded backend by probe score: simd), as a user would run them.
    for be in simd onednn; do
        tool=vt; [ "$be" = simd ] || tool=vt-$be
        echo "-- vt: $VT bench -m MODEL --backends $be -p 128 -n 32 -r 1 -t $THREADS --json --membw-mib 0 (then -p 512 -n 0)"
        out=$("$VT" bench -m "$MODEL" --backends "$be" -p 128 -n 32 -r 1 -t "$THREADS" --json --membw-mib 0)
        record "$tool" pp128 "$(echo "$out" | json "[x['tok_s_median'] for x in d['results'] if x['test']=='pp128'][0]")"
        record "$tool" tg32 "$(echo "$out" | json "[x['tok_s_median'] for x in d['results'] if x['test']=='tg32'][0]")"
        record "$tool" create_s "$(echo "$out" | json "d['results'][0]['create_seconds']")"
        out=$("$VT" bench -m "$MODEL" --backends "$be" -p 512 -n 0 -r 1 -t "$THREADS" --json --membw-mib 0)
        record "$tool" pp512 "$(echo "$out" | json "d['results'][0]['tok_s_median']")"
    done

    echo "-- llama.cpp: $ORACLE MODEL bench -t $THREADS --kv f16 --fa on --pp 128 --tg 32 --reps 1 (then --pp 512 --tg 0)"
    out=$("$ORACLE" "$MODEL" bench -t "$THREADS" --kv f16 --fa on --pp 128 --tg 32 --reps 1 2> /dev/null)
    record llama.cpp pp128 "$(echo "$out" | json "d['pp_tok_s_mean']")"
    record llama.cpp tg32 "$(echo "$out" | json "d['tg_tok_s_mean']")"
    out=$("$ORACLE" "$MODEL" bench -t "$THREADS" --kv f16 --fa on --pp 512 --tg 0 --reps 1 2> /dev/null)
    record llama.cpp pp512 "$(echo "$out" | json "d['pp_tok_s_mean']")"

    if [ "$IK_BENCH" = none ]; then
        r=$((r + 1))
        continue
    fi
    echo "-- ik_llama.cpp: $IK_BENCH -m MODEL -t $THREADS -p 128,512 -n 32 -r 1 -rtr 1 -fa 1 -o json"
    out=$("$IK_BENCH" -m "$MODEL" -t "$THREADS" -p 128,512 -n 32 -r 1 -rtr 1 -fa 1 -o json 2> /dev/null |
        python3 -c "import json,sys; print(json.dumps(json.load(sys.stdin)))")
    for t in pp128 pp512 tg32; do
        p=${t#??}
        case $t in pp*) sel="x['n_prompt']==$p and x['n_gen']==0" ;; *) sel="x['n_gen']==$p and x['n_prompt']==0" ;; esac
        record ik_llama.cpp "$t" "$(echo "$out" | json "[x['avg_ts'] for x in d if $sel][0]")"
    done
    r=$((r + 1))
done
echo
echo "uptime: $(uptime)"
echo
python3 - "$raw" << 'EOF'
import statistics, sys
vals = {}
for line in open(sys.argv[1]):
    tool, test, v = line.split()
    vals.setdefault((tool, test), []).append(float(v))
med = {k: statistics.median(v) for k, v in vals.items()}
tools = ["vt", "vt-onednn", "llama.cpp", "ik_llama.cpp"]
print("medians over %d rounds, tokens/s" % len(vals[("vt", "pp128")]))
print("| test | vt simd | vt onednn (+simd) | llama.cpp | ik_llama.cpp | vt simd / llama.cpp | vt simd / ik_llama.cpp |")
print("|---|---|---|---|---|---|---|")
for t in ["pp128", "pp512", "tg32"]:
    m = [med.get((x, t), float("nan")) for x in tools]
    print("| %s | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f |" % (t, m[0], m[1], m[2], m[3], m[0] / m[2], m[0] / m[3]))
print("vt engine creation (weight preparation included): median %.2f s" % med[("vt", "create_s")])
if ("ik_llama.cpp", "pp128") in med:
    target = med[("vt", "pp128")] / med[("ik_llama.cpp", "pp128")]
    print("issue 15 target, simd pp128 >= 1.1x ik_llama.cpp's: %.2fx -> %s" % (target, "met" if target >= 1.1 else "NOT met"))
else:
    print("issue 15 target, simd pp128 >= 1.1x ik_llama.cpp's: not measured (IK_BENCH=none)")
EOF
