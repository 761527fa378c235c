#!/usr/bin/env bash
# Unpacks other glibc versions beside the system's, for the differential heap tester
# (tests/differential.rs): Debian 11's glibc 2.31 and Debian 13's 2.41, each as a tree
# with its loader, libc and development files. Nothing is installed: the packages are
# fetched with `apt-get download` through a private apt state that reuses this machine's
# Debian mirror, and unpacked with `dpkg-deb -x`.
#
#   scripts/glibc-trees.sh DIR    prints one line per tree: VERSION TREE
#
# A program runs on a tree when linked with the tree's loader and libraries
# (tests/differential.rs shows the gcc line). Trees already in DIR are reused.
set -euo pipefail
# A step that fails says which, even one that prints nothing of its own.
trap 'echo "$(basename "$0"): line $LINENO: $BASH_COMMAND failed" >&2' ERR
. "$(dirname "$0")/debian-archive.sh"
dir=${1:?usage: glibc-trees.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# suite, version prefix
releases=("bullseye 2.31" "trixie 2.41")

want=()
for r in "${releases[@]}"; do
  set -- $r
  [ -e "$dir/$2/.complete" ] || want+=("$r")
done

if [ ${#want[@]} -gt 0 ]; then
  apt=$dir/.apt
  suites=()
  for r in "${want[@]}"; do
    set -- $r
    suites+=("$1")
  done
  private_apt "$apt" "${suites[@]}"
  for r in "${want[@]}"; do
    set -- $r
    version=$(apt-cache "${apt_opts[@]}" madison libc6 | awk -v v="$2" '$3 ~ "^" v "-" {print $3; exit}')
    [ -n "$version" ] || { echo "glibc-trees: no libc6 $2 in $1" >&2; exit 1; }
    (cd "$apt/debs" && apt-get "${apt_opts[@]}" download "libc6=$version" "libc6-dev=$version" >&2)
    tree=$dir/$2
    rm -rf "$tree"
    mkdir -p "$tree"
    for deb in "$apt/debs"/libc6_"$version"_*.deb "$apt/debs"/libc6-dev_"$version"_*.deb; do
      dpkg-deb -x "$deb" "$tree"
    done
    # Debian 13 is usr-merged: /lib and /lib64 are links that base-files makes.
    for d in lib lib64; do
      [ -e "$tree/$d" ] || [ ! -d "$tree/usr/$d" ] || ln -s "usr/$d" "$tree/$d"
    done
    # Absolute links inside the packages would lead back to this machine's glibc.
    find "$tree" -type l -lname '/*' | while read -r link; do
      target=$(readlink "$link")
      ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$tree$target")" "$link"
    done
    touch "$tree/.complete"
  done
fi

for r in "${releases[@]}"; do
  set -- $r
  echo "$2 $dir/$2"
done
