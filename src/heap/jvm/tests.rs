//! The JVM's account on perf-data files captured from real JVMs (Debian's OpenJDK 17.0.15,
//! `-Xms64m -Xmx256m`, `tests/reproducers/JavaHeap.java 100 20`), each checked against
//! what `jstat -gc` printed of the same JVM at the capture (KiB there, bytes here).

use super::*;

fn captured(name: &str) -> JavaHeap {
    let path = format!(
        "{}/tests/fixtures/hsperfdata/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    interpret(&hsperfdata::parse(&std::fs::read(path).unwrap()).unwrap()).unwrap()
}

fn space<'a>(h: &'a JavaHeap, generation: &str, name: &str) -> &'a Space {
    h.spaces
        .iter()
        .find(|s| s.generation == generation && s.name == name)
        .unwrap_or_else(|| panic!("{generation}/{name} in {:?}", h.spaces))
}

const KIB: u64 = 1024;

#[test]
fn g1_pads_each_space_by_the_object_alignment() {
    let h = captured("jdk17-g1");
    assert_eq!(h.collector, Gc::G1);
    // jstat: EC 77824.0, OC 75776.0, OU 44537.7; MemoryPoolMXBean: old used 45606576.
    assert_eq!(space(&h, "young", "eden").committed_bytes, 77824 * KIB + 8);
    assert_eq!(space(&h, "young", "s0").committed_bytes, 8);
    let old = space(&h, "old", "space");
    assert_eq!(old.committed_bytes, 75776 * KIB + 8);
    assert_eq!(old.used_bytes, 45606576);
    assert_eq!(old.max_bytes, (256 << 20) + 8);
    // MC 9792.0 (jstat's metaspace is committed; the counter is the same).
    assert_eq!(h.metaspace.map(|m| m.0), Some(10027008));
    assert_eq!(h.spaces.len(), 4);
}

#[test]
fn parallel_and_serial_have_eden_two_survivors_and_old() {
    let h = captured("jdk17-parallel");
    assert_eq!(h.collector, Gc::Parallel);
    // jstat: S0C 512.0, S1C 2560.0, EC 32768.0, OC 97792.0.
    assert_eq!(space(&h, "new", "eden").committed_bytes, 32768 * KIB);
    assert_eq!(space(&h, "new", "s0").committed_bytes, 512 * KIB);
    assert_eq!(space(&h, "new", "s1").committed_bytes, 2560 * KIB);
    assert_eq!(space(&h, "old", "old").committed_bytes, 97792 * KIB);
    let h = captured("jdk17-serial");
    assert_eq!(h.collector, Gc::Serial);
    // jstat: S0C 3904.0, S1C 3904.0, EC 31680.0, OC 78864.0.
    assert_eq!(space(&h, "new", "eden").committed_bytes, 31680 * KIB);
    assert_eq!(space(&h, "new", "s0").committed_bytes, 3904 * KIB);
    assert_eq!(space(&h, "old", "old").committed_bytes, 78864 * KIB);
    assert_eq!(h.committed_bytes(), (31680 + 3904 + 3904 + 78864) * KIB);
}

#[test]
fn zgc_has_one_space_and_no_policy_name() {
    let h = captured("jdk17-z");
    assert_eq!(h.collector, Gc::Z);
    // jstat: OC 247808.0, OU 57344.0.
    assert_eq!(h.spaces.len(), 1);
    assert_eq!(h.committed_bytes(), 247808 * KIB);
    assert_eq!(h.used_bytes(), 57344 * KIB);
    assert_eq!(h.spaces[0].max_bytes, 256 << 20);
}

#[test]
fn absurd_figures_make_the_file_malformed_not_a_figure() {
    let file = || {
        hsperfdata::parse(
            &std::fs::read(format!(
                "{}/tests/fixtures/hsperfdata/jdk17-z",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap(),
        )
        .unwrap()
    };
    let with = |name: &str, v: hsperfdata::Value| {
        let mut p = file();
        let e = p.entries.iter_mut().find(|(n, _)| n == name).unwrap();
        e.1 = v;
        interpret(&p)
    };
    use hsperfdata::Value::{Long, Text};
    let used = "sun.gc.generation.1.space.0.used";
    assert_eq!(with(used, Long(-1)), Err(Unmeasured::Malformed));
    assert_eq!(
        with(used, Long(1 << 40)),
        Err(Unmeasured::Malformed),
        "used > max"
    );
    assert_eq!(with(used, Text("x".into())), Err(Unmeasured::Malformed));
    let name = "sun.gc.generation.1.space.0.name";
    assert_eq!(
        with(name, Text("a\"} 1\nevil 9".into())),
        Err(Unmeasured::Malformed)
    );
    assert_eq!(with(name, Text(String::new())), Err(Unmeasured::Malformed));
    let spaces = "sun.gc.generation.1.spaces";
    assert_eq!(with(spaces, Long(1000)), Err(Unmeasured::Malformed));
    assert_eq!(
        with(spaces, Long(2)),
        Err(Unmeasured::Malformed),
        "a space missing"
    );
    let mut none = file();
    none.entries
        .retain(|(n, _)| !n.starts_with("sun.gc.generation"));
    assert_eq!(interpret(&none), Err(Unmeasured::Malformed));
}

#[test]
fn the_heaps_floor_is_its_last_minimum_flag() {
    assert_eq!(captured("jdk17-g1").floor_bytes, Some(64 << 20));
    assert_eq!(heap_floor("-Xms1g -Xmx4g"), Some(1 << 30));
    assert_eq!(
        heap_floor("-Xms1g -XX:InitialHeapSize=512M"),
        Some(512 << 20)
    );
    assert_eq!(
        heap_floor("-Xms1g -XX:MinHeapSize=64m -Xms2g"),
        Some(64 << 20)
    );
    assert_eq!(heap_floor("-Xmx4g -Dx=-Xms9"), None);
    assert_eq!(heap_floor("-Xmsjunk -Xms99999999999999999999t"), None);
    assert_eq!(captured("jdk17-z").feature, Some(17));
    assert_eq!(
        ["21", "11.0.2", "1.8.0_402", "25-ea", "x"].map(feature),
        [Some(21), Some(11), Some(8), Some(25), None]
    );
}
