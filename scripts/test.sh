#!/usr/bin/env bash
# Runs the whole test suite. On a fresh Debian machine it first installs what the tests
# run for real: Prometheus and promtool (Debian's prometheus package), amtool
# (prometheus-alertmanager), jsonnet (renders the dashboards), the Python prometheus-client
# (its strict OpenMetrics parser), and the C and Go compilers that build the reproducer
# programs. Needs root or sudo only for that first install. The khugepaged regrowth test
# changes khugepaged settings (and restores them), so it needs root; CI runs as root.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v promtool >/dev/null || missing+=(prometheus)
command -v amtool >/dev/null || missing+=(prometheus-alertmanager)
command -v jsonnet >/dev/null || missing+=(jsonnet)
command -v python3 >/dev/null || missing+=(python3 python3-pip)
command -v setpriv >/dev/null || missing+=(util-linux)
command -v cc >/dev/null || missing+=(gcc libc6-dev)
command -v go >/dev/null || missing+=(golang-go)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]}" >&2
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ! python3 -c 'import prometheus_client.openmetrics.parser' 2>/dev/null; then
  echo "installing the Python prometheus-client" >&2
  python3 -m pip install -q prometheus-client 2>/dev/null \
    || python3 -m pip install -q --break-system-packages prometheus-client
fi

cargo test --all-targets "$@"
