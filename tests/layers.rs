//! The architecture of docs/architecture.md, enforced: each room of src/ imports only its
//! own layer and the layers below it. A `crate::X` path that points up (a collector that
//! reads the model, the model that knows about HTTP) fails here, naming the file and line.

use std::path::Path;

/// The rooms from the bottom up. A room may use its own layer and any lower one; the rooms
/// of one layer do not use each other, except the foundations, which are small and flat.
const LAYERS: [&[&str]; 6] = [
    &["config", "log", "source", "parse"],
    &["collect"],
    &["model"],
    &["explain", "expose"],
    &["serve"],
    &["daemon", "main", "lib"],
];

fn layer(room: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&room))
}

/// `src/collect/heap/walk.rs` -> `collect`, `src/daemon.rs` -> `daemon`.
fn room(path: &Path, src: &Path) -> String {
    let rel = path.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn every_room_imports_only_its_layer_and_below() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    let mut violations = Vec::new();
    let mut checked = 0;
    for file in &files {
        let here = room(file, &src);
        let mine = layer(&here).unwrap_or_else(|| panic!("{here}: a room not in LAYERS"));
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            for prefix in ["crate::", "membloat_exporter::"] {
                for part in line.split(prefix).skip(1) {
                    let target: String = part
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if target.is_empty() || target == here {
                        continue;
                    }
                    checked += 1;
                    let theirs = layer(&target);
                    let ok = match theirs {
                        None => false,
                        Some(t) => t < mine || (t == mine && mine == 0),
                    };
                    if !ok {
                        violations.push(format!(
                            "{}:{}: {here} (layer {mine}) uses {target} (layer {theirs:?})",
                            file.strip_prefix(&src).unwrap().display(),
                            n + 1
                        ));
                    }
                }
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} paths seen: is the scan right?"
    );
    assert!(
        violations.is_empty(),
        "imports against the layers:\n{}",
        violations.join("\n")
    );
}

/// The rule itself is checked: an upward import is caught.
#[test]
fn an_upward_import_would_be_caught() {
    assert!(layer("collect") < layer("model"));
    assert!(layer("model") < layer("expose"));
    assert!(layer("expose") < layer("serve"));
    assert_eq!(layer("explain"), layer("expose"));
    assert_eq!(layer("unknown"), None);
    let src = Path::new("/x/src");
    assert_eq!(
        room(Path::new("/x/src/collect/heap/walk.rs"), src),
        "collect"
    );
    assert_eq!(room(Path::new("/x/src/daemon.rs"), src), "daemon");
}
