#!/usr/bin/env bash
# rerun_lsan_tracer_crashes.sh BUILD_DIR — after a failed ctest run in BUILD_DIR,
# runs again the failed tests whose failure was LeakSanitizer's own tracer
# dying ("Tracer caught signal N ... LeakSanitizer has encountered a fatal
# error"), not a finding. Exits non-zero when any failed test failed for
# another reason (its output is already printed), when no test failed that
# way, or when a re-run fails: a crash that repeats is not let through.
set -euo pipefail
build=${1:?usage: rerun_lsan_tracer_crashes.sh BUILD_DIR}
failed_list=$build/Testing/Temporary/LastTestsFailed.log
test_log=$build/Testing/Temporary/LastTest.log
[ -s "$failed_list" ] || { echo "rerun: no list of failed tests in $failed_list" >&2; exit 1; }

# The output ctest recorded for one test, from LastTest.log.
output_of() {
  awk -v name="$1" '
    $0 ~ "^[0-9]+/[0-9]+ Test: " name "$" { inside = 1; next }
    inside && /^<end of output>$/ { exit }
    inside { print }' "$test_log"
}

names=()
while IFS=: read -r _ name; do
  out=$(output_of "$name")
  if grep -q '^Tracer caught signal [0-9]*' <<<"$out" &&
    grep -q 'LeakSanitizer has encountered a fatal error' <<<"$out" &&
    ! grep -q -E 'ERROR: (AddressSanitizer|LeakSanitizer): |runtime error: ' <<<"$out" &&
    ! grep -q -E '^ +(tests|asserts) +[0-9]+ +[0-9]+ +[0-9]+ +[1-9]' <<<"$out"; then
    names+=("$name")
  else
    echo "rerun: $name failed for another reason than LeakSanitizer's tracer; not re-run" >&2
    exit 1
  fi
done <"$failed_list"
[ "${#names[@]}" -gt 0 ] || exit 1

regex="^($(IFS='|'; echo "${names[*]}"))\$"
echo "== LeakSanitizer's tracer crashed at exit in: ${names[*]}; running them once more"
ctest --test-dir "$build" --output-on-failure -R "$regex"
