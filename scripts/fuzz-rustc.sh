#!/usr/bin/env bash
# RUSTC_WRAPPER for scripts/fuzz.sh: adds SanitizerCoverage (trace-pc-guard) to the
# exporter's crate and to the fuzzer's (where the generic heap walk and ELF reader are
# compiled for the targets' memory images), and to nothing else: tokio, axum and serde
# stay out of the coverage map. The fuzzer's own code adds the same few edges to every run.
rustc="$1"
shift
for arg in "$@"; do
  if [[ "$arg" == membloat_exporter || "$arg" == membloat_fuzz ]] && [[ " $* " == *" --crate-name $arg "* ]]; then
    exec "$rustc" "$@" -C passes=sancov-module \
      -C llvm-args=-sanitizer-coverage-level=3 \
      -C llvm-args=-sanitizer-coverage-trace-pc-guard \
      -C llvm-args=-sanitizer-coverage-prune-blocks=0
  fi
done
exec "$rustc" "$@"
