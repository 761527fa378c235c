//! What the JVM reader says (`shape::Says`): its families, the finding its held heap
//! makes, and the remedy read from what the JVM says of itself.

use std::borrow::Cow;

use super::{Gc, JavaHeap, Jvm, Unmeasured};
use crate::family::{metric, Metric};
use crate::heap::shape::{NoFigure, Says};
use crate::heap::words::{Gap, Remedy, Said, Samples, Size, Subject, EXPORTER, PROCESSES};

pub(crate) const JVM_READS_TOTAL: Metric = metric!(membloat "jvm_reads", Counter, None, ["outcome"], EXPORTER, "the exporter",
        "Reads of deep-read JVMs' perf data (hsperfdata, read through the JVM's own mapping of it) by outcome: measured (figures and held heap); no_resident (figures, but the heap's range or file was not found: no held figure); not_published (no perf data: -XX:-UsePerfData, -XX:+PerfDisableSharedMem, a uid the image's /etc/passwd does not name (HotSpot then keeps it private), or another JVM holds the file of the same /tmp and namespace pid); unreadable (no ptrace access); not_ready (the JVM is starting); malformed (outside HotSpot's format, or absurd figures); budget (the read ran out of its time or pages: backed off); implausible (a held heap larger than the process's resident memory: not believed); remote_file (libjvm or the perf-data file lies on a FUSE or network mount or on one no mountinfo lists: never read).");
pub(crate) const PROCESS_JVM_INFO: Metric = metric!(membloat "process_jvm", Info, None, ["collector", "pid", "comm"], PROCESSES, "/proc/PID/mem (hsperfdata)",
        "A JVM's collector (g1, parallel, serial, z, shenandoah, other), from its perf data (deep tier).");
pub(crate) const PROCESS_JVM_HEAP_COMMITTED_BYTES: Metric = metric!(membloat "process_jvm_heap_committed", Gauge, Bytes, ["pid", "comm", "generation", "space"], PROCESSES, "/proc/PID/mem (hsperfdata)",
        "Memory a JVM committed to each space of its Java heap, as its perf data names them (jstat's S0C, EC, OC...; JDK 17's G1 adds 8 bytes a space). Committed is not resident: see membloat_process_jvm_heap_resident_bytes.");
pub(crate) const PROCESS_JVM_HEAP_USED_BYTES: Metric = metric!(membloat "process_jvm_heap_used", Gauge, Bytes, ["pid", "comm", "generation", "space"], PROCESSES, "/proc/PID/mem (hsperfdata)",
        "Bytes a JVM uses in each space of its Java heap (jstat's S0U, EU, OU...).");
pub(crate) const PROCESS_JVM_HEAP_MAX_BYTES: Metric = metric!(membloat "process_jvm_heap_max", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/mem (libjvm, hsperfdata)",
        "The most a JVM's Java heap may grow to (-Xmx): the size of its reserved range (ZGC: its one space's maximum).");
pub(crate) const PROCESS_JVM_HEAP_RESIDENT_BYTES: Metric = metric!(membloat "process_jvm_heap_resident", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/mem (libjvm), pagemap, smaps",
        "A JVM's Java heap in RAM: pages present in its reserved range (found as HotSpot's Serviceability Agent finds it, from libjvm's exported VMStructs), or the bytes allocated to ZGC's heap file.");
pub(crate) const PROCESS_JVM_METASPACE_COMMITTED_BYTES: Metric = metric!(membloat "process_jvm_metaspace_committed", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/mem (hsperfdata)",
        "Metaspace a JVM committed (jstat's MC).");
pub(crate) const PROCESS_JVM_METASPACE_USED_BYTES: Metric = metric!(membloat "process_jvm_metaspace_used", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/mem (hsperfdata)",
        "Metaspace a JVM uses (jstat's MU).");
pub(crate) const PROCESS_JVM_UNMEASURED: Metric = metric!(membloat "process_jvm_unmeasured", Gauge, None, ["pid", "comm", "reason"], PROCESSES, "/proc/PID/mem (hsperfdata, libjvm)",
        "1 for a JVM whose held Java heap could not be measured, by reason (as membloat_jvm_reads_total's outcomes): not_published (-XX:-UsePerfData, -XX:+PerfDisableSharedMem, a uid the image's /etc/passwd does not name, or another JVM holds its perf-data file), no_resident (its heap's range or file was not found), unreadable, not_ready, malformed, budget, implausible, remote_file. Such a JVM has no measured hoarding figure.");

impl Says for Jvm {
    const READS: Metric = JVM_READS_TOTAL;
    const ROWS: &'static [Metric] = &[
        PROCESS_JVM_INFO,
        PROCESS_JVM_HEAP_COMMITTED_BYTES,
        PROCESS_JVM_HEAP_USED_BYTES,
        PROCESS_JVM_HEAP_MAX_BYTES,
        PROCESS_JVM_HEAP_RESIDENT_BYTES,
        PROCESS_JVM_METASPACE_COMMITTED_BYTES,
        PROCESS_JVM_METASPACE_USED_BYTES,
        PROCESS_JVM_UNMEASURED,
    ];

    fn samples(read: &Result<Box<JavaHeap>, Unmeasured>, out: &mut Samples) {
        let j = match read {
            Ok(j) => j,
            Err(why) => return out.reason(&PROCESS_JVM_UNMEASURED, Some(why.as_str())),
        };
        out.labelled(
            &PROCESS_JVM_INFO,
            vec![("collector", j.collector.as_str().to_string())],
            1,
        );
        let labels = |s: &super::Space| {
            vec![
                ("generation", s.generation.as_str().to_string()),
                ("space", s.name.clone()),
            ]
        };
        for s in &j.spaces {
            out.labelled(
                &PROCESS_JVM_HEAP_COMMITTED_BYTES,
                labels(s),
                s.committed_bytes,
            );
        }
        for s in &j.spaces {
            out.labelled(&PROCESS_JVM_HEAP_USED_BYTES, labels(s), s.used_bytes);
        }
        out.put(&PROCESS_JVM_HEAP_MAX_BYTES, j.max_bytes());
        out.put(&PROCESS_JVM_HEAP_RESIDENT_BYTES, j.resident_bytes);
        out.put(
            &PROCESS_JVM_METASPACE_COMMITTED_BYTES,
            j.metaspace.map(|m| m.0),
        );
        out.put(&PROCESS_JVM_METASPACE_USED_BYTES, j.metaspace.map(|m| m.1));
        let partial = j.held_bytes().is_none().then_some(Unmeasured::PARTIAL);
        out.reason(&PROCESS_JVM_UNMEASURED, partial.flatten());
    }

    fn said(j: &Box<JavaHeap>, held: u64, process: Subject) -> Said {
        Said {
            kind: "java_heap",
            evidence: format!(
                "the Java heap ({} collector) holds {} in RAM it does not use: {} resident, {} used, {} committed (its perf data)",
                j.collector.as_str(),
                Size(held),
                Size(j.resident_bytes.unwrap_or(0)),
                Size(j.used_bytes()),
                Size(j.committed_bytes()),
            ),
            remedy: Some(java_heap(j, process.pid)),
        }
    }

    fn gap(why: Option<Unmeasured>) -> Option<Gap> {
        let (evidence, fix) = java_unmeasured(why);
        Some(Gap {
            kind: "java_heap_unmeasured",
            evidence,
            fix,
        })
    }
}

/// The exact remedy for a Java heap the collector keeps committed and resident, from what
/// the JVM says of itself: a heap at its floor (`-Xms`) shrinks only when started with a
/// lower one; a growable one gives back at run time where its collector resizes by the
/// free ratios at a full collection (G1, Serial), its flags set in an order `jcmd`
/// accepts (`MaxHeapFreeRatio` may not go below `MinHeapFreeRatio`, 40 by default).
pub fn java_heap(j: &JavaHeap, pid: u32) -> Remedy {
    const COST: &str =
        "more frequent collections, and the heap regrows (page faults, zeroing) at the next burst";
    let committed = j.committed_bytes();
    let used = j.used_bytes();
    let held = j.held_bytes().unwrap_or(0);
    // What a smaller -Xms should leave room for: what is used, rounded up to 64 MiB.
    let xms = (used.max(1).div_ceil(64 << 20) * 64).max(64);
    let periodic = match j.feature {
        Some(f) if f < 12 => "",
        _ => " -XX:G1PeriodicGCInterval=60000",
    };
    // At its floor when committed is no more than a region above it (JDK 17's G1 pads
    // each space's figure by 8 bytes; a heap that can shrink is a region or more above).
    let at_floor = j
        .floor_bytes
        .is_some_and(|f| f >= committed.saturating_sub(1 << 20));
    if at_floor {
        let floor = j.floor_bytes.unwrap_or(0) >> 20;
        // What lets each collector give back above the lower floor once started with it.
        let (next, and) = match j.collector {
            Gc::G1 => (
                Some(g1_next(xms, periodic)),
                if periodic.is_empty() { "" } else { ", and a periodic collection so that G1 shrinks it while the program idles" },
            ),
            Gc::Z if j.feature.is_some_and(|f| f < 13) => (None, ", on a JDK of 13 or later: this ZGC never gives heap back"),
            Gc::Z => (
                Some(format!("-Xms{xms}m -XX:ZUncommitDelay=30")),
                ", and a shorter uncommit delay, after which ZGC gives back what it does not use",
            ),
            Gc::Shenandoah => (
                Some(format!("-Xms{xms}m -XX:+UnlockExperimentalVMOptions -XX:ShenandoahUncommitDelay=30000")),
                ", and a shorter uncommit delay (an experimental flag, so unlocked first)",
            ),
            Gc::Parallel | Gc::Serial => (
                Some(format!("-XX:+UseG1GC {}", g1_next(xms, periodic))),
                ", with G1 in place of its collector, which keeps the heap it grew even above a lower -Xms",
            ),
            Gc::Other => (Some(format!("-Xms{xms}m")), ""),
        };
        return Remedy {
            what: format!("the heap is at its floor (-Xms{floor}m, all of it committed): no collector gives back below -Xms, and nothing at run time lowers it; start it with a lower -Xms (next start){and}"),
            cost: Some(Cow::Borrowed(COST)),
            now: None,
            now_gives_back_bytes: None,
            next_start: next,
        };
    }
    let ratios = format!("jcmd {pid} VM.set_flag MinHeapFreeRatio 10 && jcmd {pid} VM.set_flag MaxHeapFreeRatio 30 && jcmd {pid} GC.run");
    // Down to the floor at most: no collector goes below it, and G1 gives back its
    // highest regions first, so what is resident above the floor in its range.
    let gives_back = j.resident_above_floor_bytes.map(|b| b.min(held));
    match j.collector {
        Gc::G1 => Remedy {
            what: format!("lower the free ratios (in an order jcmd accepts: MaxHeapFreeRatio may not go below MinHeapFreeRatio) and collect: G1 shrinks the heap by them, down to -Xms (now); start it with them{} (next start)", if periodic.is_empty() { "" } else { " and a periodic collection, so that G1 shrinks it while the program idles" }),
            cost: Some(Cow::Borrowed(COST)),
            now: Some(ratios),
            now_gives_back_bytes: gives_back,
            next_start: Some(format!("-XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30{periodic}")),
        },
        Gc::Parallel | Gc::Serial => Remedy {
            what: format!("the {} collector keeps the heap it grew, even started with a lower -Xms (Parallel's adaptive sizing ignores the free ratios; Serial's shrink at a full collection gives little back): G1 gives heap back at run time, so start it with G1 in place of its collector, with the free ratios (next start); a lower -Xmx bounds what it can keep", j.collector.as_str()),
            cost: Some(Cow::Borrowed(COST)),
            next_start: Some(format!("-XX:+UseG1GC {}", g1_next(xms, periodic))),
            ..Remedy::default()
        },
        Gc::Z if j.feature.is_some_and(|f| f < 13) => Remedy {
            what: format!("this ZGC (JDK {}) never gives heap back: a lower -Xmx, or a JDK of 13 or later, whose ZGC uncommits unused heap after -XX:ZUncommitDelay", j.feature.unwrap_or(11)),
            cost: Some(Cow::Borrowed(COST)),
            ..Remedy::default()
        },
        Gc::Z => Remedy {
            what: format!("ZGC gives unused heap back by itself after -XX:ZUncommitDelay (300 s by default) while -XX:+ZUncommit is on{}; start it with a shorter delay", if j.feature.is_some_and(|f| f >= 25) { ", gradually over several delays from JDK 25 on" } else { "" }),
            cost: Some(Cow::Borrowed(COST)),
            now: None,
            now_gives_back_bytes: None,
            next_start: Some("-XX:ZUncommitDelay=30".into()),
        },
        Gc::Shenandoah => Remedy {
            what: "Shenandoah gives unused heap back after -XX:ShenandoahUncommitDelay (5 minutes by default; an experimental flag, so unlocked first); start it with a shorter delay".into(),
            cost: Some(Cow::Borrowed(COST)),
            now: None,
            now_gives_back_bytes: None,
            next_start: Some("-XX:+UnlockExperimentalVMOptions -XX:ShenandoahUncommitDelay=30000".into()),
        },
        Gc::Other => Remedy {
            what: "the collector's uncommit settings, and an -Xms below -Xmx".into(),
            cost: Some(Cow::Borrowed(COST)),
            ..Remedy::default()
        },
    }
}

/// G1's next start: a floor of `xms` MiB, the free ratios it shrinks by at a full
/// collection, and (`periodic`, JDK 12+) a periodic collection while it idles.
fn g1_next(xms: u64, periodic: &str) -> String {
    format!("-Xms{xms}m -XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30{periodic}")
}

/// Why a JVM's Java heap was not measured (`None`: its figures were read without its
/// resident heap), and what would let it be.
fn java_unmeasured(why: Option<Unmeasured>) -> (&'static str, &'static str) {
    let (evidence, fix) = match why {
        Some(Unmeasured::NotPublished) => (
            "the JVM publishes no perf data, so its Java heap cannot be measured from outside",
            "drop -XX:-UsePerfData and -XX:+PerfDisableSharedMem; in an image without /etc/passwd (scratch, distroless static), give the JVM's uid a name there, since HotSpot publishes nothing for a nameless uid; and give JVMs that share a /tmp and a namespace pid a /tmp each (the one that loses the perf-data file publishes nothing)",
        ),
        Some(Unmeasured::Unreadable) => (
            "the JVM's memory could not be read, so its Java heap was not measured",
            "grant the exporter CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH (see the README's Privileges)",
        ),
        Some(Unmeasured::Budget) => (
            "reading the JVM's heap took more than a reader may spend on one process",
            "nothing to do on the JVM; the exporter tries again after a back-off",
        ),
        Some(Unmeasured::Implausible) => (
            "the JVM's heap figures said it holds more Java heap in RAM than the process has resident, so they were not believed",
            "look at the process: its memory does not hold a HotSpot heap as its perf data describes it",
        ),
        Some(Unmeasured::RemoteFile) => (
            "libjvm or the JVM's perf-data file lies on a FUSE or network mount, which the exporter never reads (its server could hold the read)",
            "install the JDK and the JVM's /tmp on a local filesystem",
        ),
        None => (
            "the JVM's counters were read, but not where its heap lies, so its resident heap was not counted",
            "tell the exporter's maintainers the JDK and collector: libjvm's VMStructs did not lead to the heap",
        ),
        _ => (
            "the JVM's perf data could not be read (it is starting, or its file is not HotSpot's)",
            "wait for the next deep read",
        ),
    };
    (evidence, fix)
}
