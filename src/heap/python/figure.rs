//! What the reader of CPython's arenas gives: its figure (`PythonHeap`), or why it has none
//! (`Unmeasured`).

/// Why a CPython process's arenas have no figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmeasured {
    /// The state is in static variables a stripped build lost (3.11 and older: Debian's
    /// `python3.11`).
    Stripped,
    /// A CPython whose version has no layout here (3.8 to 3.13 have).
    UnknownVersion,
    /// A free-threaded build (`python3.13t`): objects are mimalloc's, not read.
    FreeThreaded,
    /// What was read does not fit the version's layout (another build configuration, or
    /// a crafted table).
    UnknownLayout,
    /// Its memory or the binary could not be read (no ptrace access, process gone).
    Unreadable,
    /// The arenas moved under two reads.
    Moving,
    /// The read ran out of its budget of time or pages ([`READER_BUDGET`](crate::heap::READER_BUDGET)).
    Budget,
    /// It found more resident unused memory than the process has resident: not believed.
    Implausible,
    /// The interpreter is a file on a FUSE or network mount, which no reader opens.
    RemoteFile,
}

super::super::shape::reasons! {
    Unmeasured {
        Stripped => "stripped",
        UnknownVersion => "unknown_version",
        FreeThreaded => "free_threaded",
        UnknownLayout => "unknown_layout",
        Unreadable => "unreadable",
        Moving => "moving",
        Budget => "budget",
        Implausible => "implausible",
        RemoteFile => "remote_file",
    }
    // Its arenas moved under the read: a later one can succeed.
    transient: Moving,
    faults: (Moving, UnknownLayout, RemoteFile),
}

/// What pymalloc keeps, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PythonHeap {
    /// The layout's version (`3.12`; `3.8-3.9` share one).
    pub version: &'static str,
    /// Arenas allocated ("# arenas allocated current").
    pub arenas: u64,
    /// One arena's size and one pool's.
    pub arena_bytes: u64,
    pub pool_bytes: u64,
    /// Pools with blocks in use, and pools with none ("unused pools": emptied, or never
    /// carved).
    pub used_pools: u64,
    pub unused_pools: u64,
    /// Blocks in use, and blocks free in the pools in use ("bytes in available blocks").
    pub allocated_bytes: u64,
    pub available_bytes: u64,
    /// Of the unused bytes, those in resident pages.
    pub unused_resident_bytes: u64,
}

impl PythonHeap {
    /// What pymalloc holds unused: free blocks in its pools, and pools with no block in
    /// use.
    pub fn unused_bytes(&self) -> u64 {
        self.available_bytes
            .saturating_add(self.unused_pools.saturating_mul(self.pool_bytes))
    }

    /// The arenas' memory.
    pub fn arenas_bytes(&self) -> u64 {
        self.arenas.saturating_mul(self.arena_bytes)
    }
}

impl super::super::shape::Figure for PythonHeap {
    fn held_bytes(&self) -> Option<u64> {
        Some(self.unused_resident_bytes)
    }
}
