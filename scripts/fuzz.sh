#!/usr/bin/env bash
# Builds the fuzzer with coverage and runs it (docs/fuzzing.md). Stable Rust: LLVM's
# SanitizerCoverage is added to the exporter's crate only (by scripts/fuzz-rustc.sh), with
# debug assertions and overflow checks on, in its own target directory.
#
#   scripts/fuzz.sh run --seconds 60 meminfo     # one target for a minute
#   scripts/fuzz.sh run --seconds 5              # every target, 5 s each (CI)
#   scripts/fuzz.sh run --seconds 600 --merge    # keep what found new coverage in fuzz/corpus
#   scripts/fuzz.sh seed | list | replay TARGET FILE...
#   scripts/fuzz.sh build                        # build only (scripts/test.sh, ahead)
set -euo pipefail
cd "$(dirname "$0")/.."
export RUSTC_WRAPPER="$PWD/scripts/fuzz-rustc.sh"
export CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true
export CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true
export CARGO_PROFILE_RELEASE_LTO=false
export CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16
cargo build --quiet --release -p membloat-fuzz --target-dir target/fuzz
[ "${1:-}" != build ] || exit 0
exec target/fuzz/release/membloat-fuzz "$@"
