#!/usr/bin/env bash
# Unpacks the CPythons of Debian's releases, for the CPython arena tests (tests/python.rs):
# bullseye's 3.9, bookworm's 3.11 and trixie's 3.13, each as Debian ships it (a stripped
# interpreter with libpython linked in) and again with its symbols and DWARF, put back from
# the release's -dbg package by eu-unstrip. Nothing is installed: the packages are fetched
# with `apt-get download` through a private apt state that reuses this machine's Debian
# mirror (scripts/debian-archive.sh), and unpacked with `dpkg-deb -x`. An interpreter that
# needs a newer glibc than this machine's runs on Debian 13's from scripts/glibc-trees.sh
# (patchelf sets its loader and library path), unpacked beside DIR in glibc-trees/.
#
#   scripts/pythons.sh DIR    prints one line per interpreter: MINOR STRIPPED SYMBOLS
#
# STRIPPED and SYMBOLS are each a `python3` to run (its comm is python3). Trees already in
# DIR are reused.
set -euo pipefail
# A step that fails says which, even one that prints nothing of its own.
trap 'echo "$(basename "$0"): line $LINENO: $BASH_COMMAND failed" >&2' ERR
. "$(dirname "$0")/debian-archive.sh"
dir=${1:?usage: pythons.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# minor, suite, extra packages its lib-dynload modules need beyond this machine's
releases=("3.9 bullseye libffi7" "3.11 bookworm" "3.13 trixie")

want=()
for r in "${releases[@]}"; do
  set -- $r
  [ -e "$dir/$1/.complete" ] || want+=("$r")
done

if [ ${#want[@]} -gt 0 ]; then
  apt=$dir/.apt
  suites=()
  for r in "${want[@]}"; do
    set -- $r
    suites+=("$2" "$2-security debian-security")
    [ "$2" = bullseye ] || suites+=("$2-updates")
  done
  private_apt "$apt" "${suites[@]}"
  for r in "${want[@]}"; do
    set -- $r
    minor=$1
    shift 2
    py=python$minor
    version=$(apt-cache "${apt_opts[@]}" policy "$py" | awk '/Candidate:/ {print $2}')
    [ -n "$version" ] && [ "$version" != "(none)" ] || { echo "pythons: no $py" >&2; exit 1; }
    rm -f "$apt"/debs/*.deb
    (cd "$apt/debs" && apt-get "${apt_opts[@]}" download \
      "$py=$version" "$py-minimal=$version" "lib$py-minimal=$version" \
      "lib$py-stdlib=$version" "$py-dbg=$version" "lib$py-dbg=$version" "$@" >&2)
    tree=$dir/$minor
    rm -rf "$tree"
    mkdir -p "$tree"
    for deb in "$apt"/debs/*.deb; do
      dpkg-deb -x "$deb" "$tree"
    done
    bin=$tree/usr/bin/$py
    id=$(readelf -n "$bin" | awk '/Build ID/ {print $3}')
    debug=$tree/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
    [ -f "$debug" ] || { echo "pythons: no debug file for $py ($id)" >&2; exit 1; }
    # Each is run as a file named python3 (its comm, as pyenv's and distributions'
    # launchers have it): as shipped, and with its symbols beside a lib/ that is the
    # tree's, so that both find their standard library from where they lie.
    mkdir -p "$tree/symbols/usr/bin"
    ln -s ../../usr/lib "$tree/symbols/usr/lib"
    cp "$bin" "$tree/usr/bin/python3"
    eu-unstrip "$bin" "$debug" -o "$tree/symbols/usr/bin/python3"
    # Libraries this machine lacks (libffi7 for 3.9's _ctypes) come from the tree, and an
    # interpreter that asks for a newer glibc than this machine's gets Debian 13's.
    rpath=$tree/usr/lib/x86_64-linux-gnu
    need=$(objdump -T "$bin" | grep -o 'GLIBC_2\.[0-9]*' | sort -t. -k2 -n | tail -n 1 | cut -d. -f2)
    # (getconf, not `ldd --version | head`: under pipefail ldd's later writes to the
    # closed pipe kill it with SIGPIPE about every other run, and the script stops silently.)
    have=$(getconf GNU_LIBC_VERSION | cut -d. -f2)
    for b in "$tree/usr/bin/python3" "$tree/symbols/usr/bin/python3"; do
      if [ "$need" -gt "$have" ]; then
        glibc=$("$(dirname "$0")/glibc-trees.sh" "$(dirname "$dir")/glibc-trees" | awk '$1 == "2.41" {print $2}')
        patchelf --set-interpreter "$glibc/lib64/ld-linux-x86-64.so.2" "$b"
        patchelf --force-rpath --set-rpath "$glibc/lib/x86_64-linux-gnu:$rpath" "$b"
      else
        patchelf --force-rpath --set-rpath "$rpath" "$b"
      fi
    done
    "$tree/usr/bin/python3" -c 'import ctypes, sys; assert sys.version_info[:2] == tuple(map(int, sys.argv[1].split(".")))' "$minor"
    touch "$tree/.complete"
  done
fi

for r in "${releases[@]}"; do
  set -- $r
  echo "$1 $dir/$1/usr/bin/python3 $dir/$1/symbols/usr/bin/python3"
done
