//! The documents an operator reads: the README stays short enough to read in one
//! sitting, and every relative link in it and in the other documents leads to a file that
//! exists and, for a `#fragment`, to a heading that exists in it.

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The Markdown files the repository ships: the README, docs/, and the READMEs beside
/// the mixin, the chart and the fixtures.
fn documents() -> Vec<PathBuf> {
    let mut out = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    out.extend(docs);
    for p in [
        "mixin/README.md",
        "deploy/helm/membloat-exporter/README.md",
        "tests/fixtures/README.md",
    ] {
        let path = root().join(p);
        if path.exists() {
            out.push(path);
        }
    }
    out
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings (outside fenced code).
fn anchors(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.push(slug(line.trim_start_matches('#')));
        }
    }
    out
}

/// Every `[text](target)` outside fenced code, with its line number.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((n + 1, after[..end].to_string()));
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn the_readme_reads_in_one_sitting() {
    let size = std::fs::metadata(root().join("README.md")).unwrap().len();
    assert!(
        size < 30_000,
        "README.md is {size} bytes: move detail into docs/ and link it"
    );
}

#[test]
fn every_relative_link_resolves_to_a_file_and_heading() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        let rel = doc.strip_prefix(root()).unwrap().display().to_string();
        for (line, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (file, fragment) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let path = if file.is_empty() {
                doc.clone()
            } else {
                doc.parent().unwrap().join(file)
            };
            if !path.exists() {
                broken.push(format!("{rel}:{line}: {target}: no such file"));
                continue;
            }
            if let Some(fragment) = fragment {
                let Ok(target_text) = std::fs::read_to_string(&path) else {
                    broken.push(format!("{rel}:{line}: {target}: not a text file"));
                    continue;
                };
                if !anchors(&target_text).iter().any(|a| a == fragment) {
                    broken.push(format!("{rel}:{line}: {target}: no such heading"));
                }
            }
        }
    }
    assert!(
        checked > 30,
        "only {checked} links found: is the parser right?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}
