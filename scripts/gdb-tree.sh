#!/usr/bin/env bash
# Unpacks Debian 13's gdb (16.3, which writes a thread's whole extended state back, AMX
# included) with every library it needs, beside this machine's own gdb (Debian 12's 13.1,
# which cannot on a CPU with AMX), for the live-command tests (tests/explain.rs): the canary
# must refuse the one that harms a process on this host and allow the one that does not.
# Nothing is installed: the packages are fetched with `apt-get download` through a private
# apt state that reuses this machine's Debian mirror (scripts/debian-archive.sh), and
# unpacked with `dpkg-deb -x`; the tree's own loader runs it.
#
#   scripts/gdb-tree.sh DIR    prints the path of a `gdb` that runs the tree's
#
# A tree already in DIR is reused.
set -euo pipefail
. "$(dirname "$0")/debian-archive.sh"
dir=${1:?usage: gdb-tree.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
tree=$dir/trixie
if [ ! -e "$tree/.complete" ]; then
  apt=$dir/.apt
  private_apt "$apt" trixie
  # gdb and what it depends on, without the packages that only configure a system.
  pkgs=$(apt-cache "${apt_opts[@]}" depends --recurse --no-recommends --no-suggests \
    --no-conflicts --no-breaks --no-replaces --no-enhances gdb |
    grep -E '^[a-z0-9]' | sort -u | grep -vE '^(debconf|perl|dpkg|base-files|init-system-helpers)')
  rm -f "$apt"/debs/*.deb
  # shellcheck disable=SC2086
  (cd "$apt/debs" && apt-get "${apt_opts[@]}" download $pkgs >&2)
  rm -rf "$tree"
  mkdir -p "$tree"
  for deb in "$apt"/debs/*.deb; do
    dpkg-deb -x "$deb" "$tree"
  done
  cat > "$tree/gdb" <<EOF
#!/bin/sh
PYTHONHOME=$tree/usr exec $tree/usr/lib64/ld-linux-x86-64.so.2 --library-path $tree/usr/lib/x86_64-linux-gnu $tree/usr/bin/gdb --data-directory=$tree/usr/share/gdb "\$@"
EOF
  chmod +x "$tree/gdb"
  case $("$tree/gdb" --version) in "GNU gdb"*) ;; *) false ;; esac || { echo "gdb-tree: the tree's gdb does not run" >&2; exit 1; }
  touch "$tree/.complete"
fi
echo "$tree/gdb"
