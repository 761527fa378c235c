//! What the reader of jemalloc's kept pages gives: its figure (`JemallocHeap`), or why it has none
//! (`Unmeasured`).

/// Why a jemalloc process's kept pages have no figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmeasured {
    /// No symbol table: the arenas cannot be found (Debian's `libjemalloc2`, a binary
    /// built with `strip`).
    Stripped,
    /// A jemalloc whose version has no layout here (5.2.1, 5.3.0 and 5.3.1 have).
    UnknownVersion,
    /// The structures read do not fit the version's layout (another build configuration,
    /// or a crafted heap).
    UnknownLayout,
    /// Its memory or the binary could not be read (no ptrace access, process gone).
    Unreadable,
    /// The lists moved under two reads.
    Moving,
    /// The read ran out of its budget of time or pages ([`READER_BUDGET`](crate::heap::READER_BUDGET)), or the
    /// lists are longer than a read follows.
    Budget,
    /// It found more resident kept pages than the process has resident: not believed.
    Implausible,
    /// jemalloc is a library on a FUSE or network mount, which no reader opens.
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
    // Its lists moved under the read: a later one can succeed.
    transient: Moving,
    remote: RemoteFile,
    faults: (Moving, UnknownLayout, RemoteFile),
}

/// What jemalloc keeps, every arena together (`stats.arenas.<all>.*`), in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JemallocHeap {
    /// The version whose layout read it (`5.3.0`).
    pub version: &'static str,
    /// Arenas read (the automatic ones, any the program made, the huge arena).
    pub arenas: u64,
    /// Pages in active extents (`pactive`): allocated, or in thread caches and slabs.
    pub active_bytes: u64,
    /// Dirty pages (`pdirty`): freed, kept for reuse until they decay or are purged.
    pub dirty_bytes: u64,
    /// Muzzy pages (`pmuzzy`): given back with `MADV_FREE`, the kernel takes them only
    /// under pressure.
    pub muzzy_bytes: u64,
    /// Of the dirty pages, those resident.
    pub dirty_resident_bytes: u64,
    /// Of the muzzy pages, those resident (until the kernel takes them).
    pub muzzy_resident_bytes: u64,
}

impl JemallocHeap {
    /// Resident memory jemalloc keeps that an arena purge gives back: the process's
    /// measured hoarding.
    pub fn held_bytes(&self) -> u64 {
        self.dirty_resident_bytes
            .saturating_add(self.muzzy_resident_bytes)
    }
}

impl super::super::shape::Figure for JemallocHeap {
    fn held_bytes(&self) -> Option<u64> {
        Some(JemallocHeap::held_bytes(self))
    }
}
