#!/usr/bin/env bash
# Prints the path of `kubenode`, the parts of a single-node Kubernetes cluster (etcd, the
# API server, controller manager, scheduler, kubelet, kube-proxy and kubectl) built as
# one binary from the k8s.io/kubernetes Go module by tests/cluster/node (its go.mod pins
# the version), for the cluster tier (tests/cluster.rs). Built into target/tools/bin the
# first time (about 12 minutes on 2 CPUs, most of it compiling Kubernetes), then reused
# while tests/cluster/node is unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
src=tests/cluster/node
bin=$PWD/target/tools/bin/kubenode
stamp=$(cat "$0" "$src/go.mod" "$src/go.sum" "$src/main.go" | sha256sum | cut -c1-16)
# One build at a time: scripts/test.sh starts one ahead, and the cluster tier's call waits
# for it here rather than build beside it.
mkdir -p target/tools/bin
exec 9>"$bin.lock"
flock 9
if ! [ -x "$bin" ] || [ "$(cat "$bin.stamp" 2>/dev/null)" != "$stamp" ]; then
  echo "building kubenode (k8s.io/kubernetes from $src/go.mod) into target/tools/bin" >&2
  mkdir -p target/tools/bin
  # The version each part reports (the API server's /version, the node's kubeletVersion),
  # as Kubernetes' own build (hack/lib/version.sh) sets it.
  version=$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' "$src/go.mod")
  minor=$(echo "$version" | cut -d. -f2)
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  (cd "$src" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$bin.tmp" .) >&2
  mv "$bin.tmp" "$bin"
  echo "$stamp" > "$bin.stamp"
fi
echo "$bin"
