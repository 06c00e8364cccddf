#!/usr/bin/env bash
# Instructions per call of each hot path (callgrind, counting only `profile::run`, the measured
# loop, so setup and the TSC calibration are left out; loop and black_box included).
# Deterministic, so free of the machine's load.
#
#   bash benches/instructions.sh [CASE ...]     # default: the direct cases
#   bash benches/instructions.sh http-none http-pass http-ietf http-noheaders http-stacked http-gov \
#       http-gov-headers
#                                               # the HTTP layer's allowed path (feature http)
set -euo pipefail
cd "$(dirname "$0")"
calls=200000
features=()
[[ " $* " == *" http-"* ]] && features=(--features http)
exe=$(cargo bench --bench profile --no-run --message-format=json "${features[@]}" 2>/dev/null |
    sed -n 's/.*"executable":"\([^"]*profile[^"]*\)".*/\1/p' | tail -1)
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(direct direct-denied direct-floor direct-floor-denied direct-check direct-check-denied gov-direct gov-direct-denied)
echo "| case | instructions per call |"
echo "|---|---:|"
for c in "${cases[@]}"; do
    n=$calls
    # A request is thousands of instructions: fewer calls give the same figure.
    [[ $c == http-* ]] && n=20000
    out=$(mktemp)
    valgrind --tool=callgrind --toggle-collect='profile::run*' --callgrind-out-file="$out" \
        "$exe" "$c" "$n" >/dev/null 2>&1
    ir=$(callgrind_annotate "$out" | sed -n 's/^\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,)
    rm -f "$out"
    echo "| $c | $(awk -v ir="$ir" -v n="$n" 'BEGIN { printf "%.1f", ir / n }') |"
done
