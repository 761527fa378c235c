#!/usr/bin/env bash
# Fetches the Debian kernels the VM tests boot (tests/kernels.rs, scripts/vm.sh) and
# unpacks each with the modules the guest loads: bullseye's 5.10 (its current build is
# only in the security suite), bookworm's 6.1 and trixie's 6.12, the generic -amd64
# flavour (cloud-amd64 lacks 9p). Also unpacks bookworm's static busybox, the guest's
# init. Nothing is installed: packages come through `apt-get download` with a private apt
# state that reuses this machine's Debian mirror, and are unpacked with `dpkg-deb -x`.
#
#   scripts/vm-kernels.sh DIR   prints one line per kernel: NAME RELEASE TREE, then
#                               "busybox PATH"
#
# Trees already complete in DIR are reused, so CI downloads each kernel once per cache.
set -euo pipefail
# A step that fails says which, even one that prints nothing of its own.
trap 'echo "$(basename "$0"): line $LINENO: $BASH_COMMAND failed" >&2' ERR
. "$(dirname "$0")/debian-archive.sh"
dir=${1:?usage: vm-kernels.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# name, suite, archive (debian or debian-security)
kernels=("5.10 bullseye-security debian-security" "6.1 bookworm debian" "6.12 trixie debian")

want=()
for k in "${kernels[@]}"; do
  set -- $k
  [ -e "$dir/$1/.complete" ] || want+=("$k")
done
[ -e "$dir/busybox/.complete" ] || want+=("busybox bookworm debian")

if [ ${#want[@]} -gt 0 ]; then
  apt=$dir/.apt
  suites=()
  for k in "${want[@]}"; do
    set -- $k
    suites+=("$2 $3")
  done
  private_apt "$apt" "${suites[@]}"
  for k in "${want[@]}"; do
    set -- $k
    tree=$dir/$1
    rm -rf "$tree"
    mkdir -p "$tree"
    if [ "$1" = busybox ]; then
      (cd "$apt/debs" && apt-get "${apt_opts[@]}" download busybox-static/"$2" >&2)
      dpkg-deb -x "$(ls "$apt/debs"/busybox-static_*.deb | head -1)" "$tree"
    else
      # linux-image-amd64 of the suite names the kernel package it stands for.
      image=$(apt-cache "${apt_opts[@]}" show "linux-image-amd64/$2" \
        | awk -F': ' '/^Depends:/ {split($2, d, /[ ,]/); print d[1]; exit}')
      [ -n "$image" ] || { echo "vm-kernels: no linux-image-amd64 in $2" >&2; exit 1; }
      # The unsigned image holds the same kernel and modules, without the signing
      # wrapper package.
      package=$image
      apt-cache "${apt_opts[@]}" show "$image-unsigned/$2" >/dev/null 2>&1 && package=$image-unsigned
      rm -f "$apt/debs/$package"_*.deb
      (cd "$apt/debs" && apt-get "${apt_opts[@]}" download "$package/$2" >&2)
      dpkg-deb -x "$(ls "$apt/debs/$package"_*.deb | head -1)" "$tree"
      # Only the kernel and the modules the guest loads are kept.
      release=$(ls "$tree/boot" | sed -n 's/^vmlinuz-//p' | head -1)
      echo "$release" > "$tree/release"
    fi
    rm -f "$apt/debs"/*.deb
    touch "$tree/.complete"
  done
fi

for k in "${kernels[@]}"; do
  set -- $k
  echo "$1 $(cat "$dir/$1/release") $dir/$1"
done
echo "busybox $dir/busybox/bin/busybox"
