//! Three glibc versions to run reproducers on: the system's (Debian 12: 2.36) and the trees
//! `scripts/glibc-trees.sh` unpacks from Debian's archive (11: 2.31, 13: 2.41). A program
//! is linked with a tree's loader, libraries and start files, and runs on that glibc.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// One glibc to build for.
#[derive(Debug, Clone)]
pub struct Glibc {
    /// `2.31`, `2.36`, `2.41`.
    pub version: String,
    /// The unpacked tree; `None` for the system's own glibc.
    pub tree: Option<PathBuf>,
}

/// The system's glibc and the unpacked ones, oldest first. Fetching needs Debian's
/// archive; without it the test that asked fails, naming the cause.
pub fn all() -> &'static [Glibc] {
    static ALL: OnceLock<Vec<Glibc>> = OnceLock::new();
    ALL.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("glibc-trees");
        let out = Command::new(root.join("scripts/glibc-trees.sh"))
            .arg(&dir)
            .output()
            .expect("run scripts/glibc-trees.sh");
        assert!(
            out.status.success(),
            "fetching glibc 2.31 and 2.41 from Debian's archive failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut all: Vec<Glibc> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(v, tree)| Glibc {
                version: v.to_string(),
                tree: Some(PathBuf::from(tree)),
            })
            .collect();
        all.push(Glibc {
            version: system_version(),
            tree: None,
        });
        all.sort_by(|a, b| a.version.cmp(&b.version));
        all
    })
}

fn system_version() -> String {
    let out = Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .expect("getconf");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .trim_start_matches("glibc ")
        .to_string()
}

impl Glibc {
    /// Builds `tests/reproducers/NAME.c` for this glibc, once per test binary run.
    pub fn build(&self, name: &str) -> PathBuf {
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/reproducers")
            .join(format!("{name}.c"));
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "glibc-{}-{}",
            self.version,
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join(name);
        if out.exists() {
            return out;
        }
        let tmp = dir.join(format!("{name}.{:?}.tmp", std::thread::current().id()));
        let mut cc = super::repro::cc(&tmp, &src);
        if let Some(tree) = &self.tree {
            let lib = tree.join("lib/x86_64-linux-gnu");
            let usr_lib = tree.join("usr/lib/x86_64-linux-gnu");
            let loader = [&lib, &usr_lib]
                .iter()
                .map(|d| d.join("ld-linux-x86-64.so.2"))
                .find(|p| p.exists())
                .expect("the tree has a loader");
            // The tree's headers, start files and libraries first; the system's kernel
            // headers after them.
            cc.arg(format!("--sysroot={}", tree.display()))
                .arg(format!("-B{}/", usr_lib.display()))
                .arg(format!("-L{}", usr_lib.display()))
                .arg(format!("-L{}", lib.display()))
                .args(["-idirafter", "/usr/include"])
                .args(["-idirafter", "/usr/include/x86_64-linux-gnu"])
                .arg(format!(
                    "-Wl,-rpath,{}:{}",
                    lib.display(),
                    usr_lib.display()
                ))
                .arg(format!("-Wl,--dynamic-linker,{}", loader.display()));
        }
        let status = cc.status().expect("cc");
        assert!(
            status.success(),
            "building {name} for glibc {}",
            self.version
        );
        std::fs::rename(&tmp, &out).unwrap();
        out
    }
}
