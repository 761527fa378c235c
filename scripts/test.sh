#!/usr/bin/env bash
# Runs the whole test suite. On a fresh Debian machine it first installs what the tests
# run for real: promtool (Debian's prometheus package) and the Python prometheus-client
# (its strict OpenMetrics parser). Needs root or sudo only for that first install.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v promtool >/dev/null || missing+=(prometheus)
command -v python3 >/dev/null || missing+=(python3 python3-pip)
command -v setpriv >/dev/null || missing+=(util-linux)
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
