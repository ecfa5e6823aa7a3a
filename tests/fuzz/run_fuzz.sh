#!/usr/bin/env bash
# Run every libFuzzer target for a bounded time on its committed corpus.
#
# usage: tests/fuzz/run_fuzz.sh BUILD_DIR [TOTAL_SECONDS]
#   BUILD_DIR      a clang build configured with -DVT_FUZZ=ON (its bin/ holds
#                  fuzz_gguf, fuzz_options, fuzz_tokenizer, fuzz_vocab, fuzz_model,
#                  fuzz_serve_request, fuzz_grammar, fuzz_json_schema, fuzz_jinja,
#                  fuzz_tool_calls)
#   TOTAL_SECONDS  time shared equally by the targets (default 90, at least 60)
#
# Each target starts from its committed seeds (read, never rewritten) plus a
# scratch directory that collects the new inputs it finds; those are thrown
# away. Any finding (crash, sanitizer report, leak, timeout, out-of-memory)
# fails the run, and libFuzzer writes the input that caused it into the
# target's committed corpus directory (crash-*, leak-*, timeout-*, oom-*),
# where the plain-C replay programs in ctest keep running it as a regression
# input once it is fixed and committed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:?usage: run_fuzz.sh BUILD_DIR [TOTAL_SECONDS]}"
total="${2:-90}"
if [ "$total" -lt 60 ]; then
  echo "run_fuzz.sh: TOTAL_SECONDS must be at least 60 (got $total)" >&2
  exit 2
fi

# target:corpus directory (relative to tests/fuzz)
targets=(fuzz_gguf:corpus fuzz_options:corpus-options fuzz_tokenizer:corpus-tokenizer fuzz_vocab:corpus-vocab
         fuzz_model:corpus-model fuzz_serve_request:corpus-serve fuzz_grammar:corpus-grammar
         fuzz_json_schema:corpus-json-schema fuzz_jinja:corpus-jinja fuzz_tool_calls:corpus-tool-calls
         fuzz_chat_render:corpus-chat-render)
# Longest input per target: the GGUF ones default to their largest seed; the
# text ones may grow past their short seeds (long prompts, long ini files).
declare -A max_len=([fuzz_options]=4096 [fuzz_tokenizer]=4096 [fuzz_serve_request]=4096 [fuzz_grammar]=4096
                   [fuzz_json_schema]=4096 [fuzz_jinja]=20000 [fuzz_tool_calls]=4096 [fuzz_chat_render]=8192)
per=$(( total / ${#targets[@]} ))

for t in "${targets[@]}"; do
  bin="$build/bin/${t%%:*}"
  if [ ! -x "$bin" ]; then
    echo "run_fuzz.sh: $bin is missing: configure $build with CC=clang -DVT_FUZZ=ON and build it" >&2
    exit 1
  fi
done

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
# Leaks count as findings; the exit codes tell libFuzzer's own reports apart.
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

failed=()
for t in "${targets[@]}"; do
  name="${t%%:*}"
  corpus="$here/${t#*:}"
  mkdir -p "$scratch/$name"
  echo "== $name: ${per}s on $corpus"
  log="$scratch/$name.log"
  extra=()
  [ -n "${max_len[$name]:-}" ] && extra+=(-max_len="${max_len[$name]}")
  set +e
  # -timeout: one input running longer than 10 s is a hang finding.
  # -rss_limit_mb / -malloc_limit_mb: an input that makes the code under test
  #   ask for more than 1 GiB is an out-of-memory finding.
  "$build/bin/$name" "$scratch/$name" "$corpus" \
    -max_total_time="$per" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -artifact_prefix="$corpus/" -print_final_stats=1 "${extra[@]}" >"$log" 2>&1
  rc=$?
  set -e
  grep -E "^#[0-9]+.*(DONE|INITED)|stat::number_of_executed_units|stat::new_units_added" "$log" || true
  if [ $rc -ne 0 ]; then
    echo "!! $name found a problem (exit $rc); last lines of its log:" >&2
    tail -n 60 "$log" >&2
    grep -o "Test unit written to .*" "$log" >&2 || true
    failed+=("$name")
  fi
done

if [ ${#failed[@]} -ne 0 ]; then
  echo "run_fuzz.sh: findings in: ${failed[*]}; the inputs are in their corpus directories" \
       "(fix the bug, then commit the input as a regression test)" >&2
  exit 1
fi
echo "== fuzzing: no findings in ${total}s over ${#targets[@]} targets"
