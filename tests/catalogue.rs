//! The metric catalogue (src/expose/catalogue.rs) is the one list of what the exporter
//! serves: every family a real scrape returns has its row (name, type, help), every row is
//! served, and docs/metrics.md and the README's tables are generated from it
//! (MEMBLOAT_UPDATE_GOLDEN=1 regenerates both).

use crate::common;

use membloat_exporter::expose::catalogue::{all, MetricUnit, Section};
use membloat_exporter::family::Collector;
use std::path::Path;

/// Every family the fixture trees (cgroup v1, and a v2 copy) serve has its row, and every
/// row is served by them, but those only a live host shows (the heap readers' series,
/// checked by the runtimes tier's `catalogue_live`).
#[test]
fn every_family_the_fixtures_serve_has_its_row_and_every_other_row_is_live_only() {
    common::catalogue::check(false);
}

fn title(s: Section) -> String {
    match s {
        Section::Exporter => "The exporter itself".to_string(),
        Section::Of(c) => format!("`{}` collector: {}", c.as_str(), c.what()),
    }
}

fn sections() -> Vec<Section> {
    let mut out = vec![Section::Exporter];
    out.extend(Collector::all().map(Section::Of));
    out
}

fn table(section: Section) -> String {
    let mut out = String::from(
        "| metric | type | unit | meaning | source |\n|--------|------|------|---------|--------|\n",
    );
    for m in all().into_iter().filter(|m| m.section == section) {
        let labels = if m.labels.is_empty() {
            String::new()
        } else {
            format!("{{{}}}", m.labels.join(","))
        };
        let unit = match m.unit {
            MetricUnit::None => "",
            u => u.as_str(),
        };
        let source = if m.source.starts_with('/') {
            format!("`{}`", m.source)
        } else {
            m.source.to_string()
        };
        out.push_str(&format!(
            "| `{}{labels}` | {} | {unit} | {} | {source} |\n",
            m.name,
            m.kind.as_str(),
            m.help.replace('|', "\\|"),
        ));
    }
    out
}

fn key(s: Section) -> &'static str {
    match s {
        Section::Exporter => "exporter",
        Section::Of(c) => c.as_str(),
    }
}

/// GitHub's anchor for a heading.
fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The README's summary: a row per section, linking its table in docs/metrics.md.
fn summary() -> String {
    let mut out = String::from(
        "| collector | what it exports | families |\n|-----------|-----------------|----------|\n",
    );
    for s in sections() {
        let (name, what) = match s {
            Section::Exporter => (
                "the exporter itself".to_string(),
                "scans, their cost and errors, the heap walk's work, build info, `process_*`",
            ),
            Section::Of(c) => (format!("`{}`", c.as_str()), c.what()),
        };
        let count = all().into_iter().filter(|m| m.section == s).count();
        out.push_str(&format!(
            "| [{name}](docs/metrics.md#{}) | {what} | {count} |\n",
            slug(&title(s))
        ));
    }
    out
}

/// `text` with each `<!-- catalogue:KEY -->` block holding what `block(KEY)` makes.
fn regenerated(text: &str, keys: &[&str], block: impl Fn(&str) -> String) -> String {
    let mut out = text.to_string();
    for key in keys {
        let open = format!("<!-- catalogue:{key} -->\n");
        let start = out
            .find(&open)
            .unwrap_or_else(|| panic!("no marker {open:?}"))
            + open.len();
        let end = start
            + out[start..]
                .find("<!-- /catalogue -->")
                .expect("a catalogue block is not closed");
        out.replace_range(start..end, &block(key));
    }
    out
}

fn current(path: &Path, want: &str) {
    if std::env::var_os("MEMBLOAT_UPDATE_GOLDEN").is_some() {
        std::fs::write(path, want).unwrap();
    }
    let got = std::fs::read_to_string(path).unwrap();
    assert!(
        got == want,
        "{} is not what the catalogue generates (MEMBLOAT_UPDATE_GOLDEN=1 cargo test --test fast catalogue)",
        path.display()
    );
}

/// docs/metrics.md: a heading per section, then its table, generated.
#[test]
fn docs_metrics_md_tables_are_generated_from_the_catalogue() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/metrics.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let keys: Vec<&str> = sections().into_iter().map(key).collect();
    let mut last = 0;
    for s in sections() {
        let heading = format!("\n## {}\n", title(s));
        let at = text
            .find(&heading)
            .unwrap_or_else(|| panic!("docs/metrics.md lacks the heading {heading:?}"));
        let block = text
            .find(&format!("<!-- catalogue:{} -->", key(s)))
            .unwrap();
        assert!(at > last && block > at, "{heading:?} out of order");
        last = block;
    }
    let by_key = |k: &str| table(*sections().iter().find(|s| key(**s) == k).unwrap());
    current(&path, &regenerated(&text, &keys, by_key));
}

/// The README's catalogue is one row per section, each linking its table.
#[test]
fn readme_summary_is_generated_from_the_catalogue() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    current(&path, &regenerated(&readme, &["summary"], |_| summary()));
}
