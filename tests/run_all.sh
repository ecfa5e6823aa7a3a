#!/usr/bin/env bash
# Build and run every test twice: Release, then AddressSanitizer+UBSan (Debug).
# Installs the Debian packages it needs first. Exit status: non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/install-deps
jobs=${VT_JOBS:-$(nproc)}

echo "== Release build and tests"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"

echo "== AddressSanitizer + UBSan build and tests"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DVT_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
[ -f tests/lsan.supp ] && export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp}
ctest --test-dir build-asan --output-on-failure -j"$jobs" -E "${VT_ASAN_EXCLUDE:-^$}"
echo "== all tests passed (Release and ASan+UBSan)"
