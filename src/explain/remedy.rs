//! The exact remedy for each finding, by the process's allocator and runtime, with its cost
//! where it has one.

use crate::heap::runtime::{Allocator, Runtime};
use std::borrow::Cow;

use crate::attach::Live;
use crate::heap::HeapMeasure;

mod advice;
mod glibc;
pub use advice::{Advice, Remedy, GLIBC_TUNABLES};
use glibc::glibc_hoarding;

/// jemalloc's settings that give its dirty pages back within a second, idle or not.
pub(crate) const JEMALLOC_CONF: &str =
    "MALLOC_CONF=background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0";

/// mimalloc's setting that purges what it frees at once, idle or not.
pub(crate) const MIMALLOC_CONF: &str = "MIMALLOC_PURGE_DELAY=0";

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
    if allocator == Some(Allocator::Mimalloc) {
        return Remedy {
            next_start: Some(MIMALLOC_CONF.into()),
            ..Remedy::from((format!("{MIMALLOC_CONF} (mimalloc purges a freed span or segment at once, instead of after its delay and only when the owning thread next allocates, which an idle thread never does; the last empty page a thread keeps of a size goes back when it next allocates); at once, from inside: mi_collect(true) in each thread"), Some(COST)))
        };
    }
    let advice: Advice = match allocator {
        Some(Allocator::Jemalloc) => ("MALLOC_CONF=background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0 (a background thread gives dirty pages back within a second, idle or not: without one they decay only while the program allocates; tikv-jemallocator reads _RJEM_MALLOC_CONF); at once, from inside: mallctl(\"arena.4096.purge\", NULL, NULL, NULL, 0)".into(), Some(COST)),
        Some(Allocator::Tcmalloc) => ("TCMALLOC_RELEASE_RATE=10, or MallocExtension::ReleaseFreeMemory() after bursts".into(), Some(COST)),
        Some(Allocator::Glibc) | None => return glibc_hoarding(runtime, heap, pid, live),
        Some(_) => ("the allocator's own setting for giving freed memory back".into(), None),
    };
    advice.into()
}

/// What keeps hoarding from building up again in a program that was killed: nothing can
/// be given back now.
pub(crate) fn hoarding_after_kill(allocator: Option<Allocator>, runtime: Runtime) -> String {
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

/// glibc's arena cap: two arenas, whatever the CPUs. Started with it, the program's
/// threads share the main arena and one other, so the arena heaps reserve one 64 MiB heap
/// (or a few, where one arena outgrows its heap) instead of up to 8 per CPU.
pub(crate) const ARENA_MAX: &str = "MALLOC_ARENA_MAX=2";

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
pub(crate) const THP_DISABLED_LAUNCHER: &str = "python3 -c 'import ctypes,os,sys; ctypes.CDLL(None).prctl(41, 1, 0, 0, 0) == 0 or sys.exit(\"PR_SET_THP_DISABLE failed\"); os.execvp(sys.argv[1], sys.argv[1:])'";

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

/// Memory freed with `MADV_FREE`: the kernel's already; only the counts show it.
pub fn lazy_free() -> Advice {
    (
        "nothing, for the host's sake: no OOM kill and no swap for these pages; where alerts or limits read RSS or usage, have the allocator free with MADV_DONTNEED instead (jemalloc: MALLOC_CONF=muzzy_decay_ms:0; Go: GODEBUG=madvdontneed=1)".into(),
        Some("a page freed at once costs a page fault and a zeroed page when it is used again"),
    )
}

pub fn untouched_commit(runtime: Runtime) -> Advice {
    let what = if runtime == Runtime::Jvm {
        "size -Xmx (and -XX:MaxDirectMemorySize) to what the host can back"
    } else {
        "reserve less up front (pools, arenas, mmap sizes), or count it when sizing the host; under vm.overcommit_memory=2 it counts against CommitLimit now"
    };
    (what.into(), None)
}
