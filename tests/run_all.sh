#!/usr/bin/env bash
# Build and run every test twice: Release, then AddressSanitizer+UBSan (Debug);
# then fuzz every libFuzzer target for a bounded time (clang, build-fuzz).
# Installs the Debian packages it needs first. Exit status: non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
# The settings first, so a bad one fails now rather than after the builds.
fuzz_seconds=${VT_FUZZ_SECONDS:-90}
if ! [ "$fuzz_seconds" -ge 60 ] 2>/dev/null; then
  echo "run_all.sh: VT_FUZZ_SECONDS must be a whole number of seconds, at least 60 (got '$fuzz_seconds')" >&2
  exit 2
fi
bash .ci/install-deps
jobs=${VT_JOBS:-$(nproc)}
# The machine, first: a failure that depends on the CPU (its ISA, its speed)
# is read against it.
cpu=$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | sed 's/^[^:]*: *//' || true)
isa=$(grep -o -w 'avx2\|avx512f\|avx512_vnni\|avx512_bf16\|amx_int8\|amx_bf16' /proc/cpuinfo 2>/dev/null | sort -u |
  tr '\n' ' ' || true)
echo "== machine: ${cpu:-unknown CPU}, $(nproc) CPUs; ISA: ${isa:-none of avx2/avx512/amx}"

echo "== Release build and tests"
# Tests and -Werror on explicitly: a build folder configured by README's main
# job (tests off, warnings not errors) must not make this a run of no tests.
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DVT_BUILD_TESTS=ON -DVT_BUILD_BENCH=ON -DVT_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
# VT_CHECK_PLAN=1: the executor re-offers every node to its backend on a plan's
# first run (on by default in the Debug/ASan build below).
VT_CHECK_PLAN=1 ctest --test-dir build --output-on-failure -j"$jobs" 2>&1 | tee build/ctest.log

echo "== AddressSanitizer + UBSan build and tests"
# -O1: sanitizers stay exact, tests run several times faster than at -O0; asserts stay on.
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1" -DVT_SANITIZE=ON -DVT_BUILD_TESTS=ON \
  -DVT_WERROR=ON >/dev/null
cmake --build build-asan -j"$jobs"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
[ -f tests/lsan.supp ] && export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp}
asan_status=0
ctest --test-dir build-asan --output-on-failure -j"$jobs" -E "${VT_ASAN_EXCLUDE:-^$}" 2>&1 | tee build-asan/ctest.log ||
  asan_status=$?
if [ "$asan_status" -ne 0 ]; then
  # LeakSanitizer's leak check at exit stops the process with a ptrace "tracer";
  # that tracer itself sometimes dies of SIGSEGV ("Tracer caught signal 11",
  # google/sanitizers#723/#1170). The cause seen here (oneDNN's OpenMP threads'
  # dynamic TLS, test_batch) is avoided in every runner (tests/runner/
  # asan_defaults.c); for any other, it is no finding about vt: such a test,
  # and only such a test, runs once more and must then pass, leak check included.
  bash tests/rerun_lsan_tracer_crashes.sh build-asan 2>&1 | tee -a build-asan/ctest.log
fi

echo "== Build without oneDNN (the backend is optional at configure time)"
# A configure without the onednn backend builds and its tests report skips,
# not failures: the onednn runners exit 77 and everything else passes.
cmake -S . -B build-no-onednn -DCMAKE_BUILD_TYPE=Release -DVT_BUILD_ONEDNN=OFF -DVT_BUILD_TESTS=ON -DVT_WERROR=ON >/dev/null
cmake --build build-no-onednn -j"$jobs"
ctest --test-dir build-no-onednn --output-on-failure -j"$jobs" 2>&1 | tee build-no-onednn/ctest.log

# Every fuzz target for a bounded time on its committed corpus; a finding fails
# the run and its input is saved next to the corpus (tests/fuzz/run_fuzz.sh).
# libFuzzer needs clang (libclang-rt-14-dev): without it this step fails, it
# is never skipped.
echo "== Fuzzing with clang + libFuzzer (${fuzz_seconds}s)"
if ! command -v clang >/dev/null; then
  echo "run_all.sh: clang is not installed; the fuzzing step needs it (bash .ci/install-deps)" >&2
  exit 1
fi
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Release -DVT_FUZZ=ON >/dev/null
cmake --build build-fuzz -j"$jobs" --target fuzz_gguf fuzz_options fuzz_tokenizer fuzz_vocab fuzz_model \
  fuzz_serve_request fuzz_grammar fuzz_json_schema fuzz_jinja fuzz_tool_calls fuzz_chat_render
bash tests/fuzz/run_fuzz.sh build-fuzz "$fuzz_seconds"
echo "== all tests passed (Release, ASan+UBSan, without oneDNN) and fuzzing found nothing"
# Any failure above has already stopped the script (set -e, pipefail). A runner
# exits 77 when it skipped for a hardware or build fact; ctest marks it Skipped.
count() { grep -hcE "$1" build/ctest.log build-asan/ctest.log build-no-onednn/ctest.log | awk '{s += $1} END {print s + 0}'; }
passed=$(count 'Test +#[0-9]+: .* Passed')
skipped=$(count 'Test +#[0-9]+: .*\*\*\*Skipped')
echo "counts are CUnit runners (one ctest entry per tests/test_*.c; test_simd_ops twice, its own tier and avx2)"
echo "over the Release, ASan+UBSan and no-oneDNN passes; the no-oneDNN pass skips the runners that need"
echo "onednn by design"
echo "tests: $passed passed, 0 failed, $skipped skipped"
# What each skipping runner left out and why (its "SKIP:" lines; a runner that
# skips one case still runs and checks the others, but ctest marks it Skipped).
for d in build build-asan build-no-onednn; do
  awk -v pass="$d" '/^[0-9]+\/[0-9]+ Testing: / { runner = $3 }
    /^SKIP: / { sub(/^SKIP: /, ""); print "  skipped in " pass ": " runner ": " $0 }' \
    "$d/Testing/Temporary/LastTest.log" 2>/dev/null | sort -u
done
