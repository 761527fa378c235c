//! The diagnosis printed for a terminal (at most [`WIDTH`] columns, colour only when asked)
//! or as JSON.

use std::fmt::Write;

mod eviction;
mod process;
mod style;

use super::{size, Diagnosis, Finding};
pub use style::WIDTH;
use style::{opt, signed_size, visible, wrapped, Style};

pub fn json(d: &Diagnosis) -> String {
    let mut s = serde_json::to_string_pretty(d).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    s
}

/// `part` as a share of `whole`, or `-` when either is unknown or `whole` is 0.
fn percent(part: Option<u64>, whole: Option<u64>) -> String {
    match (part, whole) {
        (Some(a), Some(b)) if b > 0 => format!("{:.0} %", a as f64 * 100.0 / b as f64),
        _ => "-".into(),
    }
}

/// A process's name for a person: `comm (pid N)`, names cut to 24 characters.
fn who(f: &Finding) -> String {
    match &f.process {
        None => "host".into(),
        Some(p) => {
            let comm: String = visible(&p.comm).chars().take(24).collect();
            format!("{comm} (pid {})", p.pid)
        }
    }
}

#[allow(
    clippy::too_many_lines,
    reason = "the text report from top to bottom, one section after another"
)]
pub fn text(d: &Diagnosis, color: bool) -> String {
    let st = Style { on: color };
    let mut out = String::new();
    let h = &d.host;
    let _ = writeln!(out, "{}", st.paint("1", "HOST"));
    wrapped(
        &mut out,
        "  memory    ",
        &format!(
            "{} available of {} ({}); swap {} used of {}",
            opt(h.memory_available_bytes),
            opt(h.memory_total_bytes),
            percent(h.memory_available_bytes, h.memory_total_bytes),
            opt(h.swap_used_bytes),
            opt(h.swap_total_bytes)
        ),
    );
    let mode = match h.overcommit_mode {
        Some(0) => "overcommit mode 0 (heuristic: the limit is not enforced)",
        Some(1) => "overcommit mode 1 (always: the limit is not enforced)",
        Some(2) => "overcommit mode 2 (the limit is enforced)",
        _ => "overcommit mode unknown",
    };
    wrapped(
        &mut out,
        "  commit    ",
        &format!(
            "{} committed of a {} limit ({}), {mode}",
            opt(h.committed_bytes),
            opt(h.commit_limit_bytes),
            percent(h.committed_bytes, h.commit_limit_bytes)
        ),
    );
    wrapped(
        &mut out,
        "  thp       ",
        &format!(
            "enabled={}, khugepaged max_ptes_none={}, hidden in partially mapped huge pages {}; memory stall (PSI full) {}",
            h.thp_enabled.as_deref().unwrap_or("unknown"),
            h.khugepaged_max_ptes_none.map_or("unknown".into(), |n| n.to_string()),
            opt(h.thp_hidden_bytes),
            h.pressure_stalled_ratio.map_or("unknown".into(), |r| format!("{:.1} %", r * 100.0))
        ),
    );
    let c = &d.coverage;
    let scanned = d.scanned_at_unix_seconds.map_or("no scan yet".into(), |t| {
        format!("scanned at {}", crate::log::rfc3339::format(t as i64, None))
    });
    let health = if c.failed_collectors.is_empty() {
        "every collector succeeded".to_string()
    } else {
        format!(
            "failed: {} (what they serve is missing here)",
            c.failed_collectors.join(", ")
        )
    };
    wrapped(
        &mut out,
        "  scan      ",
        &format!(
            "{scanned}, {} processes; {health}",
            c.processes_scanned.map_or("?".into(), |n| n.to_string())
        ),
    );
    if c.denied_reads > 0 || c.unreadable_heaps > 0 {
        wrapped(
            &mut out,
            "  coverage  ",
            &format!(
                "partial: {} reads of process files denied, {} heaps not readable; CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH (root has both) show every process but those that are not dumpable",
                c.denied_reads, c.unreadable_heaps
            ),
        );
    }
    for u in &c.unmeasured_heaps {
        let runtime = match u.runtime {
            "go" => "Go",
            "jvm" => "JVM",
            _ => "CPython",
        };
        wrapped(
            &mut out,
            "  unread    ",
            &format!(
                "{} {runtime} heap{} not measured ({}), {} of RSS: {}",
                u.processes,
                if u.processes == 1 { "" } else { "s" },
                u.reason,
                super::size(u.rss_bytes),
                u.comms.join(", ")
            ),
        );
    }
    if !c.denied_processes.is_empty() {
        let named: Vec<String> = c
            .denied_processes
            .iter()
            .map(|p| match &p.comm {
                Some(comm) => format!("{} ({comm})", p.pid),
                None => p.pid.to_string(),
            })
            .collect();
        wrapped(
            &mut out,
            "  denied    ",
            &format!(
                "the latest scan could not read these processes' files: {}",
                named.join(", ")
            ),
        );
    }
    if c.pending_heaps > 0 {
        wrapped(
            &mut out,
            "  pending   ",
            &format!(
                "{} processes' heaps changed under every walk so far (busy allocating): no hoarding figure for them until a walk succeeds",
                c.pending_heaps
            ),
        );
    }
    out.push('\n');
    memory(&mut out, d, &st);
    eviction::section(&mut out, d, &st);
    for p in &d.processes {
        process::section(&mut out, &st, p);
    }
    if d.findings.is_empty() {
        let _ = writeln!(
            out,
            "{}",
            st.paint("1;32", "NO FINDINGS: nothing to act on.")
        );
    } else {
        let _ = writeln!(
            out,
            "{}",
            st.paint(
                "1",
                &format!("FINDINGS ({}), most RAM at stake first", d.findings.len())
            )
        );
        for (i, f) in d.findings.iter().enumerate() {
            let runtime = f.process.as_ref().and_then(|p| {
                let a = p.allocator?;
                let r = p.runtime.unwrap_or("native");
                Some(match &p.runtime_version {
                    Some(v) => format!("{a}, {r} {v}"),
                    None => format!("{a}, {r}"),
                })
            });
            // Bytes that are not RAM say what they are of.
            let of = match f.bytes_of {
                "commit" => ", commit charge",
                "address_space" => ", address space",
                _ => "",
            };
            let head = format!(
                "{:>2}. {:<17} {:>11}  {}{}  [{}{of}]",
                i + 1,
                f.kind,
                if f.bytes > 0 {
                    size(f.bytes)
                } else {
                    "-".into()
                },
                who(f),
                runtime.map_or(String::new(), |r| format!(", {r}")),
                f.certainty
            );
            let colour = if f.certainty == "suspected" {
                "33"
            } else {
                "1;31"
            };
            let head: String = head.chars().take(WIDTH).collect();
            let _ = writeln!(out, "{}", st.paint(colour, &head));
            wrapped(&mut out, "    evidence: ", &f.evidence);
            wrapped(&mut out, "    remedy:   ", &f.remedy);
            if let Some(now) = &f.now {
                wrapped(&mut out, "    now:      ", now);
            }
            if let Some(next) = &f.next_start {
                wrapped(&mut out, "    next:     ", next);
            }
            if let Some(cost) = &f.cost {
                wrapped(&mut out, "    cost:     ", cost);
            }
        }
    }
    out.push('\n');
    let _ = writeln!(
        out,
        "{}",
        st.paint("1", "OOM KILLER ORDER (first to go first)")
    );
    let _ = writeln!(
        out,
        "  rank  {:>8}  {:<24} {:>9} {:>6}  {:>11}",
        "pid", "process", "oom_score", "adj", "would free"
    );
    for v in &d.oom_order {
        let comm: String = visible(&v.comm).chars().take(24).collect();
        let _ = writeln!(
            out,
            "  {:>4}  {:>8}  {:<24} {:>9} {:>6}  {:>11}",
            v.rank,
            v.pid,
            comm,
            v.oom_score.map_or("-".into(), |s| s.to_string()),
            v.oom_score_adj.map_or("-".into(), |s| s.to_string()),
            size(v.frees_bytes)
        );
    }
    kills(&mut out, d, st);
    out
}

/// Where the memory went: the sheet's rows of at least 1 % of MemTotal, and unexplained;
/// then who holds it outside the processes' heaps.
fn memory(out: &mut String, d: &Diagnosis, st: &Style) {
    if d.memory.is_empty() && d.owners.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "{}",
        st.paint(
            "1",
            "MEMORY, where it went (rows of MemTotal, largest first)"
        )
    );
    for r in d.memory.iter().filter(|r| super::sheet::told(r)) {
        let head = format!(
            "  {:<20} {:>11} {:>5.1} %  ",
            r.row,
            signed_size(r.bytes),
            r.share * 100.0
        );
        wrapped(out, &head, r.note);
    }
    owners(out, d, st);
    out.push('\n');
}

/// The largest owners outside the processes' heaps, their names escaped (a memfd's name and
/// a removed file's path are their holder's choice).
fn owners(out: &mut String, d: &Diagnosis, st: &Style) {
    use super::sheet::OWNERS_TOLD;
    if d.owners.is_empty() {
        return;
    }
    let head = if d.owners.len() > OWNERS_TOLD {
        format!("  Held outside the processes' heaps: the {OWNERS_TOLD} largest here, all in --format json")
    } else {
        "  Held outside the processes' heaps".to_string()
    };
    let _ = writeln!(out, "{}", st.paint("1", &head));
    for o in d.owners.iter().take(OWNERS_TOLD) {
        let head = format!("  {:<20} {:>11}  ", o.kind, size(o.bytes));
        let pid = o.pid.map_or(String::new(), |p| format!(" (pid {p})"));
        wrapped(out, &head, &format!("{}{pid}: {}", o.name, o.remedy));
    }
}

/// Kills the text tells at most; the JSON has them all.
const KILLS_TOLD: usize = 3;

/// The latest OOM kills, newest first.
fn kills(out: &mut String, d: &Diagnosis, st: Style) {
    if d.oom_kills.is_empty() {
        return;
    }
    out.push('\n');
    let n = d.oom_kills.len();
    let head = if n > KILLS_TOLD {
        format!("OOM KILLS ({n}), latest first; the {KILLS_TOLD} latest here, all in --format json")
    } else {
        format!("OOM KILLS ({n}), latest first")
    };
    let _ = writeln!(out, "{}", st.paint("1", &head));
    for k in d.oom_kills.iter().take(KILLS_TOLD) {
        let when = k.unix_seconds.map_or("at an unknown time".into(), |t| {
            crate::log::rfc3339::format(t as i64, None)
        });
        let comm: String = visible(&k.comm).chars().take(24).collect();
        let limit = k
            .limit_of
            .as_deref()
            .map_or(String::new(), |m| format!(" of {m}"));
        let head = format!("  {when}  {comm} (pid {}), {}{limit}", k.pid, k.constraint);
        let head: String = head.chars().take(WIDTH).collect();
        let _ = writeln!(out, "{}", st.paint("1;31", &head));
        let sizes = |m: &std::collections::BTreeMap<&str, u64>| {
            m.iter()
                .map(|(k, v)| format!("{k} {}", size(*v)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        wrapped(out, "    killed:   ", &sizes(&k.killed_bytes));
        if !k.measured_bytes.is_empty() {
            let ago = match (k.unix_seconds, k.measured_at_unix_seconds) {
                (Some(a), Some(b)) if a >= b => format!(" ({:.0} s before)", a - b),
                _ => String::new(),
            };
            wrapped(
                out,
                "    measured: ",
                &format!("{}{ago}; group {}", sizes(&k.measured_bytes), k.group),
            );
        }
        wrapped(out, "    evidence: ", &k.evidence);
        wrapped(out, "    remedy:   ", &k.remedy);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_every_line_within_the_width() {
        let mut out = String::new();
        let long = "word ".repeat(60) + &"x".repeat(250);
        wrapped(&mut out, "    remedy:   ", &long);
        assert!(out.lines().count() > 3);
        for line in out.lines() {
            assert!(
                line.chars().count() <= WIDTH,
                "{} columns: {line}",
                line.len()
            );
        }
        assert!(out.starts_with("    remedy:   word word"));
        assert!(out
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("              word"));
    }
}
