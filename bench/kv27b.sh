#!/bin/sh
# kv27b.sh — the KV-cache lever at the scale of the bug it guards against
# (not CI: it writes a ~16 GB model and reads all of it per token).
#
# Synthesizes a qwen3 model of ~27B parameters in Q4_K_M with `vt synth
# --shape qwen3-27b` (n_embd 5120, 54 layers, 64 heads / 8 KV heads,
# head_dim 128, n_ff 25600, vocab 151936), then on every loaded backend runs
# a prefill of 8 tokens and 2 decode steps with VT_KV_CACHE_F32=1 under
# /usr/bin/time -v, and records into bench/results/kv27b-<date>.txt:
#   - exit status, the KV-cache line of --explain and where each plan's nodes run;
#   - the prepared weights, the file pages released for them and the weights
#     kept in the file's layout because two backends read them (--explain);
#   - peak RSS (the rule: under 20 GB; the weights are mmapped, so their
#     touched pages count, but no whole-model f32 copy may exist beside them,
#     and a tensor a backend prepared must not stay resident twice: its file
#     pages are released once only prepared copies read it);
#   - wall time, and vt's own prompt / decode timing (time per token).
#
# usage: bench/kv27b.sh [VT_BINARY] [SCRATCH_DIR]
#   VT_BINARY    default: build/bin/vt
#   SCRATCH_DIR  default: /tmp/vt-kv27b (needs ~17 GB free; the model is kept
#                there for reruns, delete it when done)
# Environment: KV27B_BACKENDS="simd onednn" to run a subset; KV27B_CTX (default
# 256) tokens of KV cache; KV27B_THREADS (default: all CPUs); KV27B_LAYERS=N
# writes the same shape with N layers instead of 54 (a quick check of the
# script and per-layer figures; NOT the acceptance run, which is the default;
# results go to kv27b-<date>-<N>l.txt). KV27B_RESULTS_DIR=DIR writes there
# instead of bench/results/.
#
# Synthesis uses --random-blocks by default (KV27B_SYNTH_ARGS="" for the
# normal sample + Q4_K quantization per weight, which takes ~30-40 min on 2
# idle cores): the run measures memory and time, which depend only on the
# tensors' shapes and types.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
results=${KV27B_RESULTS_DIR:-$here/results}
vt=${1:-$here/../build/bin/vt}
scratch=${2:-/tmp/vt-kv27b}
ctx=${KV27B_CTX:-256}
threads=${KV27B_THREADS:-$(nproc)}
layers=${KV27B_LAYERS:-54}
model=$scratch/qwen3-27b-q4_k_m-${layers}l.gguf
mkdir -p "$results" "$scratch"
out=$results/kv27b-$(date +%Y-%m-%d)$([ "$layers" = 54 ] || echo "-${layers}l").txt

[ -x "$vt" ] || { echo "kv27b: no vt binary at $vt (build first or pass its path)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "kv27b: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }

log() { echo "$*" | tee -a "$out"; }

: > "$out"
log "# kv27b $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n): $(nproc) CPUs, $(free -g | awk '/^Mem:/{print $2}') GiB RAM, load $(cut -d' ' -f1-3 /proc/loadavg)"
. "$here/machine.sh"
log "# $(machine_line)"
log "# vt: $vt  threads: $threads  ctx: $ctx  git: $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')"

# ---- the model -------------------------------------------------------------
if [ ! -s "$model" ]; then
    avail_kb=$(df -Pk "$scratch" | awk 'NR==2{print $4}')
    if [ "$avail_kb" -lt $((18 * 1024 * 1024)) ]; then
        log "kv27b: only $((avail_kb / 1024 / 1024)) GB free in $scratch; the model needs ~17 GB"
        exit 2
    fi
    # --random-blocks: quantized matrices drawn as random blocks (same tensors,
    # types and bytes as llama-quantize's Q4_K_M mix); minutes instead of the
    # hours a normal sample + Q4_K quantization per weight takes on 2 cores.
    synth_extra=${KV27B_SYNTH_ARGS---random-blocks}
    log "## synth: vt synth --shape qwen3-27b --n-layer $layers --type q4_k_m $synth_extra"
    # Written under another name and renamed when complete, so an interrupted
    # run never leaves a truncated model that a rerun would take as done.
    # shellcheck disable=SC2086 # synth_extra is a list of flags
    /usr/bin/time -v "$vt" synth --shape qwen3-27b --n-layer "$layers" --type q4_k_m --seed 27 $synth_extra -o "$model.part" \
        2> "$scratch/synth.err" || { cat "$scratch/synth.err" >&2; exit 1; }
    mv "$model.part" "$model"
    log "synth: $(grep -E 'Elapsed \(wall' "$scratch/synth.err" | sed 's/.*: //') wall, peak RSS $(awk '/Maximum resident/{printf "%.2f GB", $6*1024/1e9}' "$scratch/synth.err")"
fi
log "model: $model, $(stat -c %s "$model" | awk '{printf "%.2f GB", $1/1e9}')"

# ---- every backend -----------------------------------------------------------
backends=${KV27B_BACKENDS:-$("$vt" backends 2>/dev/null | awk '$2 == "loaded" {print $1}')}
# 8 prompt tokens as ids (the synthesized vocabulary's text would tokenize to
# a different count); -n 3 = the token sampled from the prefill + 2 decode steps.
prompt=1000,2000,3000,4000,5000,6000,7000,8000
fail=0
for b in $backends; do
    log ""
    log "## backend $b: VT_KV_CACHE_F32=1 vt run --tokens <8 ids> -n 3 --backend $b -c $ctx --explain"
    err=$scratch/run-$b.err
    set +e
    VT_KV_CACHE_F32=1 /usr/bin/time -v "$vt" run -m "$model" --tokens "$prompt" -n 3 --ids --ignore-eos --temp 0 \
        --backend "$b" -c "$ctx" -t "$threads" --explain > "$scratch/run-$b.out" 2> "$err"
    rc=$?
    set -e
    rss_kb=$(awk '/Maximum resident set size/{print $6}' "$err")
    log "exit: $rc"
    log "$(grep -E '^kv-cache dtype:' "$err" || echo 'kv-cache dtype: (no plan printed)')"
    for phase in prefill decode; do
        log "$phase nodes per backend: $(awk -v p="  $phase" 'index($0, p) == 1 { for (i = 1; i <= NF; i++) if ($i ~ /^backend=/) n[substr($i, 9)]++ }
            END { for (k in n) printf "%s %d  ", k, n[k] }' "$err")"
    done
    log "$(grep -E '^prepared weights:' "$err" || echo 'prepared weights: (not printed)')"
    log "$(grep -E '^originals released:' "$err" || echo 'originals released: none (no tensor read only through prepared copies)')"
    log "$(grep -E '^shared weights:' "$err" || echo 'shared weights: none (no weight read by nodes of two backends)')"
    log "stores: $(grep -c 'op=reshape_and_cache.*in=f32,f32,f32,f32,i64' "$err") of $(grep -c 'op=reshape_and_cache' "$err") write f32 k/v into the f32 cache"
    log "generated ids: $(cat "$scratch/run-$b.out" | tr -d '\n')"
    log "$(grep -E '^vt: prompt' "$err" || grep -E '^vt: ' "$err" | tail -1)"
    log "wall: $(grep -E 'Elapsed \(wall' "$err" | sed 's/.*: //'), peak RSS: $(echo "$rss_kb" | awk '{printf "%.2f GB (%d kB)", $1*1024/1e9, $1}')"
    if [ "$rc" -ne 0 ]; then
        fail=1
    elif [ "${rss_kb:-0}" -ge 19531250 ]; then # 20e9 bytes in kB
        log "FAIL: peak RSS is not under 20 GB"
        fail=1
    else
        log "OK: completed with an f32 cache, peak RSS under 20 GB"
    fi
done
log ""
log "# written to $out"
exit $fail
