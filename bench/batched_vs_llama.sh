#!/bin/sh
# batched_vs_llama.sh — issue 13's measurement: vt's aggregate decode with S
# sequences in one step against its own single-sequence decode and against
# llama.cpp's batched decode at the same S, side by side in one run (a
# benchmark, not part of CI).
#
#   bench/batched_vs_llama.sh [VT_BINARY] [MODEL] [ORACLE_HARNESS]
#
# Defaults: build/bin/vt, /tmp/q06.gguf (written by `vt synth --shape
# qwen3-0.6b --type q4_k_m`), /tmp/oracle/llama_harness
# (../shared/oracle/build_oracle.sh). Environment: SEQS (default "1 4 8"),
# ROUNDS (default 2), PP (128), TG (32), REPS (3 per round), FA (llama.cpp's
# flash attention settings to run, default "off on"; the faster one is its
# figure). 2 threads, f16 KV cache on both sides.
#
# Each round runs vt (`vt bench --parallel`, its S values interleaved in one
# process) and then llama.cpp at every S and FA setting, so a drift of the
# machine's speed reaches both; every raw line is printed, then per S the
# median over the rounds of vt's medians and of llama.cpp's means, and the
# ratios the issue sets targets for (vt at S ÷ vt at 1, vt ÷ llama.cpp).
set -eu
VT=${1:-build/bin/vt}
MODEL=${2:-/tmp/q06.gguf}
ORACLE=${3:-/tmp/oracle/llama_harness}
SEQS=${SEQS:-1 4 8}
ROUNDS=${ROUNDS:-2}
PP=${PP:-128}
TG=${TG:-32}
REPS=${REPS:-3}
FA=${FA:-off on}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
list=$(echo $SEQS | tr ' ' ',')
echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
. "$(dirname "$0")/machine.sh"
machine_line
echo "model: $MODEL ($(stat -c %s "$MODEL") bytes); S = $SEQS; pp $PP, tg $TG; $ROUNDS rounds"
r=1
while [ "$r" -le "$ROUNDS" ]; do
    echo
    echo "== round $r, uptime: $(uptime)"
    echo "-- vt: $VT bench -m MODEL --backends simd -t 2 -p $PP -n $TG -r $REPS --parallel $list --json"
    "$VT" bench -m "$MODEL" --backends simd -t 2 -p "$PP" -n "$TG" -r "$REPS" --parallel "$list" --json \
        > "$OUT/vt-$r.json"
    cat "$OUT/vt-$r.json"
    echo
    for s in $SEQS; do
        for fa in $FA; do
            echo "-- llama.cpp: $ORACLE MODEL batched -t 2 --pp $PP --tg $TG --np $s --reps $REPS --kv f16 --fa $fa"
            "$ORACLE" "$MODEL" batched -t 2 --pp "$PP" --tg "$TG" --np "$s" --reps "$REPS" --kv f16 --fa "$fa" \
                2> /dev/null | grep '^{' | tee -a "$OUT/llama-$r.jsonl"
        done
    done
    r=$((r + 1))
done
echo
echo "== after: $(uptime)"
python3 - "$OUT" "$ROUNDS" $SEQS <<'EOF'
import json, statistics, sys
out, rounds, seqs = sys.argv[1], int(sys.argv[2]), [int(s) for s in sys.argv[3:]]
vt = {s: [] for s in seqs}
ll = {s: [] for s in seqs}
for r in range(1, rounds + 1):
    for e in json.load(open(f"{out}/vt-{r}.json"))["results"]:
        if e.get("test", "").startswith("tg") and e.get("n_seqs") in vt:
            vt[e["n_seqs"]].append(e["tok_s_median"])
    best = {}
    for line in open(f"{out}/llama-{r}.jsonl"):
        d = json.loads(line)
        best[d["n_seqs"]] = max(best.get(d["n_seqs"], 0.0), d["tg_tok_s_mean"])
    for s, v in best.items():
        if s in ll:
            ll[s].append(v)
med = lambda xs: statistics.median(xs) if xs else float("nan")
one = med(vt[seqs[0]]) if seqs[0] == 1 else float("nan")
print("aggregate decode tok/s, median over rounds (vt: median of its reps; llama.cpp: mean of its reps, faster FA setting)")
print(f"{'S':>3} {'vt':>9} {'llama.cpp':>10} {'vt/llama':>9} {'vt/vt@1':>8}   per round vt | llama.cpp")
for s in seqs:
    v, l = med(vt[s]), med(ll[s])
    rows = " ".join(f"{x:.1f}" for x in vt[s]) + " | " + " ".join(f"{x:.1f}" for x in ll[s])
    print(f"{s:>3} {v:9.1f} {l:10.1f} {v / l:9.2f} {v / one:8.2f}   {rows}")
EOF
