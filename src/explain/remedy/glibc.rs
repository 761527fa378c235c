//! glibc's hoarding: where the freed memory lies decides the remedy.

use std::borrow::Cow;

use super::advice::{Remedy, GLIBC_TUNABLES};
use crate::attach::Live;
use crate::heap::runtime::Runtime;
use crate::heap::HeapMeasure;

/// glibc's hoarding: `malloc_trim(0)` now wherever it lies (where a live command was
/// proven harmless on this host; else why none is printed); the thresholds at the next
/// start only where they reach it (the top of a heap); below live blocks nothing but a
/// trim does, so the program's own call after its bursts, or a restart.
pub(super) fn glibc_hoarding(
    runtime: Runtime,
    heap: Option<&HeapMeasure>,
    pid: u32,
    live: &Live,
) -> Remedy {
    let now = live.malloc_trim(pid);
    let (trim_now, live_cost) = match &live.refused {
        None => ("malloc_trim(0) in the process (now)", Some(live.cost())),
        Some(_) => ("malloc_trim(0) in the process", None),
    };
    let cost = |base: &str| -> Option<Cow<'static, str>> {
        match (base, live_cost) {
            ("", None) => None,
            ("", Some(l)) => Some(Cow::Borrowed(l)),
            (b, None) => Some(Cow::Owned(b.to_string())),
            (b, Some(l)) => Some(Cow::Owned(format!("{b}; {l}"))),
        }
    };
    let refused = live
        .refused
        .as_ref()
        .map_or(String::new(), |r| format!(" (no live command: {})", r.why));
    let in_program = match runtime {
        Runtime::Python => "ctypes.CDLL('libc.so.6').malloc_trim(0) after large frees",
        Runtime::Jvm => {
            "MALLOC_ARENA_MAX=2 in the JVM's environment (native memory, not the Java heap)"
        }
        Runtime::Go => {
            "malloc_trim(0) from the C (cgo) side after bursts (the Go heap is not glibc's)"
        }
        _ => "malloc_trim(0) in the program after its bursts",
    };
    let Some(h) = heap else {
        return Remedy {
            what: format!("{trim_now} gives back the free pages glibc holds, wherever they lie{refused}; measured (grant the exporter ptrace access), the walk says whether a threshold at the next start would keep them from building up; or {in_program}"),
            cost: cost(""),
            now,
            now_gives_back_bytes: None,
            next_start: None,
        };
    };
    let top = h.top_reclaimable_bytes();
    let below = h.reclaimable_bytes().saturating_sub(top);
    let given = now.is_some().then(|| h.reclaimable_bytes());
    if top >= below {
        Remedy {
            what: format!("most of it is the top of a heap, kept because a large block freed earlier raised glibc's trim threshold (the dynamic mmap threshold): started with both thresholds fixed (next start), glibc trims the top at each free; {trim_now} gives it back at once{refused}"),
            cost: cost("more mmap/munmap and page faults on allocation-heavy paths"),
            now,
            now_gives_back_bytes: given,
            next_start: Some(GLIBC_TUNABLES.into()),
        }
    } else {
        Remedy {
            what: format!("it lies below blocks still in use, where no threshold reaches (glibc trims only the top of a heap): {trim_now} gives it back{refused}; to keep it from building up, {in_program}, or restart it"),
            cost: cost("a trim in the program costs page faults when the memory is used again"),
            now,
            now_gives_back_bytes: given,
            next_start: None,
        }
    }
}
