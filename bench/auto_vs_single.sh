#!/bin/sh
# auto_vs_single.sh — `--backend auto` against the single backends, the
# measurement issue 19 asks for, in one command (not CI: it writes ~5 GB of
# models and runs for 10-30 minutes).
#
# For each weight type (F32, F16, BF16, Q4_K_M) of the qwen3-0.6B shape, in
# one run: the calibration (`vt backends --calibrate`, its time), where
# auto's decode and prefill plans differ from simd's and from onednn's
# (`--dry-run --explain`: backend, op and dtypes of every node), then `vt bench --backends
# auto,simd,onednn` with its repetitions interleaved round-robin (so a drift of
# the machine's speed reaches every backend alike), and a summary line per
# test: auto over the best single backend (ratio of the medians, and the
# median of the per-round ratios). `onednn` is onednn with
# its default fallback (simd), the hand-made combination for F16/BF16.
# The load average is recorded before and after each file: on a shared
# machine the figures are not an idle machine's.
#
# usage: bench/auto_vs_single.sh [VT_BINARY] [SCRATCH_DIR]
#   VT_BINARY    default: build/bin/vt
#   SCRATCH_DIR  default: /tmp/vt-auto-vs-single (the models are kept there
#                for reruns; ~5 GB, delete it when done)
# Environment: AVS_TYPES (default "f32 f16 bf16 q4_k_m"), AVS_REPS (default
# 5), AVS_THREADS (default 2), AVS_RESULTS_DIR (default bench/results),
# AVS_SHAPE (default qwen3-0.6b; tiny checks the script in seconds),
# AVS_BACKENDS (default auto,simd,onednn,simd: the order the engines are
# created in; the rounds rotate the run order but an engine keeps its creation
# slot, so a second run with onednn,simd,auto,simd balances that too). The
# second simd is a second engine of simd's very plan, labelled simd#2: how far
# apart two identical plans measure in this run is the floor under which
# auto's ratio to simd means nothing.
# Output: AVS_RESULTS_DIR/auto-vs-single-<date>-<HHMM>.txt (everything printed) and
# auto-vs-single-<date>-<HHMM>-<type>.json (vt bench --json per file).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
vt=${1:-$here/../build/bin/vt}
scratch=${2:-/tmp/vt-auto-vs-single}
types=${AVS_TYPES:-f32 f16 bf16 q4_k_m}
reps=${AVS_REPS:-5}
threads=${AVS_THREADS:-2}
shape=${AVS_SHAPE:-qwen3-0.6b}
backends=${AVS_BACKENDS:-auto,simd,onednn,simd}
results=${AVS_RESULTS_DIR:-$here/results}
stamp=$(date +%Y-%m-%d-%H%M) # to the minute: a second run the same day keeps the first one's files
log=$results/auto-vs-single-$stamp.txt
mkdir -p "$results" "$scratch"
[ -x "$vt" ] || { echo "auto_vs_single.sh: no vt binary at $vt (build first)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "auto_vs_single.sh: python3 is needed for the summary" >&2; exit 2; }

# Nodes of one phase (decode or prefill) of --backend NAME as "label op
# backend dtypes", in plan order (no index: a node inserted by one plan, a
# convert, must not make every later node differ).
phase_plan() {
    "$vt" run -m "$1" -t "$threads" --backend "$2" --dry-run --explain -n 1 2>&1 |
        grep -E "^ *$3 " | sed 's/  cost:.*//' | awk '{$1 = ""; $2 = ""; print}' | sed 's/^ *//'
}

# Per test: every backend's median, and auto over the best single backend
# (by median) two ways: the ratio of the medians, and the median over the
# rounds of auto's run over that backend's run in the same round (paired:
# the runs of one round are seconds apart, so a drift of the machine's speed
# cancels in each ratio). A repeated backend (NAME#2) is not a candidate for
# the best; its ratios to NAME, the same two ways, are the run's noise floor.
summary() {
    python3 - "$1" <<'EOF'
import json, statistics, sys
doc = json.load(open(sys.argv[1]))
by_test = {}
for r in doc["results"]:
    if "error" in r:
        print("  %s: error: %s" % (r["backend"], r["error"]))
        continue
    by_test.setdefault(r["test"], {})[r["backend"]] = r
for test, m in by_test.items():
    line = "  %-6s " % test + "  ".join("%s %.2f (sd %.2f)" % (b, r["tok_s_median"], r["tok_s_stdev"]) for b, r in m.items())
    def ratios(a, o):
        paired = statistics.median(x / y for x, y in zip(a["runs"], o["runs"]))
        return "medians %.3f, paired by round %.3f" % (a["tok_s_median"] / o["tok_s_median"], paired)
    others = {b: r for b, r in m.items() if b != "auto" and "#" not in b}
    if "auto" in m and others:
        best = max(others, key=lambda b: others[b]["tok_s_median"])
        line += "\n         auto / best single (%s): %s" % (best, ratios(m["auto"], others[best]))
    for b in m:
        if "#" in b and b.split("#")[0] in m:
            line += "\n         %s / %s (one plan twice, the noise floor): %s" % (b, b.split("#")[0], ratios(m[b], m[b.split("#")[0]]))
    print(line)
EOF
}

{
    echo "== auto_vs_single.sh $stamp: vt $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?') on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs"
    echo "   threads $threads, repetitions $reps (interleaved round-robin), pp128 tg32"
    . "$here/machine.sh"
    machine_line
    for t in $types; do
        model=$scratch/$shape-$t.gguf
        [ -f "$model" ] || "$vt" synth --shape "$shape" --type "$t" -o "$model" 2>&1 | tail -1
        echo
        echo "== $t: $model"
        echo "load before: $(cat /proc/loadavg)"
        echo "-- $vt backends --calibrate -m MODEL -t $threads (the bench's engines then hit the cache)"
        "$vt" backends --calibrate -m "$model" -t "$threads" 2>&1
        # where auto's plans differ from simd's and from onednn's (the
        # hand-made combination), per phase: the nodes by label and backend
        for phase in decode prefill; do
            phase_plan "$model" auto "$phase" >"$scratch/$phase-auto-$t.txt"
            for other in simd onednn; do
                phase_plan "$model" "$other" "$phase" >"$scratch/$phase-$other-$t.txt"
                n=$(wc -l <"$scratch/$phase-auto-$t.txt")
                if cmp -s "$scratch/$phase-auto-$t.txt" "$scratch/$phase-$other-$t.txt"; then
                    echo "$phase plan: auto's is $other's, node for node ($n nodes)"
                else
                    d=$(diff "$scratch/$phase-auto-$t.txt" "$scratch/$phase-$other-$t.txt" | grep -c '^<' || true)
                    echo "$phase plan: auto's differs from $other's at $d of $n nodes; auto's differing nodes" \
                        "(label op backend dtypes), counted:"
                    diff "$scratch/$phase-auto-$t.txt" "$scratch/$phase-$other-$t.txt" | grep '^<' |
                        sed 's/^< blk\.[0-9]*\./< /; s/^< /    /' | sort | uniq -c || true
                fi
            done
        done
        json=$results/auto-vs-single-$stamp-$t.json
        echo "-- $vt bench -m MODEL --backends $backends -t $threads -p 128 -n 32 -r $reps --json"
        "$vt" bench -m "$model" --backends "$backends" -t "$threads" -p 128 -n 32 -r "$reps" --json >"$json"
        summary "$json"
        echo "load after: $(cat /proc/loadavg)"
    done
} 2>&1 | tee "$log"
echo "recorded: $log" >&2
