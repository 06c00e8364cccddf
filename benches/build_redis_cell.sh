#!/usr/bin/env bash
# Builds redis-cell 0.2.2's Redis module (CL.THROTTLE) from the `redis-cell` crate on crates.io,
# for the same-run comparison in benches/redis_hot.rs. Nothing is vendored: a scratch Cargo
# project depends on redis-cell =0.2.2, `cargo fetch` unpacks it into the Cargo registry, it is
# copied to a scratch directory, and its `crate-type` is changed to cdylib (the one edit; the
# published crate builds an rlib). Prints the path of the module (.so).
#
#   bash benches/build_redis_cell.sh [SCRATCH_DIR]   # default: ${TMPDIR:-/tmp}/tollgate-redis-cell
set -euo pipefail
dir="${1:-${TMPDIR:-/tmp}/tollgate-redis-cell}"
mkdir -p "$dir/fetch/src"
if [ ! -f "$dir/fetch/Cargo.toml" ]; then
    cat >"$dir/fetch/Cargo.toml" <<'TOML'
[package]
name = "fetch-redis-cell"
version = "0.0.0"
edition = "2021"
publish = false
[workspace]
[dependencies]
redis-cell = "=0.2.2"
TOML
    echo "" >"$dir/fetch/src/lib.rs"
fi
(cd "$dir/fetch" && cargo fetch --quiet)
src=$(cd "$dir/fetch" && cargo metadata --format-version 1 --quiet |
    python3 -c 'import json,sys; m=json.load(sys.stdin); print(next(p["manifest_path"] for p in m["packages"] if p["name"]=="redis-cell"))')
src=$(dirname "$src")
rm -rf "$dir/redis-cell"
cp -r "$src" "$dir/redis-cell"
cd "$dir/redis-cell"
# The one change: build the crate as a loadable module.
if grep -q '^crate-type' Cargo.toml; then
    sed -i 's/^crate-type *=.*/crate-type = ["cdylib"]/' Cargo.toml
else
    python3 - <<'PY'
import re
t = open("Cargo.toml").read()
if "[lib]" in t:
    t = t.replace("[lib]", '[lib]\ncrate-type = ["cdylib"]', 1)
else:
    t += '\n[lib]\ncrate-type = ["cdylib"]\n'
open("Cargo.toml", "w").write(t)
PY
fi
# Its own workspace, so the build does not look for a parent one.
grep -q '^\[workspace\]' Cargo.toml || printf '\n[workspace]\n' >>Cargo.toml
# Its own target dir too: a CARGO_TARGET_DIR set for the benches would put the module there.
CARGO_INCREMENTAL=0 cargo build --release --quiet --target-dir target 2>build.log || { cat build.log >&2; exit 1; }
so=$(ls "$dir"/redis-cell/target/release/libredis_cell.so)
echo "$so"
