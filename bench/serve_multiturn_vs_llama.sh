#!/bin/sh
# serve_multiturn_vs_llama.sh — multi-turn chats against `vt serve` and
# ik_llama.cpp's llama-server, one after the other in one run, same model,
# threads, slots and context: C conversations at once, each a shared system
# prompt of about 1,500 tokens plus its own turns, every turn resending the
# history (bench/serve_load.py --conversations). What automatic prefix
# caching is measured by: later turns' TTFT against the first turn's and
# against llama-server's (its prompt cache on: a slot reuses its own last
# prompt), output tok/s, inter-token percentiles. A benchmark, not CI.
#
#   sh bench/serve_multiturn_vs_llama.sh VT MODEL LLAMA_SERVER
#     VT            build/bin/vt
#     MODEL         a GGUF with a chat template and a real vocabulary, e.g.
#                   vt synth --shape qwen3-0.6b --type q4_k_m --vocab-from
#                   tests/data/models/vocab/ggml-vocab-qwen2.gguf -o /tmp/q06v.gguf
#     LLAMA_SERVER  ik_llama.cpp's llama-server (build: bench/prefill_vs_ik.sh)
#   env: CONVERSATIONS (8), TURNS (3), SLOTS (4), THREADS (2), MAX_TOKENS (32),
#        SYSTEM_WORDS (1390: 1,516 tokens with the Qwen2 vocabulary), CTX (16384: the KV pool; llama-server: CTX/SLOTS a slot),
#        NICE (0: run both servers, and the load generator, at this niceness,
#        e.g. -15 on a shared machine; the load generator stands for clients
#        on other machines, and below the servers' priority it is starved
#        while they compute: see serve_load.py),
#        TEMPERATURE (0.8, as chat clients sample; 0 is greedy — on a random
#        model a greedy answer repeats one token whose text re-tokenizes
#        differently when the client sends it back, so no server's cache can
#        match the answer's blocks, where a sampled answer's text gives back
#        the tokens that were generated),
#        LLAMA_ARGS (--reasoning-format none: without it llama-server parses a
#        random model's sampled answer for reasoning and tool calls and dies of
#        an uncaught "Failed to parse input", ending every stream)
set -eu
VT=${1:?usage: serve_multiturn_vs_llama.sh VT MODEL LLAMA_SERVER}
MODEL=${2:?model}
LLAMA_SERVER=${3:?llama-server}
C=${CONVERSATIONS:-8} T=${TURNS:-3} SLOTS=${SLOTS:-4} THREADS=${THREADS:-2}
MAXTOK=${MAX_TOKENS:-32} WORDS=${SYSTEM_WORDS:-1390} CTX=${CTX:-16384} NICE=${NICE:-0}
TEMP=${TEMPERATURE:-0.8} LLAMA_ARGS=${LLAMA_ARGS:---reasoning-format none}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/serve_lib.sh"
sh "$here/machine.sh" 2>/dev/null || true
echo "model: $MODEL; $C conversations x $T turns, system prompt $WORDS words, $MAXTOK tokens an answer," \
     "temperature $TEMP, $SLOTS slots, $THREADS threads, KV pool $CTX tokens"

echo "== vt serve: $VT serve -m MODEL -t $THREADS --max-seqs $SLOTS -c $CTX"
serve_start "$SERVE_DIR/vt.log" 18131 nice -n "$NICE" "$VT" serve -m "$MODEL" --port 18131 -t "$THREADS" \
    --max-seqs "$SLOTS" -c "$CTX"
nice -n "$NICE" python3 "$here/serve_load.py" --url http://127.0.0.1:18131 --conversations "$C" --turns "$T" \
    --system-words "$WORDS" --max-tokens "$MAXTOK" --temperature "$TEMP"
serve_stop

echo "== ik_llama.cpp llama-server: $LLAMA_SERVER -m MODEL -t $THREADS -np $SLOTS -c $CTX $LLAMA_ARGS (prompt cache on)"
# shellcheck disable=SC2086 # LLAMA_ARGS is a list of arguments
serve_start "$SERVE_DIR/llama.log" 18132 nice -n "$NICE" "$LLAMA_SERVER" -m "$MODEL" --port 18132 -t "$THREADS" \
    -np "$SLOTS" -c "$CTX" $LLAMA_ARGS
nice -n "$NICE" python3 "$here/serve_load.py" --url http://127.0.0.1:18132 --conversations "$C" --turns "$T" \
    --system-words "$WORDS" --max-tokens "$MAXTOK" --temperature "$TEMP"
serve_stop
echo "done $(uptime)"
