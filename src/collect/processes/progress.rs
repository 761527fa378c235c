//! Which file of a process a reader is in (`pool::Progress`), so that a stuck read is never
//! started again on the same file.

/// The file a reader is in; the pool keeps it as a code (`as u8`, never 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum File {
    Stat = 1,
    Statm,
    Status,
    SmapsRollup,
    OomScoreAdj,
    OomScore,
    Cgroup,
    Cmdline,
    /// The deep tier's smaps, mem and pagemap.
    Deep,
}

impl File {
    const ALL: [File; 9] = [
        File::Stat,
        File::Statm,
        File::Status,
        File::SmapsRollup,
        File::OomScoreAdj,
        File::OomScore,
        File::Cgroup,
        File::Cmdline,
        File::Deep,
    ];

    /// The file a pool's code names (`None` for 0, between reads).
    pub(crate) fn of_code(code: u8) -> Option<File> {
        File::ALL.into_iter().find(|f| *f as u8 == code)
    }

    /// Reads that take the process's mmap lock: a process stuck in the kernel holding it
    /// blocks them all, and only them (status, stat and the oom files are read from
    /// counters).
    pub(crate) fn takes_mmap_lock(self) -> bool {
        matches!(self, File::SmapsRollup | File::Cmdline | File::Deep)
    }
}

/// Says which file the reader is in.
pub fn at(progress: &crate::collect::pool::Progress, file: File) {
    progress.at(file as u8);
}
