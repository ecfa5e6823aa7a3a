#!/bin/sh
# serve_vs_bench.sh — issue 14's measurement: `vt serve` under 1 and 8
# streaming clients against `vt bench`'s decode of as many sequences, the two
# alternated round by round in the same minutes (not CI).
#
#   bench/serve_vs_bench.sh [VT_BINARY] [MODEL]
#
# Defaults: build/bin/vt and /tmp/q06v.gguf (`vt synth --shape qwen3-0.6b
# --type q4_k_m --vocab-from ../shared/models/vocab/ggml-vocab-qwen2.gguf`: a
# real tokenizer, so the server's prompts and outputs are text). Environment:
# ROUNDS (default 3), CLIENTS (default 1,8), DURATION (seconds per serve level,
# default 20), TOKENS (max_tokens / bench -n, default 64), PORT (default 18231).
#
# One server (`vt serve -t 2 --parallel 8 -c 4096`) stays up for the whole run.
# Each round runs `vt bench --parallel CLIENTS -p P -n TOKENS` (P = the load
# generator's prompt length as `vt tokenize` counts it) and
# `bench/serve_load.py --clients CLIENTS`, bench first in odd rounds and serve
# first in even ones, so a drift of the machine's speed reaches both. The
# summary gives per round and as medians: bench's aggregate decode tok/s, the
# server's output tok/s (every token a client received over the level's wall
# time, prompts and round trips included) and its decode tok/s (the clients'
# rate between their first and last token), then the issue's two ratios: the
# server's output at the most clients ÷ at 1 client (target >= 3 at 8), and
# the server's 1-client decode ÷ bench's 1-sequence decode ("not slower"), by
# the client's whole decode time and by its median request (bench reports the
# median of its repetitions: one stalled request on a shared machine pulls a
# sum down, not a median).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
VT=${1:-build/bin/vt}
MODEL=${2:-/tmp/q06v.gguf}
ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-1,8}
DURATION=${DURATION:-20}
TOKENS=${TOKENS:-64}
PORT=${PORT:-18231}
PROMPT="Once upon a time, in a land far away, there lived a" # serve_load.py's default prompt
[ -x "$VT" ] || { echo "serve_vs_bench.sh: no vt binary at $VT" >&2; exit 2; }
[ -f "$MODEL" ] || { echo "serve_vs_bench.sh: no model at $MODEL" >&2; exit 2; }
. "$here/serve_lib.sh" # stops every server it started when this script ends, however it ends
OUT=$SERVE_DIR

P=$("$VT" tokenize -m "$MODEL" --ids "$PROMPT" | tr ',' '\n' | grep -c .)
echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); model: $MODEL; prompt $P tokens, $TOKENS generated;" \
    "clients/sequences $CLIENTS; $ROUNDS rounds"
. "$(dirname "$0")/machine.sh"
machine_line
SERVE_READY_SECONDS=60 serve_start "$OUT/serve.log" "$PORT" "$VT" serve -m "$MODEL" -t 2 --parallel 8 -c 4096 \
    --port "$PORT" || exit 1

run_bench() {
    echo "-- bench: $VT bench -m MODEL --backends simd -t 2 -p $P -n $TOKENS -r 3 --parallel $CLIENTS --membw-mib 0"
    "$VT" bench -m "$MODEL" --backends simd -t 2 -p "$P" -n "$TOKENS" -r 3 --parallel "$CLIENTS" --membw-mib 0 \
        --json >"$OUT/bench-$1.json"
    cat "$OUT/bench-$1.json"
}
run_serve() {
    echo "-- serve: serve_load.py --clients $CLIENTS --duration $DURATION --max-tokens $TOKENS"
    python3 "$here/serve_load.py" --url "http://127.0.0.1:$PORT" --clients "$CLIENTS" --duration "$DURATION" \
        --max-tokens "$TOKENS" --json >"$OUT/serve-$1.json"
    cat "$OUT/serve-$1.json"
}

r=1
while [ "$r" -le "$ROUNDS" ]; do
    echo
    echo "== round $r, uptime: $(uptime)"
    if [ $((r % 2)) -eq 1 ]; then run_bench "$r"; run_serve "$r"; else run_serve "$r"; run_bench "$r"; fi
    r=$((r + 1))
done
echo
echo "== after: $(uptime)"

python3 - "$OUT" "$ROUNDS" <<'EOF'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
rows = []
for r in range(1, rounds + 1):
    bench = json.load(open("%s/bench-%d.json" % (out, r)))
    serve = json.load(open("%s/serve-%d.json" % (out, r)))
    b = {e["n_seqs"]: e["tok_s_median"] for e in bench["results"] if e["test"].startswith("tg")}
    s = {e["clients"]: e for e in serve["results"]}
    rows.append((b, s))
levels = sorted(rows[0][1])
lo, hi = levels[0], levels[-1]
print("tok/s per round (bench: aggregate decode; serve: output / decode)")
for c in levels:
    print("  %2d  bench %-26s serve %s" % (
        c, " ".join("%6.1f" % b[c] for b, _ in rows),
        " ".join("%6.1f/%-6.1f" % (s[c]["output_tok_s"], s[c]["decode_tok_s"]) for _, s in rows)))
med = lambda xs: statistics.median(xs)
for c in levels:
    print("median %2d: bench %.1f, serve output %.1f, serve decode %.1f" % (
        c, med([b[c] for b, _ in rows]), med([s[c]["output_tok_s"] for _, s in rows]),
        med([s[c]["decode_tok_s"] for _, s in rows])))
if hi != lo:
    ratios = [s[hi]["output_tok_s"] / s[lo]["output_tok_s"] for _, s in rows]
    print("serve output at %d ÷ at %d clients: %s per round, median %.2f" % (
        hi, lo, " ".join("%.2f" % x for x in ratios), med(ratios)))
ratios = [s[lo]["decode_tok_s"] / b[lo] for b, s in rows]
print("serve decode at %d client ÷ bench at %d sequence: %s per round, median %.2f" % (
    lo, lo, " ".join("%.2f" % x for x in ratios), med(ratios)))
ratios = [s[lo]["decode_tok_s_median_request"] / b[lo] for b, s in rows]
print("the same with the server's median request (a median against bench's median): %s per round, median %.2f" % (
    " ".join("%.2f" % x for x in ratios), med(ratios)))
EOF
