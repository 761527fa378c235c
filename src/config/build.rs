//! What `build.rs` recorded about this binary: shown by `--version` and exported as the
//! labels of `membloat_build_info`, as every Prometheus exporter does.

pub(crate) const VERSION: &str = env!("CARGO_PKG_VERSION");
pub(crate) const REVISION: &str = env!("MEMBLOAT_REVISION");
pub(crate) const BRANCH: &str = env!("MEMBLOAT_BRANCH");
/// UTC, RFC 3339.
pub(crate) const BUILD_DATE: &str = env!("MEMBLOAT_BUILD_DATE");
pub(crate) const RUST_VERSION: &str = env!("MEMBLOAT_RUST_VERSION");
/// The target triple, e.g. `x86_64-unknown-linux-gnu`.
pub const TARGET: &str = env!("MEMBLOAT_TARGET");

/// `--version`, in the layout of the Prometheus exporters' `version.Print`.
pub(crate) const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (branch: ",
    env!("MEMBLOAT_BRANCH"),
    ", revision: ",
    env!("MEMBLOAT_REVISION"),
    ")\n  build date:       ",
    env!("MEMBLOAT_BUILD_DATE"),
    "\n  rust version:     ",
    env!("MEMBLOAT_RUST_VERSION"),
    "\n  platform:         ",
    env!("MEMBLOAT_TARGET"),
);

/// The labels of `membloat_build_info`.
pub fn labels() -> Vec<(&'static str, &'static str)> {
    vec![
        ("version", VERSION),
        ("revision", REVISION),
        ("branch", BRANCH),
        ("builddate", BUILD_DATE),
        ("rustversion", RUST_VERSION),
        ("target", TARGET),
    ]
}
