#!/usr/bin/env bash
# Builds the static (musl) binary the container image ships, natively, and checks it: the
# same build as deploy/container/Containerfile, for machines without a container engine.
# Installs the musl target and musl-tools when missing. Prints the binary's path and size.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

target=x86_64-unknown-linux-musl
rustup target list --installed | grep -x "$target" >/dev/null || rustup target add "$target"
if ! command -v musl-gcc >/dev/null; then
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends musl-tools >/dev/null
fi
CC_x86_64_unknown_linux_musl=musl-gcc cargo build --release --locked --target "$target" --bin membloat_exporter
bin="target/$target/release/membloat_exporter"
out="target/$target/membloat_exporter.stripped"
strip -o "$out" "$bin"
if ldd "$out" 2>&1 | grep -E 'statically linked|not a dynamic executable' >/dev/null; then :; else
  echo "not static:" >&2; ldd "$out" >&2; exit 1
fi
"$out" --version
# Read whole before grep: `grep -q` stops at the first match, and the exporter, still
# writing, would die of SIGPIPE (which pipefail reports as a failure).
text=$("$out" --once --once.interval=0s)
grep -q '^membloat_memory_total_bytes ' <<<"$text"
echo "static binary $out: $(stat -c %s "$out") bytes"
