//! The exposition of constructed snapshots: the text rewrite, an empty snapshot, hostile
//! names.

use super::*;
use crate::collect::CollectorRun;
use crate::model::derive::ProcessReport;
use crate::model::groups::GroupStats;
use crate::source::Reason;
use std::sync::Arc;

#[test]
fn text_format_renames_counter_and_info_families() {
    let om = "# HELP membloat_scans Scans.\n# TYPE membloat_scans counter\nmembloat_scans_total 3\n# HELP membloat_build Version.\n# TYPE membloat_build info\nmembloat_build_info{version=\"0.1.0\"} 1\n# HELP membloat_x_bytes X.\n# TYPE membloat_x_bytes gauge\n# UNIT membloat_x_bytes bytes\nmembloat_x_bytes 5\n# EOF\n";
    assert_eq!(
        text_from_openmetrics(om),
        "# HELP membloat_scans_total Scans.\n# TYPE membloat_scans_total counter\nmembloat_scans_total 3\n# HELP membloat_build_info Version.\n# TYPE membloat_build_info gauge\nmembloat_build_info{version=\"0.1.0\"} 1\n# HELP membloat_x_bytes X.\n# TYPE membloat_x_bytes gauge\nmembloat_x_bytes 5\n"
    );
}

#[test]
fn empty_snapshot_encodes_self_metrics_only() {
    let om = openmetrics(Arc::new(Snapshot::default()));
    assert!(om.contains("membloat_scans_total 0\n"), "{om}");
    assert!(om.contains("membloat_build_info{version=\""));
    assert!(!om.contains("membloat_memory_total_bytes"));
    assert!(om.ends_with("# EOF\n"));
}

#[test]
fn hostile_process_name_cannot_inject_a_series() {
    let evil = "x\"} 1\nevil 9\n#";
    let mut p = crate::model::derive::tests_support::process(7, evil);
    p.group = Some(evil.into());
    let p = ProcessReport {
        sample: p,
        signals: Default::default(),
        oom_rank: 1,
        identity: Some(crate::heap::runtime::identify(
            Default::default(),
            None,
            None,
        )),
    };
    let snap = Snapshot {
        groups: vec![GroupStats {
            name: evil.into(),
            processes: 1,
            ..GroupStats::default()
        }],
        top: vec![p],
        collectors: vec![CollectorRun {
            name: crate::family::Collector::Processes,
            success: true,
            duration_seconds: 0.0,
        }],
        errors: [((crate::family::Collector::Processes, Reason::Denied), 2)]
            .into_iter()
            .collect(),
        ..Snapshot::default()
    };
    let text = text_from_openmetrics(&openmetrics(Arc::new(snap)));
    assert!(
        text.contains("membloat_group_processes{group=\"x\\\"} 1\\nevil 9\\n#\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "membloat_process_resident_bytes{pid=\"7\",comm=\"x\\\"} 1\\nevil 9\\n#\"} 4096\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "membloat_process_allocator_info{allocator=\"static\",runtime=\"native\",version=\"\",pid=\"7\",comm=\"x\\\"} 1\\nevil 9\\n#\"} 1\n"
        ),
        "{text}"
    );
    assert!(!text.lines().any(|l| l.starts_with("evil")));
    assert!(text.contains(
        "membloat_scan_errors_total{collector=\"processes\",reason=\"permission_denied\"} 2\n"
    ));
}
