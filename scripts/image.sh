#!/usr/bin/env bash
# Builds the container image of deploy/container/Containerfile with buildah, on a machine
# with no container engine and no registry: the Containerfile's build stage (cargo in
# rust:alpine, which needs Docker Hub) is replaced by the same static musl binary built
# natively (scripts/static-build.sh); its final stage is used as written. Writes the OCI
# layout target/image/layout (tag VERSION) and the archive
# target/image/membloat_exporter-VERSION.oci.tar (`podman load -i`, `docker load -i`),
# and prints the archive's path last.
set -euo pipefail
cd "$(dirname "$0")/.."
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
if ! command -v buildah >/dev/null; then
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends buildah >/dev/null
fi
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
./scripts/static-build.sh >&2
out=$PWD/target/image
rm -rf "$out"
mkdir -p "$out/context"
cp target/x86_64-unknown-linux-musl/membloat_exporter.stripped "$out/context/membloat_exporter"
# A build stage that holds the binary where the Containerfile's COPY --from=build takes
# it, then the Containerfile's last stage, verbatim.
from=$(grep -n '^FROM ' deploy/container/Containerfile | tail -1 | cut -d: -f1)
{
  echo "FROM scratch AS build"
  echo "COPY membloat_exporter /src/target/release/membloat_exporter"
  tail -n "+$from" deploy/container/Containerfile
} > "$out/context/Containerfile"
store=(--root "$out/storage" --runroot "$out/run" --storage-driver vfs)
tag=localhost/membloat_exporter:$version
buildah "${store[@]}" bud --isolation chroot --layers=false --quiet \
  -f "$out/context/Containerfile" -t "$tag" "$out/context" >&2
buildah "${store[@]}" push --quiet "$tag" "oci:$out/layout:$version" >&2
buildah "${store[@]}" push --quiet "$tag" "oci-archive:$out/membloat_exporter-$version.oci.tar:membloat_exporter:$version" >&2
buildah "${store[@]}" rmi --all >/dev/null 2>&1 || true
rm -rf "$out/storage" "$out/run"
echo "image membloat_exporter:$version: $(stat -c %s "$out/membloat_exporter-$version.oci.tar") bytes (archive), user $(grep '^USER' deploy/container/Containerfile | cut -d' ' -f2)" >&2
echo "$out/membloat_exporter-$version.oci.tar"
