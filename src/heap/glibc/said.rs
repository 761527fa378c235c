//! What the glibc reader says (`shape::Says`): its counter of walks, and the evidence its
//! free chunks give the process's hoarding finding (whose remedy `explain` gives from the
//! walk, the runtime and what a live command proved). Its families of the top processes
//! are the model's (`membloat_process_heap_*`): every hoarding figure starts from them.

use super::measure::{HeapMeasure, Unmeasured};
use super::Glibc;
use crate::family::{metric, Metric};
use crate::heap::shape::Says;
use crate::heap::words::{Gap, Said, Samples, Size, Subject, EXPORTER};

pub(crate) const HEAP_WALKS_TOTAL: Metric = metric!(membloat "heap_walks", Counter, None, ["outcome"], EXPORTER, "the exporter",
        "Heap walks of deep-read processes by outcome: measured; not_glibc (another allocator: hoarding stays suspected); inconsistent (the heap changed under two tries: tried again at the next scans, no hoarding figure meanwhile); budget (more free chunks than a walk may follow, or the walk ran out of its time or pages: backed off); unreadable (/proc/PID/mem or pagemap denied or gone); unsupported (glibc outside 2.27-2.42, a 32-bit process, or no arena that fits glibc's layout); implausible (more free memory in resident pages than the process has resident: not believed); remote_file (its libc, or memory a pointer of its heap leads to, lies on a FUSE or network mount or on one no mountinfo lists: never read).");

impl Says for Glibc {
    const READS: Metric = HEAP_WALKS_TOTAL;
    const ROWS: &'static [Metric] = &[];

    fn samples(_: &Result<HeapMeasure, Unmeasured>, _: &mut Samples) {}

    fn said(h: &HeapMeasure, _: u64, _: Subject) -> Said {
        Said {
            kind: "hoarding",
            evidence: format!(
                "glibc heaps hold {} free ({} resident, {} malloc_trim could return) in {} free chunks",
                Size(h.free_bytes()),
                Size(h.free_resident_bytes()),
                Size(h.reclaimable_bytes()),
                h.main.free_chunks + h.arenas.free_chunks
            ),
            remedy: None,
        }
    }

    /// A heap not walked leaves the process's hoarding suspected, which says so.
    fn gap(_: Option<Unmeasured>) -> Option<Gap> {
        None
    }
}
