#!/bin/sh
# serve_old_new.sh — two builds of `vt serve` under the same streaming load,
# alternated round by round in the same minutes (not CI): did a change to the
# server cost throughput?
#
#   bench/serve_old_new.sh OLD_VT NEW_VT [MODEL]
#
# MODEL defaults to /tmp/q06v.gguf (`vt synth --shape qwen3-0.6b --type
# q4_k_m --vocab-from ../shared/models/vocab/ggml-vocab-qwen2.gguf`).
# Environment: ROUNDS (default 3), CLIENTS (default 8), DURATION (seconds per
# level, default 15), TOKENS (max_tokens, default 64), PORT (default 18232).
#
# Each round starts one build's `vt serve -t 2 --parallel 8 -c 4096`, runs
# `bench/serve_load.py --clients CLIENTS` against it, stops it, and does the
# same with the other build; the old one goes first in odd rounds and second
# in even ones. Printed: every raw result, then per round the two output
# tok/s and new ÷ old, and the median of those ratios.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
OLD=${1:?usage: serve_old_new.sh OLD_VT NEW_VT [MODEL]}
NEW=${2:?usage: serve_old_new.sh OLD_VT NEW_VT [MODEL]}
MODEL=${3:-/tmp/q06v.gguf}
ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-8}
DURATION=${DURATION:-15}
TOKENS=${TOKENS:-64}
PORT=${PORT:-18232}
for f in "$OLD" "$NEW"; do [ -x "$f" ] || { echo "serve_old_new.sh: no vt binary at $f" >&2; exit 2; }; done
[ -f "$MODEL" ] || { echo "serve_old_new.sh: no model at $MODEL" >&2; exit 2; }
. "$here/serve_lib.sh" # stops every server it started when this script ends, however it ends
OUT=$SERVE_DIR

echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); model: $MODEL; clients $CLIENTS, $TOKENS tokens, $ROUNDS rounds"
. "$here/machine.sh"
machine_line
echo "old: $OLD"
echo "new: $NEW"

# One level of load against build $1 (label $2): output tok/s on stdout's last line.
measure() {
    serve_start "$OUT/serve-$2.log" "$PORT" "$1" serve -m "$MODEL" -t 2 --parallel 8 -c 4096 --port "$PORT" ||
        { echo "serve_old_new.sh: the $2 build's server did not become ready" >&2; exit 1; }
    python3 "$here/serve_load.py" --url "http://127.0.0.1:$PORT" --clients "$CLIENTS" --duration "$DURATION" \
        --max-tokens "$TOKENS" --json >"$OUT/load-$2.json" || echo "serve_old_new.sh: $2: some requests failed (their errors are in the JSON)" >&2
    serve_stop
    cat "$OUT/load-$2.json" >&2
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["results"][0]["output_tok_s"])' "$OUT/load-$2.json"
}

ratios=
r=1
while [ "$r" -le "$ROUNDS" ]; do
    echo "== round $r, uptime: $(uptime)" >&2
    if [ $((r % 2)) -eq 1 ]; then o=$(measure "$OLD" old); n=$(measure "$NEW" new)
    else n=$(measure "$NEW" new); o=$(measure "$OLD" old); fi
    ratio=$(python3 -c "print('%.3f' % ($n / $o))")
    echo "round $r: old $o, new $n output tok/s: new / old $ratio"
    ratios="$ratios $ratio"
    r=$((r + 1))
done
python3 -c "import statistics, sys; print('median new / old: %.3f' % statistics.median(float(x) for x in sys.argv[1:]))" $ratios
