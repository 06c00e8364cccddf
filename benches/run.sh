#!/usr/bin/env bash
# Reproduces every number in benches/BENCHMARKS.md and writes the summary tables to
# $OUT (default: target/bench-summary.md).
#
#   bash benches/run.sh            # full run, about 6 minutes on 2 cores
#   bash benches/run.sh --quick    # smoke run, about 1 minute (fewer rounds; numbers are rough)
#   bash benches/run.sh --criterion  # also the criterion benches (direct, keyed), +5 minutes
#
# The benches are their own crate (benches/Cargo.toml, built into benches/target unless
# CARGO_TARGET_DIR is set). Run it on an otherwise idle machine: `uptime` is recorded in the
# summary so a noisy run can be recognised.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=""
criterion=""
for arg in "$@"; do
    case "$arg" in
        --quick) quick="--quick" ;;
        --criterion) criterion=1 ;;
        *) echo "unknown option: $arg" >&2; exit 2 ;;
    esac
done

out="${OUT:-target/bench-summary.md}"
mkdir -p "$(dirname "$out")"

cargo_bench() { cargo bench --manifest-path benches/Cargo.toml "$@"; }
cargo_bench --no-run --quiet

{
    echo "# tollgate benchmark summary"
    echo
    echo "- date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "- rustc: $(rustc --version)"
    echo "- cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
    echo "- clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown)"
    echo "- load before: $(uptime | sed 's/.*load average/load average/')"
    echo "- mode: ${quick:-full}"
} >"$out"

for bench in compare clocks memory sweep_pause async_wakeups; do
    echo "== $bench" >&2
    cargo_bench --quiet --bench "$bench" -- $quick | tee -a "$out"
done

echo >>"$out"
echo "- load after: $(uptime | sed 's/.*load average/load average/')" >>"$out"

if [ -n "$criterion" ]; then
    cargo_bench --bench direct
    cargo_bench --bench keyed
fi

echo "summary written to $out" >&2
