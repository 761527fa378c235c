//! Build facts for `--version` and `membloat_build_info`: the git revision and branch, the
//! build date (UTC, RFC 3339; `SOURCE_DATE_EPOCH` makes it reproducible), the rustc
//! version and the target triple. Outside a git checkout the revision is `unknown` unless
//! `MEMBLOAT_REVISION` is set (container builds pass it).

use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

fn output(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !s.is_empty()).then_some(s)
}

#[allow(dead_code)]
#[path = "src/log/rfc3339.rs"]
mod rfc3339;

fn main() {
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
    println!("cargo:rerun-if-env-changed=MEMBLOAT_REVISION");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let revision = std::env::var("MEMBLOAT_REVISION")
        .ok()
        .filter(|r| !r.is_empty())
        .or_else(|| output("git", &["rev-parse", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    let branch =
        output("git", &["rev-parse", "--abbrev-ref", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let secs = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64)
        });
    let date = rfc3339::format(secs, None);
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    // "rustc 1.95.0 (59807616e 2026-04-14)" -> "1.95.0"
    let rust_version = output(&rustc, &["--version"])
        .and_then(|v| v.split_whitespace().nth(1).map(str::to_string))
        .unwrap_or_else(|| "unknown".into());
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".into());
    for (k, v) in [
        ("MEMBLOAT_REVISION", revision),
        ("MEMBLOAT_BRANCH", branch),
        ("MEMBLOAT_BUILD_DATE", date),
        ("MEMBLOAT_RUST_VERSION", rust_version),
        ("MEMBLOAT_TARGET", target),
    ] {
        println!("cargo:rustc-env={k}={v}");
    }
}
