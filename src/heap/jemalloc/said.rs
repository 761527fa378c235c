//! What the jemalloc reader says (`shape::Says`): its families, and the evidence its
//! kept pages give the process's hoarding finding (whose remedy is the allocator's).

use super::{Jemalloc, JemallocHeap, Unmeasured};
use crate::family::{metric, Metric};
use crate::heap::shape::{Figure, NoFigure, Says};
use crate::heap::words::{Gap, Said, Samples, Size, Subject, EXPORTER, PROCESSES};

pub(crate) const JEMALLOC_READS_TOTAL: Metric = metric!(membloat "jemalloc_reads", Counter, None, ["outcome"], EXPORTER, "the exporter",
        "Reads of deep-read jemalloc processes' kept pages (its arenas, found through the binary's symbols, and each kept extent) by outcome: measured; stripped (no symbol table: Debian's libjemalloc2, a stripped binary); unknown_version (a jemalloc other than 5.2.1, 5.3.0 or 5.3.1); unknown_layout (its structures do not fit the version's layout: another build configuration); unreadable (no ptrace access, or its library could not be opened); moving (the lists changed under two reads, tried again at the next scans); budget (the read ran out of its time or pages, or more than 256 Ki extents: backed off); implausible (more resident kept pages than the process has resident, or a kept extent outside its private anonymous memory: not believed); remote_file (its library lies on a FUSE or network mount or on one no mountinfo lists: never read).");
pub(crate) const PROCESS_JEMALLOC_ACTIVE_BYTES: Metric = metric!(membloat "process_jemalloc_active", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/mem (je_arenas and each kept extent), pagemap, the binary's symbols",
        "jemalloc's active pages, every arena together (mallctl's stats.arenas.<all>.pactive): allocated, or in its thread caches and slabs.");
pub(crate) const PROCESS_JEMALLOC_DIRTY_BYTES: Metric = metric!(membloat "process_jemalloc_dirty", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/mem (je_arenas and each kept extent), pagemap, the binary's symbols",
        "Pages jemalloc keeps dirty after the program freed them (stats.arenas.<all>.pdirty): reused, or given back as they decay (dirty_decay_ms, only while the process allocates unless background_thread is on) or on a purge.");
pub(crate) const PROCESS_JEMALLOC_MUZZY_BYTES: Metric = metric!(membloat "process_jemalloc_muzzy", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/mem (je_arenas and each kept extent), pagemap, the binary's symbols",
        "Pages jemalloc gave back with MADV_FREE (stats.arenas.<all>.pmuzzy): still resident until the kernel needs them.");
pub(crate) const PROCESS_JEMALLOC_KEPT_RESIDENT_BYTES: Metric = metric!(membloat "process_jemalloc_kept_resident", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/mem (je_arenas and each kept extent), pagemap, the binary's symbols",
        "Of jemalloc's dirty and muzzy pages, those resident (each kept extent's pages, then pagemap): what an arena purge gives back, the process's measured hoarding.");
pub(crate) const PROCESS_JEMALLOC_UNMEASURED: Metric = metric!(membloat "process_jemalloc_unmeasured", Gauge, None, ["pid", "comm", "reason"], PROCESSES, "/proc/PID/exe or its libjemalloc, /proc/PID/mem",
        "1 for a jemalloc process whose kept pages could not be read, by reason (as membloat_jemalloc_reads_total's outcomes): stripped, unknown_version, unknown_layout, unreadable, moving, budget, implausible, remote_file. Its hoarding stays suspected.");

impl Says for Jemalloc {
    const READS: Metric = JEMALLOC_READS_TOTAL;
    const ROWS: &'static [Metric] = &[
        PROCESS_JEMALLOC_ACTIVE_BYTES,
        PROCESS_JEMALLOC_DIRTY_BYTES,
        PROCESS_JEMALLOC_MUZZY_BYTES,
        PROCESS_JEMALLOC_KEPT_RESIDENT_BYTES,
        PROCESS_JEMALLOC_UNMEASURED,
    ];

    fn samples(read: &Result<Box<JemallocHeap>, Unmeasured>, out: &mut Samples) {
        let j = match read {
            Ok(j) => j,
            Err(why) => return out.reason(&PROCESS_JEMALLOC_UNMEASURED, Some(why.as_str())),
        };
        out.put(&PROCESS_JEMALLOC_ACTIVE_BYTES, Some(j.active_bytes));
        out.put(&PROCESS_JEMALLOC_DIRTY_BYTES, Some(j.dirty_bytes));
        out.put(&PROCESS_JEMALLOC_MUZZY_BYTES, Some(j.muzzy_bytes));
        out.put(&PROCESS_JEMALLOC_KEPT_RESIDENT_BYTES, j.held_bytes());
    }

    fn said(j: &Box<JemallocHeap>, _: u64, _: Subject) -> Said {
        Said {
            kind: "hoarding",
            evidence: format!(
                "jemalloc {} keeps {} dirty ({} resident) and {} muzzy ({} resident) in {} arenas, beside {} active",
                j.version,
                Size(j.dirty_bytes),
                Size(j.dirty_resident_bytes),
                Size(j.muzzy_bytes),
                Size(j.muzzy_resident_bytes),
                j.arenas,
                Size(j.active_bytes)
            ),
            remedy: None,
        }
    }

    /// An unread jemalloc leaves the process's hoarding suspected, which says so.
    fn gap(_: Option<Unmeasured>) -> Option<Gap> {
        None
    }
}
