//! The exact remedy for each finding, by the process's allocator and runtime, with its cost
//! where it has one.

use crate::collect::heap::golang::Unmeasured as GoUnmeasured;
use crate::collect::heap::jvm::{Collector, Unmeasured};
use crate::collect::heap::runtime::{Allocator, Runtime};

/// What to change, and what the change costs where it costs something.
pub type Remedy = (String, Option<&'static str>);

/// The exact remedy for hoarding by allocator and runtime.
pub fn hoarding(allocator: Option<Allocator>, runtime: Runtime) -> Remedy {
    const TUNABLES: &str =
        "GLIBC_TUNABLES=glibc.malloc.trim_threshold=131072:glibc.malloc.mmap_threshold=131072";
    const COST: &str = "freed memory goes back at once: more mmap/munmap and page faults on allocation-heavy paths";
    match (allocator, runtime) {
        (Some(Allocator::Jemalloc), _) => ("MALLOC_CONF=background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0 (a background thread gives dirty pages back within a second, idle or not: without one they decay only while the program allocates; tikv-jemallocator reads _RJEM_MALLOC_CONF); at once, from inside: mallctl(\"arena.4096.purge\", NULL, NULL, NULL, 0)".into(), Some(COST)),
        (Some(Allocator::Tcmalloc), _) => ("TCMALLOC_RELEASE_RATE=10, or MallocExtension::ReleaseFreeMemory() after bursts".into(), Some(COST)),
        (Some(Allocator::Mimalloc), _) => ("MIMALLOC_PURGE_DELAY=0 (mimalloc purges freed pages at once)".into(), Some(COST)),
        (_, Runtime::Python) => (format!("{TUNABLES} in the environment, or ctypes.CDLL('libc.so.6').malloc_trim(0) after large frees"), Some(COST)),
        (_, Runtime::Jvm) => (format!("{TUNABLES} and MALLOC_ARENA_MAX=2 in the JVM's environment (native memory, not the Java heap)"), Some(COST)),
        (_, Runtime::Go) => (format!("{TUNABLES} for the C (cgo) side; the Go heap is not glibc's"), Some(COST)),
        _ => (format!("call malloc_trim(0) after bursts, or start it with {TUNABLES}"), Some(COST)),
    }
}

/// The exact remedy for a Java heap the collector keeps committed and resident.
pub fn java_heap(collector: Collector) -> Remedy {
    const XMS: &str = "and an -Xms below -Xmx where the container's memory matters (no collector gives back below -Xms)";
    let what = match collector {
        Collector::G1 => format!("-XX:G1PeriodicGCInterval=60000 (JDK 12+: G1 gives unused heap back while the program idles), lower -XX:MaxHeapFreeRatio/-XX:MinHeapFreeRatio (at run time too: jcmd PID VM.set_flag MaxHeapFreeRatio 30), {XMS}"),
        Collector::Parallel | Collector::Serial => format!("lower -XX:MaxHeapFreeRatio/-XX:MinHeapFreeRatio (e.g. 30/10; the heap shrinks at a full GC), {XMS}"),
        Collector::Z => format!("-XX:+ZUncommit (the default) with a shorter -XX:ZUncommitDelay (default 300 s), {XMS}"),
        Collector::Shenandoah => format!("a shorter -XX:ShenandoahUncommitDelay (default 5 minutes), {XMS}"),
        Collector::Other => format!("the collector's uncommit settings, {XMS}"),
    };
    (
        what,
        Some("more frequent collections, and the heap regrows (page faults, zeroing) at the next burst"),
    )
}

/// What gives a Go program's free heap back: a soft memory limit the scavenger works to,
/// or a forced return; before Go 1.16 the returned pages stayed in RSS (MADV_FREE) unless
/// `madvdontneed` was set. `version` is the binary's (`go1.15.7`; empty when unknown).
pub fn go_heap(version: &str) -> Remedy {
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

/// Why a Go program's heap was not read, and what would let it be.
pub fn go_unmeasured(why: GoUnmeasured) -> (String, Remedy) {
    let (evidence, fix) = match why {
        GoUnmeasured::Stripped => (
            "the Go binary has no symbol table (built with -ldflags=-s), so its runtime's figures cannot be found",
            "build without -s (GoReleaser's default ldflags carry it); -w alone keeps the symbols but not the DWARF the fields' places come from",
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
pub fn java_unmeasured(why: Option<Unmeasured>) -> (String, Remedy) {
    let (evidence, fix) = match why {
        Some(Unmeasured::NotPublished) => (
            "the JVM publishes no perf data, so its Java heap cannot be measured from outside",
            "drop -XX:-UsePerfData and -XX:+PerfDisableSharedMem, and give JVMs that share a /tmp and a namespace pid a /tmp each (the one that loses the perf-data file publishes nothing)",
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

pub fn arenas(runtime: Runtime) -> Remedy {
    let what = if runtime == Runtime::Jvm {
        "MALLOC_ARENA_MAX=2 in the JVM's environment (native allocations: JNI, NIO, compilers)"
    } else {
        "MALLOC_ARENA_MAX=2 in the environment (or GLIBC_TUNABLES=glibc.malloc.arena_max=2)"
    };
    (
        what.into(),
        Some("threads share arenas: more lock contention where many threads allocate at once"),
    )
}

pub fn regrowth(runtime: Runtime) -> Remedy {
    const HOST: &str =
        "the host fix: echo 0 > /sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none";
    let what = match runtime {
        Runtime::Go => format!("GODEBUG=disablethp=1 (Go 1.21.6+), or {HOST}"),
        _ => format!("prctl(PR_SET_THP_DISABLE, 1) before the program starts (a launcher's; it is inherited), or {HOST}"),
    };
    (
        what,
        Some("fewer huge pages: more TLB misses for memory that is really in use"),
    )
}

pub fn untouched_commit(runtime: Runtime) -> Remedy {
    let what = if runtime == Runtime::Jvm {
        "size -Xmx (and -XX:MaxDirectMemorySize) to what the host can back"
    } else {
        "reserve less up front (pools, arenas, mmap sizes), or count it when sizing the host; under vm.overcommit_memory=2 it counts against CommitLimit now"
    };
    (what.into(), None)
}
