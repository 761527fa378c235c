//! The architecture of docs/architecture.md, enforced: each room of src/ imports only its
//! own layer and the layers below it. A path that points up (a collector that reads the
//! model, the model that knows about HTTP) fails here, naming the file and line, in every
//! form Rust writes it: `crate::room::x`, `crate::{room::x, other}` (over several lines
//! too), `membloat_exporter::room`, and `super::super::room` climbing to the crate root.

use std::path::{Path, PathBuf};

/// The rooms from the bottom up. A room may use any lower layer; the rooms of one layer do
/// not use each other, except at the top, which puts the program together (`main` runs
/// `daemon`). The foundations are layers of their own: the log, the pure parsers and the
/// family rows use nothing; `source` (all I/O) uses the log and the parsers; a unit, and
/// a heap reader, reads through `source`; the flags know the units' names.
const LAYERS: [&[&str]; 10] = [
    &["log", "parse", "family"],
    &["source"],
    &["units", "heap"],
    &["config"],
    &["collect"],
    &["model", "attach"],
    &["explain", "expose"],
    &["serve"],
    &["daemon"],
    &["main", "lib"],
];

fn layer(room: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&room))
}

/// A file's module path: `src/heap/glibc/walk.rs` -> `[heap, glibc, walk]`,
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

/// The room a file belongs to: `src/heap/glibc/walk.rs` -> `heap`, `src/lib.rs` ->
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
                Some(t) => t < mine || (t == mine && mine == LAYERS.len() - 1),
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

/// The paths of a `use` tree or a path written in code, from its first segment:
/// `a::b::{c, d::{e, self}}` -> `[a, b, c]`, `[a, b, d, e]`, `[a, b, d]`.
fn tree(text: &str) -> Vec<Vec<String>> {
    let text = text.trim_start();
    if let Some(rest) = text.strip_prefix('{') {
        let mut out = Vec::new();
        let (mut depth, mut start) = (0, 0);
        for (i, c) in rest.char_indices() {
            match c {
                '{' => depth += 1,
                // A group's trailing comma leaves an empty item: no path.
                '}' if depth == 0 => {
                    if !rest[start..i].trim().is_empty() {
                        out.extend(tree(&rest[start..i]));
                    }
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.extend(tree(&rest[start..i]));
                    start = i + 1;
                }
                _ => {}
            }
        }
        return out;
    }
    let head = ident(text);
    if head.is_empty() {
        return vec![vec![]];
    }
    match text[head.len()..].strip_prefix("::") {
        Some(rest) => tree(rest)
            .into_iter()
            .map(|mut p| {
                if head != "self" {
                    p.insert(0, head.to_string());
                }
                p
            })
            .collect(),
        None if head == "self" => vec![vec![]],
        // `name as alias`: the alias is the path's last segment, marked (`as:alias`).
        None => match text[head.len()..].trim_start().strip_prefix("as ") {
            Some(alias) => vec![vec![
                head.to_string(),
                format!("as:{}", ident(alias.trim_start())),
            ]],
            None => vec![vec![head.to_string()]],
        },
    }
}

/// Which module uses which, among modules of one parent: an edge from each module to each
/// sibling a path in it names (its own submodules' paths count as its own), with the file
/// and line of the first such path. A path is followed through the names modules import
/// (`use`, public or not: a module's children reach what it imports as `super::Name`), so
/// a sibling reached through a parent's re-export is an edge to that sibling; a glob import
/// (`use super::*`) makes every bare name and module of the globbed module that the file
/// mentions an edge too. A child naming its parent or a parent its child is the tree
/// itself, not an edge. A `tests` module, and a file's inline `#[cfg(test)] mod`, are left
/// out: built only for `cargo test`, they use their module from outside, as an
/// integration test does, and may take fixtures from a sibling that uses the module.
type Graph =
    std::collections::BTreeMap<Vec<String>, std::collections::BTreeMap<Vec<String>, String>>;

/// What each module brings into its scope by name: `(name, full path)`, with the name `*`
/// for a glob import (its path the globbed module's).
type Imports = std::collections::BTreeMap<Vec<String>, Vec<(String, Vec<String>)>>;

type Modules = std::collections::BTreeSet<Vec<String>>;

/// A file's text without its inline test module (`#[cfg(test)]` before a `mod NAME {` at
/// the start of a line; in this tree it is the last item of a file).
fn without_inline_tests(text: &str) -> &str {
    let mut at = 0;
    while let Some(i) = text[at..].find("#[cfg(test)]\nmod ") {
        let start = at + i;
        let line_end = text[start + 13..]
            .find('\n')
            .map_or(text.len(), |e| start + 13 + e);
        if text[start + 13..line_end].trim_end().ends_with('{') {
            return &text[..start];
        }
        at = start + 1;
    }
    text
}

/// The module path a path written in `here` starts from, and the rest of it: `crate::`
/// and `membloat_exporter::` from the root, `super::` climbing, `self::` here; `None` for
/// any other start (a local name, a crate from outside).
fn based<'a>(rest: &'a str, here: &[String]) -> Option<(Vec<String>, &'a str)> {
    if let Some(r) = rest.strip_prefix("crate::") {
        Some((Vec::new(), r))
    } else if let Some(r) = rest.strip_prefix("membloat_exporter::") {
        Some((Vec::new(), r))
    } else if rest.starts_with("super::") {
        let mut r = rest;
        let mut base = here.to_vec();
        while let Some(next) = r.strip_prefix("super::") {
            base.pop();
            r = next;
        }
        Some((base, r))
    } else {
        rest.strip_prefix("self::").map(|r| (here.to_vec(), r))
    }
}

/// Each `use` of a file's `text` (module `here`): the names it brings in, with their full
/// paths. A path may also start at a child module (`use child::Item`).
fn imports_of(text: &str, here: &[String], modules: &Modules) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = text[at..].find("use ") {
        let start = at + i;
        at = start + 4;
        let before = text[..start].chars().last();
        if before.is_some_and(|c| !(c.is_whitespace() || c == ')')) {
            continue;
        }
        let Some(len) = text[at..].find(';') else {
            break;
        };
        let stmt = text[at..at + len].trim();
        let glob = stmt.ends_with("::*") && !stmt.contains('{');
        let (base, rest) = match based(stmt, here) {
            Some(b) => b,
            None => {
                let first = ident(stmt);
                let child: Vec<String> = here.iter().cloned().chain([first.to_string()]).collect();
                if first.is_empty() || !modules.contains(&child) {
                    continue;
                }
                (here.to_vec(), stmt)
            }
        };
        for mut path in tree(rest) {
            let alias = path
                .last()
                .and_then(|l| l.strip_prefix("as:"))
                .map(str::to_string);
            if alias.is_some() {
                path.pop();
            }
            let full: Vec<String> = base.iter().cloned().chain(path).collect();
            if glob {
                out.push(("*".to_string(), full));
            } else if let Some(name) = alias.or_else(|| full.last().cloned()) {
                out.push((name, full.clone()));
            }
        }
    }
    out
}

/// The module a full path names: its longest prefix that is a module, followed through
/// the names that module imports (a re-export leads to where the item is).
fn resolve(full: &[String], modules: &Modules, imports: &Imports) -> Vec<String> {
    let mut full = full.to_vec();
    for _ in 0..8 {
        let m = (0..=full.len())
            .rev()
            .map(|n| full[..n].to_vec())
            .find(|m| modules.contains(m))
            .unwrap_or_default();
        let Some(name) = full.get(m.len()) else {
            return m;
        };
        let via = imports
            .get(&m)
            .and_then(|names| names.iter().find(|(n, _)| n == name));
        match via {
            Some((_, target)) if target[..] != full[..=m.len()] => {
                let mut next = target.clone();
                next.extend_from_slice(&full[m.len() + 1..]);
                full = next;
            }
            _ => return m,
        }
    }
    Vec::new()
}

/// Each identifier of `text`, with its byte offset.
fn words(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < text.len() {
            let word = ident(&text[at..]);
            if word.is_empty() {
                at += text[at..].chars().next().map_or(1, char::len_utf8);
            } else {
                let start = at;
                at += word.len();
                return Some((start, word));
            }
        }
        None
    })
}

/// What each path of a module's `text` names, with its byte offset: a path from the root,
/// a `super::` or `self::` path, a path that starts at a child module (`child::item`,
/// `use child::{a, b}`: the parent naming its child), and after a glob import each word
/// that is a module or a name of the globbed module.
fn targets(
    text: &str,
    here: &[String],
    modules: &Modules,
    imports: &Imports,
) -> Vec<(usize, Vec<String>)> {
    let mut found: Vec<(usize, Vec<String>)> = Vec::new();
    let mut at = 0;
    while let Some(i) = text[at..].find(['c', 's', 'm']) {
        let start = at + i;
        at = start + 1;
        let before = text[..start].chars().last();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        // A visibility (`pub(in crate::a)`) names where an item is seen, not a use.
        if text[..start].ends_with("(in ") {
            continue;
        }
        let Some((base, after)) = based(&text[start..], here) else {
            continue;
        };
        // A macro's path through a metavariable (`super::$module::$reader`) names a module
        // only where the macro is used, and that line names it there.
        if after.starts_with('$') {
            continue;
        }
        for path in tree(after) {
            let path = path.into_iter().filter(|p| !p.starts_with("as:"));
            let full: Vec<String> = base.iter().cloned().chain(path).collect();
            found.push((start, resolve(&full, modules, imports)));
        }
    }
    // A path that starts at a child module (`child::item`, `use child::{a, b}`): the
    // parent naming its child.
    for (at, word) in words(text) {
        let before = text[..at].chars().last();
        let child: Vec<String> = here.iter().cloned().chain([word.to_string()]).collect();
        if !text[..at].ends_with("::")
            && !before.is_some_and(|c| c == '\'' || c == '"')
            && text[at + word.len()..].starts_with("::")
            && modules.contains(&child)
        {
            for path in tree(&text[at..]) {
                let path = path.into_iter().filter(|p| !p.starts_with("as:"));
                let full: Vec<String> = here.iter().cloned().chain(path).collect();
                found.push((at, resolve(&full, modules, imports)));
            }
        }
    }
    // A glob import: every word of the file that is a module or a name of the globbed
    // module names what it leads to.
    let globbed: Vec<Vec<String>> = imports[here]
        .iter()
        .filter(|(n, _)| n == "*")
        .map(|(_, g)| resolve(g, modules, imports))
        .collect();
    for g in &globbed {
        for (at, word) in words(text) {
            if !text[..at].ends_with("::") {
                let full: Vec<String> = g.iter().cloned().chain([word.to_string()]).collect();
                let target = resolve(&full, modules, imports);
                if target != *g {
                    found.push((at, target));
                }
            }
        }
    }
    found
}

fn module_graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    sources(src, &mut files);
    files.sort();
    let modules: Modules = files.iter().map(|f| module(f, src)).collect();
    let texts: Vec<(PathBuf, Vec<String>, String)> = files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            (
                f.clone(),
                module(f, src),
                without_inline_tests(&text).to_string(),
            )
        })
        .collect();
    let imports: Imports = texts
        .iter()
        .map(|(_, here, text)| (here.clone(), imports_of(text, here, &modules)))
        .collect();
    let mut graph = Graph::new();
    for (file, here, text) in &texts {
        if here.iter().any(|m| m == "tests") {
            continue;
        }
        let line_of = |at: usize| text[..at].matches('\n').count() + 1;
        let found = targets(text, here, &modules, &imports);
        let reexports = reexports(text);
        for (offset, target) in found {
            let line = line_of(offset);
            let common = here.iter().zip(&target).take_while(|(a, b)| a == b).count();
            let (from, to) = if common == here.len() && common == target.len() {
                continue;
            } else if common == here.len() {
                // A parent names its child (or deeper): an edge to the child, unless it
                // only re-exports the child's item for the modules outside.
                if reexports.iter().any(|r| r.contains(&offset)) {
                    continue;
                }
                (here.clone(), target[..=common].to_vec())
            } else if common == target.len() {
                // A child names its ancestor's own item: an edge from the ancestor's child.
                (here[..=common].to_vec(), target.clone())
            } else {
                (here[..=common].to_vec(), target[..=common].to_vec())
            };
            let at = format!("{}:{line}", file.strip_prefix(src).unwrap().display());
            graph.entry(from).or_default().entry(to).or_insert(at);
        }
    }
    graph
}

/// Where `text` re-exports (`pub use`, `pub(crate) use`, `pub(super) use`): each statement's
/// byte range.
fn reexports(text: &str) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = text[at..].find("pub") {
        let start = at + i;
        at = start + 3;
        let line_start = text[..start].rfind('\n').map_or(0, |n| n + 1);
        if !text[line_start..start].trim().is_empty() {
            continue;
        }
        let mut rest = &text[at..];
        if rest.starts_with('(') {
            let Some(close) = rest.find(')') else { break };
            rest = &rest[close + 1..];
        }
        if rest.starts_with(" use ") {
            let end = text[start..].find(';').map_or(text.len(), |e| start + e);
            out.push(start..end);
        }
    }
    out
}

/// Every edge that lies on a cycle: `a -> b (file:line)` where `a` is reachable from `b`.
fn cycles(graph: &Graph) -> Vec<String> {
    let reach = |from: &Vec<String>| {
        let mut seen = std::collections::BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(m) = stack.pop() {
            for next in graph.get(&m).into_iter().flat_map(|e| e.keys()) {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let mut out = Vec::new();
    for (a, edges) in graph {
        for (b, at) in edges {
            if reach(b).contains(a) {
                out.push(format!("{} -> {} ({at})", a.join("::"), b.join("::")));
            }
        }
    }
    out
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
    let (_dir, copy) = copy_of_tree();
    let plant = |file: &str, line: &str| plant(&copy, file, line);
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
        "heap/glibc/walk.rs",
        "fn f() -> crate::explain::Diagnosis { todo!() }",
    );
    let (found, _) = violations(&copy);
    let want = [
        "model/state.rs:1: model (layer 5) uses serve",
        "model/groups.rs:1: model (layer 5) uses expose",
        "model/derive/tests.rs:1: model (layer 5) uses serve",
        "collect/own.rs:1: collect (layer 4) uses model",
        "heap/glibc/walk.rs:1: heap (layer 2) uses explain",
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

/// No module of `src` uses, through its siblings, one that uses it back: each room reads
/// from the bottom up inside too.
#[test]
fn no_module_is_part_of_an_import_cycle() {
    let graph = module_graph(&src());
    let edges: usize = graph.values().map(|e| e.len()).sum();
    assert!(edges > 50, "only {edges} edges seen: is the scan right?");
    let found = cycles(&graph);
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

/// The cycle finder itself: the cycles this tree once had, planted again, are found.
#[test]
fn planted_cycles_are_found() {
    let (_dir, copy) = copy_of_tree();
    let plant = |file: &str, line: &str| plant(&copy, file, line);
    // collect: deep -> processes (already), processes::known -> deep (planted).
    plant("collect/processes/known.rs", "use crate::collect::deep::X;");
    // heap: arenas -> walk (already), walk -> arenas (planted, in a group).
    plant("heap/glibc/walk.rs", "use super::{arenas::Y, Layout};");
    // model: kills -> signals (already), signals -> kills (planted, as an inline path).
    plant("model/signals.rs", "fn f() -> super::kills::Z { todo!() }");
    let found = cycles(&module_graph(&copy));
    for want in [
        "collect::processes -> collect::deep (collect/processes/known.rs:1)",
        "collect::deep -> collect::processes (",
        "heap::glibc::walk -> heap::glibc::arenas (heap/glibc/walk.rs:1)",
        "heap::glibc::arenas -> heap::glibc::walk (",
        "model::signals -> model::kills (model/signals.rs:1)",
        "model::kills -> model::signals (",
        // The longer loop through groups: kills -> groups -> signals -> kills.
        "model::kills -> model::groups (",
        "model::groups -> model::signals (",
    ] {
        assert!(
            found.iter().any(|f| f.starts_with(want)),
            "not found: {want}\nfound:\n{}",
            found.join("\n")
        );
    }
    assert_eq!(found.len(), 8, "{}", found.join("\n"));
    assert_eq!(
        tree("a::b::{c, d::{e, self}}"),
        [
            vec!["a", "b", "c"],
            vec!["a", "b", "d", "e"],
            vec!["a", "b", "d"]
        ]
    );
}

/// A copy of the real tree (kept while the directory lives) and the path of its `src`.
fn copy_of_tree() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    assert!(std::process::Command::new("cp")
        .arg("-a")
        .arg(src())
        .arg(dir.path())
        .status()
        .unwrap()
        .success());
    let copy = dir.path().join("src");
    (dir, copy)
}

/// `line` planted in `file` of the tree at `copy`: at its top, or at its end when the line
/// starts with a newline.
fn plant(copy: &Path, file: &str, line: &str) {
    let path = copy.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let planted = if line.starts_with('\n') {
        format!("{text}{line}\n")
    } else {
        format!("{line}\n{text}")
    };
    std::fs::write(&path, planted).unwrap();
}

/// The cycles of a copy of the real tree with each `(file, line)` planted.
fn planted_cycles(plants: &[(&str, &str)]) -> Vec<String> {
    let (_dir, copy) = copy_of_tree();
    for (file, line) in plants {
        plant(&copy, file, line);
    }
    cycles(&module_graph(&copy))
}

/// The ways around a path-by-path reading, planted, are found: a sibling reached through
/// the parent's import of it (`super::Name`, where the parent has `use child::Name`), and
/// through a glob import of the parent (`use super::*`, then a bare sibling path or a bare
/// name the parent imports). An inline test module's `use super::*` is not the file's.
#[test]
fn cycles_through_reexports_and_glob_imports_are_found() {
    let found = planted_cycles(&[("collect/processes/known.rs", "use super::ReadContext;")]);
    for want in [
        "collect::processes::known -> collect::processes::context (collect/processes/known.rs:1)",
        "collect::processes::context -> collect::processes::known (",
    ] {
        assert!(
            found.iter().any(|f| f.starts_with(want)),
            "not found: {want}\nfound:\n{}",
            found.join("\n")
        );
    }
    assert_eq!(found.len(), 2, "{}", found.join("\n"));
    // A bare sibling path after a glob of the parent.
    let found = planted_cycles(&[("model/signals.rs", "use super::*; fn g(_: kills::Z) {}")]);
    assert!(
        found
            .iter()
            .any(|f| f.starts_with("model::signals -> model::kills (model/signals.rs:1)")),
        "{}",
        found.join("\n")
    );
    // A bare name the parent imports from a sibling, after a glob of the parent.
    let found = planted_cycles(&[
        ("collect/processes/known.rs", "use super::*;"),
        ("collect/processes/known.rs", "fn h(_: &ReadContext) {}"),
    ]);
    assert!(
        found.iter().any(|f| f.starts_with(
            "collect::processes::known -> collect::processes::context (collect/processes/known.rs:1)"
        )),
        "{}",
        found.join("\n")
    );
    // The same glob inside an inline test module is the test's, not the file's.
    let found = planted_cycles(&[(
        "collect/processes/known.rs",
        "\n#[cfg(test)]\nmod tests {\n    use super::*;\n    fn h(_: &ReadContext) {}\n}",
    )]);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// A parent that uses its child while the child uses the parent's own items is a cycle,
/// in each form: a child's `use super::Item`, a grandchild's `crate::` path to its
/// grandparent, and a path in code. A parent that only re-exports its child (`pub use`)
/// does not use it: no cycle.
#[test]
fn parent_child_cycles_are_found() {
    let has = |found: &[String], edge: &str| found.iter().any(|f| f.starts_with(edge));
    // source.rs reads lines with text.rs's `read_lines`; text.rs takes source.rs's own
    // constant.
    let found = planted_cycles(&[("source/text.rs", "use super::MAX_SMAPS_BYTES;")]);
    for edge in [
        "source -> source::text (source.rs:",
        "source::text -> source (source/text.rs:1)",
    ] {
        assert!(has(&found, edge), "not found: {edge}\n{}", found.join("\n"));
    }
    // A grandchild naming its grandparent's own item: heap lists glibc among its readers.
    let found = planted_cycles(&[("heap/glibc/walk.rs", "fn f(_: &crate::heap::Binaries) {}")]);
    for edge in [
        "heap::glibc -> heap (heap/glibc/walk.rs:1)",
        "heap -> heap::glibc (heap/mod.rs:",
    ] {
        assert!(has(&found, edge), "not found: {edge}\n{}", found.join("\n"));
    }
    // In code, through `super::`: config.rs parses with flags.rs's `command`.
    let found = planted_cycles(&[("config/flags.rs", "fn g(_: super::Config) {}")]);
    for edge in [
        "config -> config::flags (config.rs:",
        "config::flags -> config (config/flags.rs:1)",
    ] {
        assert!(has(&found, edge), "not found: {edge}\n{}", found.join("\n"));
    }
    // source.rs only re-exports kept.rs's `Kept` and `Descriptors`.
    let found = planted_cycles(&[("source/kept.rs", "use super::MAX_SMAPS_BYTES;")]);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// A copy of the real tree with `line` planted at the top of `file`, and what the checker
/// says of it.
fn planted(file: &str, line: &str) -> Vec<String> {
    let (_dir, copy) = copy_of_tree();
    plant(&copy, file, line);
    violations(&copy).0
}

/// The foundations hold each other to their order too: between any two of them, an
/// import that does not point down is caught, in one layer as across layers.
#[test]
fn an_upward_or_sideways_import_between_foundations_is_caught() {
    // A file of each foundation room.
    let files = [
        ("log", "log/mod.rs"),
        ("parse", "parse/meminfo.rs"),
        ("family", "family.rs"),
        ("source", "source/kept.rs"),
        ("units", "units/buddyinfo.rs"),
        ("heap", "heap/linked.rs"),
        ("config", "config/flags.rs"),
    ];
    let mut tried = 0;
    for (from, file) in files {
        for (to, _) in files {
            let (a, b) = (layer(from).unwrap(), layer(to).unwrap());
            if from == to || b < a {
                continue;
            }
            tried += 1;
            let found = planted(file, &format!("use crate::{to}::X;"));
            let want = format!("{file}:1: {from} (layer {a}) uses {to} (layer Some({b}))");
            assert_eq!(found, [want], "{from} -> {to}");
        }
    }
    // log, parse and family use one another in neither direction (6), nor do units and
    // heap (2), and each of the seven foundations points up at every foundation above it
    // (4 + 4 + 4 + 3 + 1 + 1).
    assert_eq!(tried, 25);
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
    let paths = |v: &[&[&str]]| -> Vec<Vec<String>> {
        v.iter()
            .map(|p| p.iter().map(|s| s.to_string()).collect())
            .collect()
    };
    assert_eq!(
        tree("a::{b, c::{d, self},\n}"),
        paths(&[&["a", "b"], &["a", "c", "d"], &["a", "c"]])
    );
    assert_eq!(tree("a::B as C"), paths(&[&["a", "B", "as:C"]]));
    let m: Vec<String> = ["model", "derive", "tests"].map(String::from).to_vec();
    assert_eq!(uses("use super::super::x;", &m), []);
    assert_eq!(
        uses("use super::super::super::{x, y};", &m),
        [(1, "x".into()), (1, "y".into())]
    );
}
