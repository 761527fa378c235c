#!/usr/bin/env bash
# Prints the path of a minimal Debian 12 (bookworm) tree that boots systemd, made once by
# debootstrap into target/debian-12 (about a minute; MEMBLOAT_DEBIAN_MIRROR overrides the
# mirror). tests/package.rs boots it with systemd-nspawn, over a throw-away overlay, to
# install, run, upgrade and purge the Debian package as a host would. scripts/test.sh
# makes it ahead, beside the first tests; a second caller waits for the first (a lock).
set -euo pipefail
cd "$(dirname "$0")/.."
tree=$PWD/target/debian-12
mkdir -p target
exec 9>"$tree.lock"
flock 9
if [ ! -e "$tree.complete" ]; then
  rm -rf --one-file-system "$tree"
  debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,curl,adduser \
    bookworm "$tree" "${MEMBLOAT_DEBIAN_MIRROR:-http://deb.debian.org/debian}" >&2
  touch "$tree.complete"
fi
echo "$tree"
