#!/usr/bin/env bash
# Prints the path of a Helm 3 binary: `helm` on PATH if there is one, else the pinned
# version built from its Go module into target/tools/bin (Debian has no Helm package;
# about two minutes the first time, then cached). Used by deploy/kubernetes/render.sh
# and the chart's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
version=v3.16.4
if command -v helm >/dev/null && helm version --short 2>/dev/null | grep '^v3\.' >/dev/null; then
  command -v helm
  exit 0
fi
bin="$PWD/target/tools/bin/helm"
if ! [ -x "$bin" ] || ! "$bin" version --short 2>/dev/null | grep "^$version" >/dev/null; then
  echo "building helm $version from its Go module into target/tools/bin" >&2
  mkdir -p target/tools/bin
  # The version and the Kubernetes version `helm template` assumes, as Helm's Makefile sets them.
  ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version"
  ldflags+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=31"
  ldflags+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=31"
  GOBIN="$PWD/target/tools/bin" GOFLAGS=-mod=mod CGO_ENABLED=0 \
    go install -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$version" >&2
fi
echo "$bin"
