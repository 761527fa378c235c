//! The CPythons the tests run: Debian's 3.9, 3.11 and 3.13 as each release ships them and
//! with their symbols (`scripts/pythons.sh`, fetched from Debian's archive on any Debian
//! machine), and pyenv's builds where a machine has them (more versions, never needed);
//! and the random program that fills their arenas (`tests/reproducers/pyarenas.py`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::repro::Repro;

/// One of Debian's CPythons.
#[derive(Debug, Clone)]
pub struct Debian {
    /// `3.9`, `3.11`, `3.13`.
    pub minor: String,
    /// The interpreter as the release ships it (stripped), run as `python3`.
    pub stripped: PathBuf,
    /// The same interpreter with its symbols and DWARF (from the release's -dbg package).
    pub symbols: PathBuf,
}

/// Debian's CPythons, oldest first. Fetching needs Debian's archive; without it the test
/// that asked fails, naming the cause.
pub fn debian() -> &'static [Debian] {
    static ALL: OnceLock<Vec<Debian>> = OnceLock::new();
    ALL.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pythons");
        let out = Command::new(root.join("scripts/pythons.sh"))
            .arg(&dir)
            .output()
            .expect("run scripts/pythons.sh");
        assert!(
            out.status.success(),
            "fetching Debian's CPythons failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                Some(Debian {
                    minor: w.next()?.to_string(),
                    stripped: PathBuf::from(w.next()?),
                    symbols: PathBuf::from(w.next()?),
                })
            })
            .collect()
    })
}

/// Debian's CPython `minor`.
pub fn debian_of(minor: &str) -> &'static Debian {
    debian()
        .iter()
        .find(|d| d.minor == minor)
        .unwrap_or_else(|| panic!("Debian's CPython {minor}"))
}

/// The newest pyenv build of CPython `minor` (`3.12` -> its `bin/python3`), if this
/// machine has one (its image may; a fresh Debian machine has none).
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
