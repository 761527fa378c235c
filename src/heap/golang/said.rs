//! What the Go reader says (`shape::Says`): its families, the finding its free heap in
//! RAM makes, and what gives it back.

use super::{Go, GoHeap, Unmeasured};
use crate::family::{metric, Metric};
use crate::heap::shape::{NoFigure, Says};
use crate::heap::words::{Gap, Remedy, Said, Samples, Size, Subject, EXPORTER, PROCESSES};

pub(crate) const GO_READS_TOTAL: Metric = metric!(membloat "go_reads", Counter, None, ["outcome"], EXPORTER, "the exporter",
        "Reads of deep-read Go programs' heaps (the runtime's own figures, found through the binary's symbols and DWARF) by outcome: measured; stripped (built with -ldflags=-s: no symbol table); no_dwarf (built with -ldflags=-w); unknown_layout (the DWARF lacks a field this exporter reads: a Go version it does not know); unreadable (no ptrace access); moving (the figures changed under two reads, tried again at the next deep read); budget (the read ran out of its time or pages, or the DWARF a layout needs is more than its 20 MiB: a Go binary of much over 40 MB with its DWARF; backed off); implausible (a free heap in resident pages larger than the process's resident memory: not believed).");
pub(crate) const PROCESS_GO_HEAP_IN_USE_BYTES: Metric = metric!(membloat "process_go_heap_in_use", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/mem (runtime.gcController), the binary's symbols and DWARF",
        "A Go program's heap in spans in use (runtime/metrics' /memory/classes/heap/objects plus .../unused), as its runtime counts it (deep tier).");
pub(crate) const PROCESS_GO_HEAP_FREE_BYTES: Metric = metric!(membloat "process_go_heap_free", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/mem (runtime.gcController), the binary's symbols and DWARF",
        "A Go program's free heap not yet returned to the OS (runtime/metrics' /memory/classes/heap/free): kept until its scavenger releases it.");
pub(crate) const PROCESS_GO_HEAP_FREE_RESIDENT_BYTES: Metric = metric!(membloat "process_go_heap_free_resident", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/mem (runtime.mheap_.pages), pagemap",
        "Of a Go program's free heap, the bytes in resident pages (its page allocator's free, unscavenged pages, then pagemap): the RAM its runtime holds unused, its measured hoarding.");
pub(crate) const PROCESS_GO_HEAP_RELEASED_BYTES: Metric = metric!(membloat "process_go_heap_released", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/mem (runtime.gcController), the binary's symbols and DWARF",
        "A Go program's heap returned to the OS and not reused (runtime/metrics' /memory/classes/heap/released).");
pub(crate) const PROCESS_GO_GC_GOAL_BYTES: Metric = metric!(membloat "process_go_gc_goal", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/mem (runtime.gcController), the binary's symbols and DWARF",
        "The heap size at which a Go program's next GC should end, as GOGC sets it (runtime/metrics' /gc/heap/goal unless GOMEMLIMIT binds).");
pub(crate) const PROCESS_GO_MEMORY_LIMIT_BYTES: Metric = metric!(membloat "process_go_memory_limit", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/mem (runtime.gcController), the binary's symbols and DWARF",
        "A Go program's soft memory limit (GOMEMLIMIT or debug.SetMemoryLimit); absent when none is set.");
pub(crate) const PROCESS_GO_UNMEASURED: Metric = metric!(membloat "process_go_unmeasured", Gauge, None, ["pid", "comm", "reason"], PROCESSES, "/proc/PID/exe, /proc/PID/mem",
        "1 for a Go program whose heap could not be read, by reason (as membloat_go_reads_total's outcomes): stripped (-ldflags=-s), no_dwarf (-ldflags=-w), unknown_layout, unreadable, moving, budget, implausible. Such a program has no hoarding figure.");

impl Says for Go {
    const READS: Metric = GO_READS_TOTAL;
    const ROWS: &'static [Metric] = &[
        PROCESS_GO_HEAP_IN_USE_BYTES,
        PROCESS_GO_HEAP_FREE_BYTES,
        PROCESS_GO_HEAP_FREE_RESIDENT_BYTES,
        PROCESS_GO_HEAP_RELEASED_BYTES,
        PROCESS_GO_GC_GOAL_BYTES,
        PROCESS_GO_MEMORY_LIMIT_BYTES,
        PROCESS_GO_UNMEASURED,
    ];

    fn samples(read: &Result<Box<GoHeap>, Unmeasured>, out: &mut Samples) {
        let g = match read {
            Ok(g) => g,
            Err(why) => return out.reason(&PROCESS_GO_UNMEASURED, Some(why.as_str())),
        };
        out.put(&PROCESS_GO_HEAP_IN_USE_BYTES, Some(g.in_use_bytes));
        out.put(&PROCESS_GO_HEAP_FREE_BYTES, Some(g.free_bytes));
        out.put(
            &PROCESS_GO_HEAP_FREE_RESIDENT_BYTES,
            Some(g.free_resident_bytes),
        );
        out.put(&PROCESS_GO_HEAP_RELEASED_BYTES, Some(g.released_bytes));
        out.put(&PROCESS_GO_GC_GOAL_BYTES, Some(g.gc_percent_goal_bytes));
        out.put(&PROCESS_GO_MEMORY_LIMIT_BYTES, g.memory_limit());
    }

    fn said(g: &Box<GoHeap>, held: u64, process: Subject) -> Said {
        let limit = g.memory_limit().map_or(String::from("no GOMEMLIMIT"), |l| {
            format!("GOMEMLIMIT {}", Size(l))
        });
        Said {
            kind: "go_heap",
            evidence: format!(
                "the Go runtime holds {} of free heap in RAM it does not use: {} free, {} released, {} in use, GC goal {}, {limit} (its own figures)",
                Size(held),
                Size(g.free_bytes),
                Size(g.released_bytes),
                Size(g.in_use_bytes),
                Size(g.gc_percent_goal_bytes),
            ),
            remedy: Some(go_heap(process.version)),
        }
    }

    fn gap(why: Option<Unmeasured>) -> Option<Gap> {
        let (evidence, fix) = go_unmeasured(why?);
        Some(Gap {
            kind: "go_heap_unmeasured",
            evidence,
            fix,
        })
    }
}

/// What gives a Go program's free heap back: a soft memory limit the scavenger works to,
/// or a forced return; before Go 1.16 the returned pages stayed in RSS (MADV_FREE) unless
/// `madvdontneed` was set. `version` is the binary's (`go1.15.7`; empty when unknown).
fn go_heap(version: &str) -> Remedy {
    let minor = version
        .strip_prefix("go1.")
        .and_then(|v| v.split(['.', 'r', 'b']).next())
        .and_then(|m| m.parse::<u32>().ok());
    let mut what = String::from(
        "GOMEMLIMIT near the container's limit (the scavenger returns free heap as the program nears it), or debug.FreeOSMemory() after a burst (returns it at once)",
    );
    if minor.is_some_and(|m| (12..=15).contains(&m)) {
        what.push_str("; with Go 1.12-1.15 also GODEBUG=madvdontneed=1, or returned pages stay in RSS until the kernel needs them");
    }
    Remedy::advice(
        what,
        Some("more frequent collections near the limit, and the heap regrows (page faults, zeroing) at the next burst"),
    )
}

/// Why a Go program's heap was not read, and what would let it be.
fn go_unmeasured(why: Unmeasured) -> (&'static str, &'static str) {
    let (evidence, fix) = match why {
        Unmeasured::Stripped => (
            "the Go binary has no symbol table (built with -ldflags=-s), so its runtime's figures cannot be found",
            "where you build it, build without -s (GoReleaser's default ldflags carry it; -w alone keeps the symbols but not the DWARF the fields' places come from); where it is a vendor's build (a container runtime, the kubelet, most packaged Go services), read the figure from what it exposes itself: its Prometheus metrics give go_memstats_heap_idle_bytes - go_memstats_heap_released_bytes, the free heap it keeps, and its pprof endpoint (/debug/pprof/heap?debug=1) the same as HeapIdle - HeapReleased",
        ),
        Unmeasured::NoDwarf => (
            "the Go binary has no DWARF (built with -ldflags=-w), so where its runtime keeps its figures is unknown",
            "build without -w (the DWARF adds to the file, not to the memory the program uses)",
        ),
        Unmeasured::UnknownLayout => (
            "the Go binary's DWARF lacks a field this exporter reads: a Go version it does not know",
            "tell the exporter's maintainers the Go version (`go version -m BINARY`)",
        ),
        Unmeasured::Unreadable => (
            "the Go program's memory could not be read, so its heap was not measured",
            "grant the exporter CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH (see the README's Privileges)",
        ),
        Unmeasured::Moving => (
            "the Go program's heap changed under two reads",
            "wait for the next deep read",
        ),
        Unmeasured::Budget => (
            "reading the Go program's heap (or its binary's symbols and DWARF) took more than a reader may spend on one process",
            "nothing to do on the program; the exporter tries again after a back-off (membloat_go_reads_total{outcome=\"budget\"} counts these)",
        ),
        Unmeasured::Implausible => (
            "the Go program's runtime said it keeps more free heap in RAM than the process has resident, so the figure was not believed",
            "look at the process: its memory does not hold a Go runtime's heap as the binary describes it",
        ),
    };
    (evidence, fix)
}
