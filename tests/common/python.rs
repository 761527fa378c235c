//! The CPythons pyenv built on this machine (part of its image), and the random program
//! that fills their arenas (`tests/reproducers/pyarenas.py`).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::repro::Repro;

/// The newest pyenv build of CPython `minor` (`3.12` -> its `bin/python3`), if there is
/// one.
pub fn pyenv(minor: &str) -> Option<PathBuf> {
    let root = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root/.pyenv"));
    std::fs::read_dir(root.join("versions"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.strip_prefix(minor)
                .and_then(|rest| rest.strip_prefix('.'))
                .is_some_and(|patch| patch.bytes().all(|b| b.is_ascii_digit()))
        })
        .max_by_key(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.rsplit('.').next().and_then(|n| n.parse::<u32>().ok())
        })
        .map(|dir| dir.join("bin/python3"))
}

/// `pyarenas.py` under `python` with `env`: `objects` small objects, `drop` % of them
/// dropped, CPython's own figures written into `stats` before each "ready".
pub fn pyarenas(
    python: &Path,
    env: &[(&str, &str)],
    (seed, objects, drop): (u64, u64, u64),
    stats: &Path,
) -> Repro {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reproducers/pyarenas.py");
    let mut cmd = Command::new(python);
    cmd.arg(script)
        .args([seed, objects, drop].map(|n| n.to_string()))
        .arg(stats)
        .envs(env.iter().copied());
    Repro::spawn("pyarenas", cmd)
}
