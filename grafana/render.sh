#!/usr/bin/env bash
# Renders the dashboards from dashboards.jsonnet into the provisioning-ready JSON files
# beside it. Run after editing the jsonnet; the dashboard tests fail while they differ.
set -euo pipefail
cd "$(dirname "$0")"
jsonnet -m . dashboards.jsonnet >/dev/null
