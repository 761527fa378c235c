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
  mirror=""
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    mirror=$(awk '/^URIs:/ && $2 ~ /debian\/?$/ {print $2; exit}' "$f")
    [ -n "$mirror" ] && break
  done
  if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
    mirror=$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}' /etc/apt/sources.list)
  fi
  [ -n "$mirror" ] || { echo "vm-kernels: no Debian mirror in this machine's apt sources" >&2; exit 1; }
  mirror=${mirror%/}
  apt=$dir/.apt
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/debs"
  : > "$apt/sources.list"
  for k in "${want[@]}"; do
    set -- $k
    echo "deb [trusted=yes] ${mirror%/debian}/$3 $2 main" >> "$apt/sources.list"
  done
  sort -u -o "$apt/sources.list" "$apt/sources.list"
  opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o Debug::NoLocking=1
        -o APT::Sandbox::User=root -o APT::Default-Release= -qq)
  apt-get "${opts[@]}" update >&2
  for k in "${want[@]}"; do
    set -- $k
    tree=$dir/$1
    rm -rf "$tree"
    mkdir -p "$tree"
    if [ "$1" = busybox ]; then
      (cd "$apt/debs" && apt-get "${opts[@]}" download busybox-static/"$2" >&2)
      dpkg-deb -x "$(ls "$apt/debs"/busybox-static_*.deb | head -1)" "$tree"
    else
      # linux-image-amd64 of the suite names the kernel package it stands for.
      image=$(apt-cache "${opts[@]}" show "linux-image-amd64/$2" \
        | awk -F': ' '/^Depends:/ {split($2, d, /[ ,]/); print d[1]; exit}')
      [ -n "$image" ] || { echo "vm-kernels: no linux-image-amd64 in $2" >&2; exit 1; }
      # The unsigned image holds the same kernel and modules, without the signing
      # wrapper package.
      package=$image
      apt-cache "${opts[@]}" show "$image-unsigned/$2" >/dev/null 2>&1 && package=$image-unsigned
      rm -f "$apt/debs/$package"_*.deb
      (cd "$apt/debs" && apt-get "${opts[@]}" download "$package/$2" >&2)
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
