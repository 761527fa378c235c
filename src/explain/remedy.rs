//! The exact remedy for each finding, by the process's allocator and runtime, with its cost
//! where it has one.

use crate::heap::golang::Unmeasured as GoUnmeasured;
use crate::heap::jvm::{Collector, JavaHeap, Unmeasured};
use crate::heap::runtime::{Allocator, Runtime};
use std::borrow::Cow;

use crate::attach::Live;
use crate::heap::HeapMeasure;

mod advice;
mod glibc;
mod python;
pub use advice::{Advice, Remedy, GLIBC_TUNABLES};
use glibc::glibc_hoarding;
pub use python::{python_arenas, python_unmeasured};

/// jemalloc's settings that give its dirty pages back within a second, idle or not.
pub const JEMALLOC_CONF: &str =
    "MALLOC_CONF=background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0";

/// The exact remedy for hoarding by allocator and runtime; for glibc, by where the freed
/// memory lies (`heap`: the walk's measure, `None` when it was only suspected), with a
/// live command where `live` proved one harmless on this host.
pub fn hoarding(
    allocator: Option<Allocator>,
    runtime: Runtime,
    heap: Option<&HeapMeasure>,
    pid: u32,
    live: &Live,
) -> Remedy {
    const COST: &str = "freed memory goes back at once: more mmap/munmap and page faults on allocation-heavy paths";
    if allocator == Some(Allocator::Jemalloc) {
        return Remedy {
            next_start: Some(JEMALLOC_CONF.into()),
            ..Remedy::from((format!("{JEMALLOC_CONF} (a background thread gives dirty pages back within a second, idle or not: without one they decay only while the program allocates; tikv-jemallocator reads _RJEM_MALLOC_CONF); at once, from inside: mallctl(\"arena.4096.purge\", NULL, NULL, NULL, 0)"), Some(COST)))
        };
    }
    let advice: Advice = match allocator {
        Some(Allocator::Jemalloc) => ("MALLOC_CONF=background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0 (a background thread gives dirty pages back within a second, idle or not: without one they decay only while the program allocates; tikv-jemallocator reads _RJEM_MALLOC_CONF); at once, from inside: mallctl(\"arena.4096.purge\", NULL, NULL, NULL, 0)".into(), Some(COST)),
        Some(Allocator::Tcmalloc) => ("TCMALLOC_RELEASE_RATE=10, or MallocExtension::ReleaseFreeMemory() after bursts".into(), Some(COST)),
        Some(Allocator::Mimalloc) => ("MIMALLOC_PURGE_DELAY=0 (mimalloc purges freed pages at once)".into(), Some(COST)),
        Some(Allocator::Glibc) | None => return glibc_hoarding(runtime, heap, pid, live),
        Some(_) => ("the allocator's own setting for giving freed memory back".into(), None),
    };
    advice.into()
}

/// What keeps hoarding from building up again in a program that was killed: nothing can
/// be given back now.
pub fn hoarding_after_kill(allocator: Option<Allocator>, runtime: Runtime) -> String {
    match allocator {
        Some(Allocator::Glibc) | None => {
            let trim = match runtime {
                Runtime::Python => "ctypes.CDLL('libc.so.6').malloc_trim(0) after large frees",
                _ => "malloc_trim(0) in the program after its bursts",
            };
            format!("{trim} (no threshold reaches memory freed below blocks still in use), or {GLIBC_TUNABLES} where it was the top of a heap")
        }
        _ => hoarding(allocator, runtime, None, 0, &Live::default()).what,
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
            Collector::G1 => (
                Some(g1_next(xms, periodic)),
                if periodic.is_empty() { "" } else { ", and a periodic collection so that G1 shrinks it while the program idles" },
            ),
            Collector::Z if j.feature.is_some_and(|f| f < 13) => (None, ", on a JDK of 13 or later: this ZGC never gives heap back"),
            Collector::Z => (
                Some(format!("-Xms{xms}m -XX:ZUncommitDelay=30")),
                ", and a shorter uncommit delay, after which ZGC gives back what it does not use",
            ),
            Collector::Shenandoah => (
                Some(format!("-Xms{xms}m -XX:+UnlockExperimentalVMOptions -XX:ShenandoahUncommitDelay=30000")),
                ", and a shorter uncommit delay (an experimental flag, so unlocked first)",
            ),
            Collector::Parallel | Collector::Serial => (
                Some(format!("-XX:+UseG1GC {}", g1_next(xms, periodic))),
                ", with G1 in place of its collector, which keeps the heap it grew even above a lower -Xms",
            ),
            Collector::Other => (Some(format!("-Xms{xms}m")), ""),
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
        Collector::G1 => Remedy {
            what: format!("lower the free ratios (in an order jcmd accepts: MaxHeapFreeRatio may not go below MinHeapFreeRatio) and collect: G1 shrinks the heap by them, down to -Xms (now); start it with them{} (next start)", if periodic.is_empty() { "" } else { " and a periodic collection, so that G1 shrinks it while the program idles" }),
            cost: Some(Cow::Borrowed(COST)),
            now: Some(ratios),
            now_gives_back_bytes: gives_back,
            next_start: Some(format!("-XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30{periodic}")),
        },
        Collector::Parallel | Collector::Serial => Remedy {
            what: format!("the {} collector keeps the heap it grew, even started with a lower -Xms (Parallel's adaptive sizing ignores the free ratios; Serial's shrink at a full collection gives little back): G1 gives heap back at run time, so start it with G1 in place of its collector, with the free ratios (next start); a lower -Xmx bounds what it can keep", j.collector.as_str()),
            cost: Some(Cow::Borrowed(COST)),
            next_start: Some(format!("-XX:+UseG1GC {}", g1_next(xms, periodic))),
            ..Remedy::default()
        },
        Collector::Z if j.feature.is_some_and(|f| f < 13) => Remedy {
            what: format!("this ZGC (JDK {}) never gives heap back: a lower -Xmx, or a JDK of 13 or later, whose ZGC uncommits unused heap after -XX:ZUncommitDelay", j.feature.unwrap_or(11)),
            cost: Some(Cow::Borrowed(COST)),
            ..Remedy::default()
        },
        Collector::Z => Remedy {
            what: format!("ZGC gives unused heap back by itself after -XX:ZUncommitDelay (300 s by default) while -XX:+ZUncommit is on{}; start it with a shorter delay", if j.feature.is_some_and(|f| f >= 25) { ", gradually over several delays from JDK 25 on" } else { "" }),
            cost: Some(Cow::Borrowed(COST)),
            now: None,
            now_gives_back_bytes: None,
            next_start: Some("-XX:ZUncommitDelay=30".into()),
        },
        Collector::Shenandoah => Remedy {
            what: "Shenandoah gives unused heap back after -XX:ShenandoahUncommitDelay (5 minutes by default; an experimental flag, so unlocked first); start it with a shorter delay".into(),
            cost: Some(Cow::Borrowed(COST)),
            now: None,
            now_gives_back_bytes: None,
            next_start: Some("-XX:+UnlockExperimentalVMOptions -XX:ShenandoahUncommitDelay=30000".into()),
        },
        Collector::Other => Remedy {
            what: "the collector's uncommit settings, and an -Xms below -Xmx".into(),
            cost: Some(Cow::Borrowed(COST)),
            ..Remedy::default()
        },
    }
}

/// What gives a Go program's free heap back: a soft memory limit the scavenger works to,
/// or a forced return; before Go 1.16 the returned pages stayed in RSS (MADV_FREE) unless
/// `madvdontneed` was set. `version` is the binary's (`go1.15.7`; empty when unknown).
pub fn go_heap(version: &str) -> Advice {
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
    (
        what,
        Some("more frequent collections near the limit, and the heap regrows (page faults, zeroing) at the next burst"),
    )
}

/// G1's next start: a floor of `xms` MiB, the free ratios it shrinks by at a full
/// collection, and (`periodic`, JDK 12+) a periodic collection while it idles.
fn g1_next(xms: u64, periodic: &str) -> String {
    format!("-Xms{xms}m -XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30{periodic}")
}

/// Why a Go program's heap was not read, and what would let it be.
pub fn go_unmeasured(why: GoUnmeasured) -> (String, Advice) {
    let (evidence, fix) = match why {
        GoUnmeasured::Stripped => (
            "the Go binary has no symbol table (built with -ldflags=-s), so its runtime's figures cannot be found",
            "where you build it, build without -s (GoReleaser's default ldflags carry it; -w alone keeps the symbols but not the DWARF the fields' places come from); where it is a vendor's build (a container runtime, the kubelet, most packaged Go services), read the figure from what it exposes itself: its Prometheus metrics give go_memstats_heap_idle_bytes - go_memstats_heap_released_bytes, the free heap it keeps, and its pprof endpoint (/debug/pprof/heap?debug=1) the same as HeapIdle - HeapReleased",
        ),
        GoUnmeasured::NoDwarf => (
            "the Go binary has no DWARF (built with -ldflags=-w), so where its runtime keeps its figures is unknown",
            "build without -w (the DWARF adds to the file, not to the memory the program uses)",
        ),
        GoUnmeasured::UnknownLayout => (
            "the Go binary's DWARF lacks a field this exporter reads: a Go version it does not know",
            "tell the exporter's maintainers the Go version (`go version -m BINARY`)",
        ),
        GoUnmeasured::Unreadable => (
            "the Go program's memory could not be read, so its heap was not measured",
            "grant the exporter CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH (see the README's Privileges)",
        ),
        GoUnmeasured::Moving => (
            "the Go program's heap changed under two reads",
            "wait for the next deep read",
        ),
        GoUnmeasured::Budget => (
            "reading the Go program's heap (or its binary's symbols and DWARF) took more than a reader may spend on one process",
            "nothing to do on the program; the exporter tries again after a back-off (membloat_go_reads_total{outcome=\"budget\"} counts these)",
        ),
        GoUnmeasured::Implausible => (
            "the Go program's runtime said it keeps more free heap in RAM than the process has resident, so the figure was not believed",
            "look at the process: its memory does not hold a Go runtime's heap as the binary describes it",
        ),
    };
    (evidence.into(), (fix.into(), None))
}

/// Why a JVM's Java heap was not measured (`None`: its figures were read without its
/// resident heap), and what would let it be.
pub fn java_unmeasured(why: Option<Unmeasured>) -> (String, Advice) {
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
    (evidence.into(), (fix.into(), None))
}

/// glibc's arena cap: two arenas, whatever the CPUs. Started with it, the program's
/// threads share the main arena and one other, so the arena heaps reserve one 64 MiB heap
/// (or a few, where one arena outgrows its heap) instead of up to 8 per CPU.
pub const ARENA_MAX: &str = "MALLOC_ARENA_MAX=2";

pub fn arenas(runtime: Runtime) -> Remedy {
    let what = if runtime == Runtime::Jvm {
        format!("{ARENA_MAX} in the JVM's environment at the next start (native allocations: JNI, NIO, compilers)")
    } else {
        format!("{ARENA_MAX} in the environment at the next start (or GLIBC_TUNABLES=glibc.malloc.arena_max=2)")
    };
    Remedy {
        what,
        cost: Some(Cow::Borrowed(
            "threads share arenas: more lock contention where many threads allocate at once",
        )),
        next_start: Some(ARENA_MAX.into()),
        ..Remedy::default()
    }
}

/// A launcher that starts the program with `PR_SET_THP_DISABLE` set (prctl option 41;
/// inherited across fork and exec): khugepaged leaves its memory alone, even ranges it
/// advised with `MADV_HUGEPAGE`. Put before the program's command, it runs as printed
/// wherever `python3` is.
pub const THP_DISABLED_LAUNCHER: &str = "python3 -c 'import ctypes,os,sys; ctypes.CDLL(None).prctl(41, 1, 0, 0, 0) == 0 or sys.exit(\"PR_SET_THP_DISABLE failed\"); os.execvp(sys.argv[1], sys.argv[1:])'";

/// khugepaged's regrowth: the program started with THP off for it (the launcher, or in
/// its own launcher `prctl(PR_SET_THP_DISABLE, 1)`), or the host's `max_ptes_none` at 0.
/// Neither gives back what has regrown: that takes a restart.
pub fn regrowth(runtime: Runtime) -> Remedy {
    const HOST: &str =
        "the host fix, for every process: echo 0 > /sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none";
    let go = if runtime == Runtime::Go {
        " (Go 1.21.6+: GODEBUG=disablethp=1)"
    } else {
        ""
    };
    Remedy {
        what: format!("restart it with THP off for it: the launcher (next start) sets prctl(PR_SET_THP_DISABLE, 1), which its children inherit{go}; or {HOST}; what has regrown stays until the restart"),
        cost: Some(Cow::Borrowed("fewer huge pages: more TLB misses for memory that is really in use")),
        next_start: Some(THP_DISABLED_LAUNCHER.into()),
        ..Remedy::default()
    }
}

pub fn untouched_commit(runtime: Runtime) -> Advice {
    let what = if runtime == Runtime::Jvm {
        "size -Xmx (and -XX:MaxDirectMemorySize) to what the host can back"
    } else {
        "reserve less up front (pools, arenas, mmap sizes), or count it when sizing the host; under vm.overcommit_memory=2 it counts against CommitLimit now"
    };
    (what.into(), None)
}
