//! The KUBELET EVICTION section: each of the kubelet's signals against its thresholds.

use std::fmt::Write;

use super::style::{signed_size, wrapped, Style};
use crate::explain::{size, Diagnosis};

/// The kubelet's signals: how far each is from its thresholds, and how much of the
/// working set it evicts on is page cache the kernel would drop first.
pub(super) fn section(out: &mut String, d: &Diagnosis, st: &Style) {
    if d.eviction.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "{}",
        st.paint(
            "1",
            "KUBELET EVICTION, as the kubelet computes it (docs/eviction.md)"
        )
    );
    for s in &d.eviction {
        let thresholds: Vec<String> = s
            .thresholds
            .iter()
            .map(|t| {
                let met = if t.headroom_bytes < 0 { ": met" } else { "" };
                format!(
                    "{} {} ({} of headroom{met})",
                    t.kind,
                    size(t.bytes),
                    signed_size(t.headroom_bytes)
                )
            })
            .collect();
        let head = format!(
            "  {:<28} {:>11}  ",
            s.signal,
            signed_size(s.available_bytes)
        );
        let limits = if thresholds.is_empty() {
            "no threshold".to_string()
        } else {
            thresholds.join(", ")
        };
        wrapped(
            out,
            &head,
            &format!(
                "{limits}; of its working set of {}, {} is active page cache the kernel would drop before the kubelet evicts",
                size(s.working_set_bytes),
                size(s.active_file_bytes)
            ),
        );
    }
    out.push('\n');
}
