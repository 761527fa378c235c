//! The section of a process `--pid` names: its memory as its status file gives it, its
//! place in the OOM killer's order, its memory cgroup, and what its heap readers found.

use std::fmt::Write;

use super::{opt, wrapped, Style, WIDTH};
use crate::explain::detail::ProcessDetail;
use crate::explain::size;

/// A process `--pid` names, in depth.
pub(super) fn section(out: &mut String, st: &Style, p: &ProcessDetail) {
    let comm: String = p.comm.chars().take(24).collect();
    let mut head = format!("PROCESS {comm} (pid {})", p.pid);
    if let Some(g) = &p.group {
        let _ = write!(head, ", group {g}");
    }
    if let (Some(a), Some(r)) = (p.allocator, p.runtime) {
        let _ = write!(head, ", {a}, {r}");
        if let Some(v) = &p.runtime_version {
            let _ = write!(head, " {v}");
        }
    }
    let head: String = head.chars().take(WIDTH).collect();
    let _ = writeln!(out, "{}", st.paint("1", &head));
    wrapped(
        out,
        "  memory    ",
        &format!(
            "RSS {} (anonymous {}, file {}, shared memory {}), swap {}, peak RSS {}, virtual {}",
            opt(p.rss_bytes),
            opt(p.rss_anon_bytes),
            opt(p.rss_file_bytes),
            opt(p.rss_shmem_bytes),
            opt(p.swap_bytes),
            opt(p.peak_rss_bytes),
            opt(p.virtual_bytes)
        ),
    );
    wrapped(
        out,
        "  oom       ",
        &format!(
            "oom_score {}, oom_score_adj {}: number {} in the OOM killer's order",
            p.oom_score.map_or("unknown".into(), |s| s.to_string()),
            p.oom_score_adj.map_or("unknown".into(), |s| s.to_string()),
            p.oom_rank
        ),
    );
    if let Some(c) = &p.memory_cgroup {
        let limit = p
            .memory_limit_bytes
            .map_or("no limit".into(), |l| format!("limit {}", size(l)));
        wrapped(out, "  cgroup    ", &format!("{c}, {limit}"));
    }
    let mut heap = match (p.hoarded_bytes, p.hoard_method) {
        (Some(b), Some(m)) => format!("{} hoarded ({m})", size(b)),
        _ => "no hoarding figure".into(),
    };
    for r in &p.heap_readers {
        let _ = write!(heap, "; {}: {}", r.reader, r.outcome);
        if let Some(b) = r.held_bytes.filter(|_| r.reader != "glibc") {
            let _ = write!(heap, ", {} held", size(b));
        }
    }
    if let (Some(read), Some(scan)) = (p.heap_read_at_unix_seconds, p.scanned_at_unix_seconds) {
        let _ = write!(
            heap,
            " (read {:.0} s before the scan)",
            (scan - read).max(0.0)
        );
    }
    wrapped(out, "  heap      ", &heap);
    out.push('\n');
}
