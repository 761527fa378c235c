//! What the mimalloc reader says (`shape::Says`): its families, and the evidence its
//! held memory gives the process's hoarding finding (whose remedy is the allocator's).

use super::{Mimalloc, MimallocHeap, Unmeasured};
use crate::family::{metric, Metric};
use crate::heap::shape::{NoFigure, Says};
use crate::heap::words::{Gap, Said, Samples, Size, Subject, EXPORTER, PROCESSES};

pub(crate) const MIMALLOC_READS_TOTAL: Metric = metric!(membloat "mimalloc_reads", Counter, None, ["outcome"], EXPORTER, "the exporter",
        "Reads of deep-read mimalloc processes' segments (its arenas and segment map, found through the binary's symbols, and each segment's spans) by outcome: measured; stripped (no symbol table: Debian's libmimalloc2.0, a stripped binary); unknown_version (a mimalloc other than 2.1.7, 2.2.5, 2.3.2 or 3.3.2); unknown_layout (its structures do not fit the version's layout: another build configuration); unreadable (no ptrace access, or its library could not be opened); moving (the segments changed under two reads, tried again at the next scans); budget (the read ran out of its time or pages, or more than 16 Ki segments: backed off); implausible (more resident free memory than the process has resident, or an arena or segment outside its private anonymous memory: not believed); remote_file (its library lies on a FUSE or network mount: never read).");
pub(crate) const PROCESS_MIMALLOC_RESERVED_BYTES: Metric = metric!(membloat "process_mimalloc_reserved", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/mem (mi_arenas, mi_segment_map and each segment), the binary's symbols",
        "Address space of mimalloc's arenas and of its segments outside them (an arena reserves 1 GiB at first; mimalloc 3: its arenas).");
pub(crate) const PROCESS_MIMALLOC_RESIDENT_BYTES: Metric = metric!(membloat "process_mimalloc_resident", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/mem (mi_arenas, mi_segment_map and each segment), pagemap, the binary's symbols",
        "Of mimalloc's arenas and segments, the bytes resident.");
pub(crate) const PROCESS_MIMALLOC_IN_USE_BYTES: Metric = metric!(membloat "process_mimalloc_in_use", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/mem (each segment's pages), pagemap, the binary's symbols",
        "Of those, the resident bytes of pages that hold a live block, and of the segments' headers: what mi_collect(true) keeps.");
pub(crate) const PROCESS_MIMALLOC_HELD_BYTES: Metric = metric!(membloat "process_mimalloc_held", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/mem (each segment's pages, purge masks and the arenas' bitmaps), pagemap, the binary's symbols",
        "Resident bytes mimalloc keeps free and would purge: pages with no live block (mimalloc 2: with the free spans they join), free spans, slices and arena blocks scheduled for purging, segments with no page in use. What mi_collect(true) in every thread gives back, the process's measured hoarding; mimalloc purges them after purge_delay (10 ms) only when the owning thread next allocates.");
pub(crate) const PROCESS_MIMALLOC_PENDING_PURGE_BYTES: Metric = metric!(membloat "process_mimalloc_pending_purge", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/mem (the segments' purge masks and the arenas' purge bitmaps), pagemap, the binary's symbols",
        "Of the held bytes, those mimalloc has already scheduled for purging (free arena blocks, slices and spans in its purge bitmaps and masks): purged once purge_delay has passed, at the owning thread's next allocation, so never while it is idle. The rest of the held bytes (pages with no live block and the free spans they join) wait for mi_collect(true), a retired page's turn or the thread's exit.");
pub(crate) const PROCESS_MIMALLOC_COMMITTED_BYTES: Metric = metric!(membloat "process_mimalloc_committed", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/mem (_mi_stats_main, mimalloc 3: subproc_main's statistics), the binary's symbols",
        "What mimalloc counts committed, as its own statistics keep it (committed.current, what mi_process_info and mi_stats_print report): address space, not residence; on Linux mimalloc 2 commits a whole arena (1 GiB at first) as it reserves it. Absent where the binary has no statistics symbol.");
pub(crate) const PROCESS_MIMALLOC_STRANDED_BYTES: Metric = metric!(membloat "process_mimalloc_stranded", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/mem (each segment's pages and purge mask), pagemap, the binary's symbols",
        "Resident free bytes of mimalloc's arenas and segments that no purge gives back: free pages never used, faulted in with a transparent huge page a live page beside them touched (mimalloc 2.2 and later ask for huge pages; MIMALLOC_ALLOW_THP=0 avoids it), or (mimalloc 3) slices its own metadata takes from an arena. Not counted as hoarding.");
pub(crate) const PROCESS_MIMALLOC_UNMEASURED: Metric = metric!(membloat "process_mimalloc_unmeasured", Gauge, None, ["pid", "comm", "reason"], PROCESSES, "/proc/PID/exe or its libmimalloc, /proc/PID/mem",
        "1 for a mimalloc process whose segments could not be read, by reason (as membloat_mimalloc_reads_total's outcomes): stripped, unknown_version, unknown_layout, unreadable, moving, budget, implausible, remote_file. Its hoarding stays suspected.");

impl Says for Mimalloc {
    const READS: Metric = MIMALLOC_READS_TOTAL;
    const ROWS: &'static [Metric] = &[
        PROCESS_MIMALLOC_RESERVED_BYTES,
        PROCESS_MIMALLOC_RESIDENT_BYTES,
        PROCESS_MIMALLOC_IN_USE_BYTES,
        PROCESS_MIMALLOC_HELD_BYTES,
        PROCESS_MIMALLOC_PENDING_PURGE_BYTES,
        PROCESS_MIMALLOC_COMMITTED_BYTES,
        PROCESS_MIMALLOC_STRANDED_BYTES,
        PROCESS_MIMALLOC_UNMEASURED,
    ];

    fn samples(read: &Result<MimallocHeap, Unmeasured>, out: &mut Samples) {
        let m = match read {
            Ok(m) => m,
            Err(why) => return out.reason(&PROCESS_MIMALLOC_UNMEASURED, Some(why.as_str())),
        };
        out.put(&PROCESS_MIMALLOC_RESERVED_BYTES, Some(m.reserved_bytes));
        out.put(&PROCESS_MIMALLOC_RESIDENT_BYTES, Some(m.resident_bytes));
        out.put(&PROCESS_MIMALLOC_IN_USE_BYTES, Some(m.in_use_bytes));
        out.put(&PROCESS_MIMALLOC_HELD_BYTES, Some(m.held()));
        out.put(&PROCESS_MIMALLOC_PENDING_PURGE_BYTES, Some(m.pending_purge_bytes));
        out.put(&PROCESS_MIMALLOC_COMMITTED_BYTES, m.committed_bytes);
        out.put(&PROCESS_MIMALLOC_STRANDED_BYTES, Some(m.stranded_bytes()));
    }

    fn said(m: &MimallocHeap, _: u64, _: Subject) -> Said {
        Said {
            kind: "hoarding",
            evidence: format!(
                "mimalloc {} keeps {} resident and free to purge ({} already scheduled) in {} segments of {} arenas, beside {} in use and {} stranded in huge pages",
                m.version,
                Size(m.held()),
                Size(m.pending_purge_bytes),
                m.segments,
                m.arenas,
                Size(m.in_use_bytes),
                Size(m.stranded_bytes())
            ),
            remedy: None,
        }
    }

    /// An unread mimalloc leaves the process's hoarding suspected, which says so.
    fn gap(_: Option<Unmeasured>) -> Option<Gap> {
        None
    }
}
