use super::*;
use crate::model::signals::{
    ARENAS_PER_CPU, HOARD_MIN_HEAP_BYTES, HOARD_MIN_HEAP_SHARE, HOARD_MIN_MEASURED_BYTES,
    HOARD_MIN_RETAINED, IDLE_MAX_CPU_SHARE,
};

#[test]
fn names_are_unique_prefixed_and_end_as_their_type_and_unit_say() {
    let mut seen = std::collections::BTreeSet::new();
    for m in all() {
        assert!(seen.insert(m.name), "{} twice in the catalogue", m.name);
        // Only the standard process_* names of the exporter's own process go without it.
        let prefix = if m.source.starts_with("/proc/self/") {
            assert!(m.name.starts_with("process_"), "{}", m.name);
            ""
        } else {
            assert!(m.name.starts_with("membloat_"), "{}", m.name);
            "membloat_"
        };
        let stem = match m.kind {
            Kind::Counter => m.name.strip_suffix("_total"),
            Kind::Info => m.name.strip_suffix("_info"),
            Kind::Gauge => Some(m.name),
        }
        .unwrap_or_else(|| panic!("{}: a {:?} must end as its type says", m.name, m.kind));
        if m.unit != MetricUnit::None {
            assert!(
                stem.ends_with(&format!("_{}", m.unit.as_str())),
                "{}: unit {:?} missing from the name",
                m.name,
                m.unit
            );
        }
        // The base the encoder gives prometheus-client rebuilds the full name.
        let mut rebuilt = format!("{prefix}{}", m.base);
        if m.unit != MetricUnit::None {
            rebuilt = format!("{rebuilt}_{}", m.unit.as_str());
        }
        match m.kind {
            Kind::Counter => rebuilt.push_str("_total"),
            Kind::Info => rebuilt.push_str("_info"),
            Kind::Gauge => {}
        }
        assert_eq!(rebuilt, m.name);
        assert!(!m.help.is_empty() && m.help.ends_with('.'), "{}", m.name);
        assert!(!m.source.is_empty(), "{}", m.name);
        // A pattern's key is in its name and help both, so the expansion names the key.
        assert_eq!(m.is_pattern(), m.help.contains("<key>"), "{}", m.name);
    }
}

#[test]
fn thresholds_in_help_texts_are_the_signals_constants() {
    let mib = |b: u64| format!("{} MiB", b >> 20);
    let h = PROCESS_HOARDED_BYTES.help;
    for (what, text) in [
        (
            "measured floor",
            format!("0 below {}", mib(HOARD_MIN_MEASURED_BYTES)),
        ),
        ("heap floor", format!(">= {}", mib(HOARD_MIN_HEAP_BYTES))),
        (
            "heap share",
            format!(">= {} of RssAnon", share(HOARD_MIN_HEAP_SHARE)),
        ),
        ("retained", format!("RSS >= {} x peak", HOARD_MIN_RETAINED)),
    ] {
        assert!(
            h.contains(&text),
            "hoarded help lacks the {what} {text:?}: {h}"
        );
    }
    let idle = format!("under {} %", IDLE_MAX_CPU_SHARE * 100.0);
    assert!(PROCESS_IDLE.help.contains(&idle), "{}", PROCESS_IDLE.help);
    let ceiling = format!("{ARENAS_PER_CPU} arenas per online CPU");
    assert!(
        PROCESS_ARENA_AT_CEILING.help.contains(&ceiling),
        "{}",
        PROCESS_ARENA_AT_CEILING.help
    );
    let floor = format!("0 below {}", mib(HOARD_MIN_MEASURED_BYTES));
    assert!(GROUP_HOARDED_BYTES.help.contains(&floor));
}

fn share(x: f64) -> &'static str {
    match x {
        0.5 => "half",
        _ => panic!("no words for {x}"),
    }
}

#[test]
fn the_base_is_the_name_without_prefix_type_and_unit() {
    assert_eq!(SCANS_TOTAL.base, "scans");
    assert_eq!(
        crate::units::pressure::PRESSURE_MEMORY_WAITING_SECONDS_TOTAL.base,
        "pressure_memory_waiting"
    );
    assert_eq!(
        crate::units::pressure::PRESSURE_MEMORY_WAITING_RATIO.base,
        "pressure_memory_waiting"
    );
    assert_eq!(BUILD_INFO.base, "build");
    assert_eq!(PROCESS_HEAP_FREE_CHUNKS.base, "process_heap_free_chunks");
    assert_eq!(crate::units::vmstat::VMSTAT_KEY_TOTAL.base, "vmstat_<key>");
}
