#!/usr/bin/env bash
# Client instructions per Redis check on the uniform workload (100k keys), an option off and
# on (coalescing; OPTION=batches for local batches): callgrind over the whole bench process (the checks, the tokio runtime and the
# connection's I/O; redis-server runs outside valgrind) at two call counts, the difference
# divided by the difference in checks, so that setup and warm-up cancel out. Deterministic up
# to how replies group into reads (a few instructions per check), so free of the machine's
# load.
#
#   bash benches/redis_instructions.sh [TASKS ...]    # default: 1 and 16 tasks
#   OPTION=batches bash benches/redis_instructions.sh  # local batches instead of coalescing
#   OPTION=hot-batches bash benches/redis_instructions.sh 1
#       # one allowed hot key, the plain script against local batches (every call after the
#       # first few batches a local grant)
#   OPTION=cell bash benches/redis_instructions.sh 1
#       # the plain script against the bench's CL.THROTTLE contender (redis-cell loaded into
#       # the server; the same ConnectionManager call the bench makes), the same way
set -euo pipefail
cd "$(dirname "$0")"
tasks=("$@")
[ ${#tasks[@]} -gt 0 ] || tasks=(1 16)
exe=$(cargo bench --features redis --bench redis_hot --no-run --message-format=json 2>/dev/null |
    sed -n 's/.*"executable":"\([^"]*redis_hot[^"]*\)".*/\1/p' | tail -1)
ir() {
    local out
    out=$(mktemp)
    valgrind --tool=callgrind --callgrind-out-file="$out" "$exe" --instructions "$@" >/dev/null 2>&1
    callgrind_annotate "$out" 2>/dev/null | sed -n 's/^\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,
    rm -f "$out"
}
option=${OPTION:-on}
name=coalescing
[ "$option" = on ] || name=$option
if [ "$option" = cell ]; then
    echo "| tasks | GCRA script | CL.THROTTLE | CL.THROTTLE / script |"
else
    echo "| tasks | $name off | $name on | on / off |"
fi
echo "|---:|---:|---:|---:|"
off=off
[ "${option#hot-}" = "$option" ] || off=hot-off
for t in "${tasks[@]}"; do
    per=()
    for mode in "$off" "$option"; do
        a=$(ir "$mode" 4000 "$t")
        b=$(ir "$mode" 24000 "$t")
        # Each run makes its calls and a warm-up of a tenth as many.
        per+=("$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.0f", (b - a) / (1.1 * 20000) }')")
    done
    echo "| $t | ${per[0]} | ${per[1]} | $(awk -v a="${per[0]}" -v b="${per[1]}" 'BEGIN { printf "%.3f", b / a }') |"
done
