//! The architecture of docs/architecture.md, enforced: each room of src/ imports only its
//! own layer and the layers below it. A path that points up (a collector that reads the
//! model, the model that knows about HTTP) fails here, naming the file and line, in every
//! form Rust writes it: `crate::room::x`, `crate::{room::x, other}` (over several lines
//! too), `membloat_exporter::room`, and `super::super::room` climbing to the crate root.

use std::path::{Path, PathBuf};

/// The rooms from the bottom up. A room may use its own layer and any lower one; the rooms
/// of one layer do not use each other, except the foundations, which are small and flat,
/// and the top, which puts the program together (`main` runs `daemon`).
const LAYERS: [&[&str]; 6] = [
    &["config", "log", "source", "parse", "family", "units"],
    &["collect"],
    &["model"],
    &["explain", "expose"],
    &["serve"],
    &["daemon", "main", "lib"],
];

fn layer(room: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&room))
}

/// A file's module path: `src/collect/heap/walk.rs` -> `[collect, heap, walk]`,
/// `src/collect/mod.rs` -> `[collect]`, `src/lib.rs` -> `[]`.
fn module(path: &Path, src: &Path) -> Vec<String> {
    let rel = path.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") || parts == ["lib"] || parts == ["main"] {
        parts.pop();
    }
    parts
}

/// The room a file belongs to: `src/collect/heap/walk.rs` -> `collect`, `src/lib.rs` ->
/// `lib`.
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

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

fn ident(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The first segment of each item of the `{...}` group `text` starts with.
fn group_heads(text: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut item_start = true;
    for (i, c) in text.char_indices() {
        match c {
            '{' => {
                depth += 1;
                if depth == 1 {
                    item_start = true;
                    continue;
                }
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            ',' if depth == 1 => {
                item_start = true;
                continue;
            }
            _ => {}
        }
        if depth == 1 && item_start && !c.is_whitespace() {
            item_start = false;
            let head = ident(&text[i..]);
            if !head.is_empty() {
                heads.push(head.to_string());
            }
        }
    }
    heads
}

/// The rooms at the crate root that `text` (what follows `crate::` or a `super::` chain
/// that climbed to the root) names: one for a path, each item's for a group.
fn rooms_named(text: &str) -> Vec<String> {
    let text = text.trim_start();
    if text.starts_with('{') {
        group_heads(text)
    } else {
        let head = ident(text);
        if head.is_empty() {
            vec![]
        } else {
            vec![head.to_string()]
        }
    }
}

/// Every room a file's text names from the crate root, with the line it is named on.
fn uses(text: &str, module: &[String]) -> Vec<(usize, String)> {
    let line_of = |at: usize| text[..at].matches('\n').count() + 1;
    let mut out = Vec::new();
    for prefix in ["crate::", "membloat_exporter::"] {
        for (at, _) in text.match_indices(prefix) {
            let before = text[..at].chars().last();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                continue;
            }
            for r in rooms_named(&text[at + prefix.len()..]) {
                out.push((line_of(at), r));
            }
        }
    }
    // `super::` chains: each climbs one module; one that reaches the crate root names
    // rooms like `crate::` does.
    let mut at = 0;
    while let Some(found) = text[at..].find("super::") {
        let start = at + found;
        let before = text[..start].chars().last();
        let mut end = start;
        let mut climbs = 0;
        while text[end..].starts_with("super::") {
            climbs += 1;
            end += "super::".len();
        }
        at = end;
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        if climbs >= module.len() {
            for r in rooms_named(&text[end..]) {
                out.push((line_of(start), r));
            }
        }
    }
    out
}

/// Every import against the layers under `src`, and how many paths were checked.
fn violations(src: &Path) -> (Vec<String>, usize) {
    let mut files = Vec::new();
    sources(src, &mut files);
    files.sort();
    let mut found = Vec::new();
    let mut checked = 0;
    for file in &files {
        let here = room(file, src);
        let mine = layer(&here).unwrap_or_else(|| panic!("{here}: a room not in LAYERS"));
        let text = std::fs::read_to_string(file).unwrap();
        for (line, target) in uses(&text, &module(file, src)) {
            if target == here || target == "self" || target == "super" {
                continue;
            }
            checked += 1;
            let theirs = layer(&target);
            let ok = match theirs {
                None => false,
                Some(t) => t < mine || (t == mine && (mine == 0 || mine == LAYERS.len() - 1)),
            };
            if !ok {
                found.push(format!(
                    "{}:{line}: {here} (layer {mine}) uses {target} (layer {theirs:?})",
                    file.strip_prefix(src).unwrap().display(),
                ));
            }
        }
    }
    (found, checked)
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn every_room_imports_only_its_layer_and_below() {
    let (found, checked) = violations(&src());
    assert!(
        checked > 50,
        "only {checked} paths seen: is the scan right?"
    );
    assert!(
        found.is_empty(),
        "imports against the layers:\n{}",
        found.join("\n")
    );
}

/// The checker itself, on a copy of the real tree with upward imports planted in each
/// form: every one is caught, at its line.
#[test]
fn planted_upward_imports_are_caught_in_every_form() {
    let dir = tempfile::tempdir().unwrap();
    assert!(std::process::Command::new("cp")
        .arg("-a")
        .arg(src())
        .arg(dir.path())
        .status()
        .unwrap()
        .success());
    let copy = dir.path().join("src");
    let plant = |file: &str, line: &str| {
        let path = copy.join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, format!("{line}\n{text}")).unwrap();
    };
    plant("model/state.rs", "use crate::{serve::shared::Shared};");
    plant(
        "model/groups.rs",
        "use crate::{\n    parse::meminfo,\n    expose::catalogue::ALL,\n};",
    );
    plant(
        "model/derive/tests.rs",
        "use super::super::super::serve::http;",
    );
    plant("collect/own.rs", "use membloat_exporter::model::State;");
    plant(
        "collect/heap/walk.rs",
        "fn f() -> crate::explain::Diagnosis { todo!() }",
    );
    let (found, _) = violations(&copy);
    let want = [
        "model/state.rs:1: model (layer 2) uses serve",
        "model/groups.rs:1: model (layer 2) uses expose",
        "model/derive/tests.rs:1: model (layer 2) uses serve",
        "collect/own.rs:1: collect (layer 1) uses model",
        "collect/heap/walk.rs:1: collect (layer 1) uses explain",
    ];
    for w in want {
        assert!(
            found.iter().any(|f| f.starts_with(w)),
            "not caught: {w}\nfound:\n{}",
            found.join("\n")
        );
    }
    assert_eq!(found.len(), want.len(), "{}", found.join("\n"));
}

#[test]
fn modules_and_groups_are_read_as_rust_reads_them() {
    let src = Path::new("/x/src");
    assert_eq!(
        module(Path::new("/x/src/collect/heap/walk.rs"), src),
        ["collect", "heap", "walk"]
    );
    assert_eq!(module(Path::new("/x/src/collect/mod.rs"), src), ["collect"]);
    assert!(module(Path::new("/x/src/lib.rs"), src).is_empty());
    assert_eq!(room(Path::new("/x/src/daemon/mod.rs"), src), "daemon");
    assert_eq!(
        group_heads("{a::b, c::{d, e}, self, f}"),
        ["a", "c", "self", "f"]
    );
    let m: Vec<String> = ["model", "derive", "tests"].map(String::from).to_vec();
    assert_eq!(uses("use super::super::x;", &m), []);
    assert_eq!(
        uses("use super::super::super::{x, y};", &m),
        [(1, "x".into()), (1, "y".into())]
    );
}
