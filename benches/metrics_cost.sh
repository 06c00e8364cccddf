#!/usr/bin/env bash
# The metrics feature's cost, same run: builds benches/metrics_cost.rs without and with the
# feature, then runs the two binaries alternately (3 times each), printing their tables. Compare
# the `x floor` column of the same row across the two builds.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
echo "load before: $(uptime | sed 's/.*load average/load average/')"
bin() {
    cargo bench --manifest-path benches/Cargo.toml --bench metrics_cost --no-run "$@" 2>&1 \
        | sed -n 's/.*(\(.*metrics_cost-[0-9a-f]*\)).*/\1/p' | tail -1
}
off="$(mktemp)"; on="$(mktemp)"
cp "$(bin)" "$off"
cp "$(bin --features metrics)" "$on"
chmod +x "$off" "$on" # mktemp makes them 0600: cp keeps that mode
for _ in 1 2 3; do
    "$off" --bench "$@"
    "$on" --bench "$@"
done
echo "load after: $(uptime | sed 's/.*load average/load average/')"
rm -f "$off" "$on"
