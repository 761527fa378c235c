//! What the reader of mimalloc's segments gives: its figure (`MimallocHeap`), or why it has
//! none (`Unmeasured`).

/// Why a mimalloc process's heap has no figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmeasured {
    /// No symbol table: the arenas cannot be found (Debian's `libmimalloc2.0`, a binary
    /// built with `strip`).
    Stripped,
    /// A mimalloc whose version has no layout here (2.1.7, 2.2.5, 2.3.2 and 3.3.2 have).
    UnknownVersion,
    /// The structures read do not fit the version's layout (another build configuration,
    /// or a crafted heap).
    UnknownLayout,
    /// Its memory or the binary could not be read (no ptrace access, process gone).
    Unreadable,
    /// The segments moved under two reads.
    Moving,
    /// The read ran out of its budget of time or pages
    /// ([`READER_BUDGET`](crate::heap::READER_BUDGET)), or there are more segments than a
    /// read follows.
    Budget,
    /// It found more resident free memory than the process has resident, or a segment
    /// outside its private anonymous memory: not believed.
    Implausible,
    /// mimalloc is a library on a FUSE or network mount, which no reader opens.
    RemoteFile,
}

super::super::shape::reasons! {
    Unmeasured {
        Stripped => "stripped",
        UnknownVersion => "unknown_version",
        UnknownLayout => "unknown_layout",
        Unreadable => "unreadable",
        Moving => "moving",
        Budget => "budget",
        Implausible => "implausible",
        RemoteFile => "remote_file",
    }
    // Its segments moved under the read: a later one can succeed.
    transient: Moving,
    remote: RemoteFile,
    faults: (Moving, UnknownLayout, RemoteFile),
}

/// What mimalloc holds, every thread's heap, abandoned segment and arena together, in
/// bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MimallocHeap {
    /// The version whose layout read it (`2.1.7`).
    pub version: &'static str,
    /// Arenas and segments read.
    pub arenas: u64,
    pub segments: u64,
    /// Address space of its arenas and of the segments outside them.
    pub reserved_bytes: u64,
    /// Of it, the bytes resident.
    pub resident_bytes: u64,
    /// Of those, the bytes of the pages that hold a live block, and of the segments'
    /// own headers: what `mi_collect(true)` keeps.
    pub in_use_bytes: u64,
    /// Resident memory mimalloc keeps free that `mi_collect(true)` in every thread gives
    /// back: pages with no live block and the free spans they join, free spans scheduled
    /// for purging, segments with no page in use, and arena blocks scheduled for purging.
    /// The process's measured hoarding.
    pub held_bytes: u64,
    /// Of the held bytes, those mimalloc has already scheduled for purging (free arena
    /// blocks and slices in its purge bitmaps and masks): it purges them once
    /// `purge_delay` has passed, at the owning thread's next allocation. The rest (pages
    /// with no live block, free spans they join) waits for `mi_collect(true)`, a retired
    /// page's turn, or the thread's exit.
    pub pending_purge_bytes: u64,
    /// What mimalloc counts committed (its statistics' `committed.current`, which
    /// `mi_process_info` reports): on Linux mimalloc 2 commits a whole arena as it reserves
    /// it. `None` where the binary has no statistics symbol.
    pub committed_bytes: Option<u64>,
}

impl MimallocHeap {
    /// The held bytes.
    pub fn held(&self) -> u64 {
        self.held_bytes
    }

    /// Resident free memory no purge gives back: free pages faulted in with a transparent
    /// huge page a live page beside them touched, never used, so never scheduled for
    /// purging; in mimalloc 3 also the arena slices its own metadata takes.
    pub fn stranded_bytes(&self) -> u64 {
        self.resident_bytes
            .saturating_sub(self.in_use_bytes)
            .saturating_sub(self.held_bytes)
    }
}

impl super::super::shape::Figure for MimallocHeap {
    fn held_bytes(&self) -> Option<u64> {
        Some(self.held())
    }
}
