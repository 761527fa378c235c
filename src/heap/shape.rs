//! The shape every heap reader has: what it reads a process for ([`HeapReader`]), the
//! figure it gives ([`Figure`]), the reasons it gives none ([`NoFigure`]), its reads
//! counted by how they ended ([`Counts`]), and what it says ([`Says`]). A new reader is a
//! folder beside `glibc/`, `jvm/`, `golang/`, `jemalloc/` and `python/` that implements
//! these, and its line in `readers!` (`heap/mod.rs`).

use std::marker::PhantomData;

use super::binaries::NotOpened;
use super::memory::{self, ProcessMemory};
use super::runtime::Identity;
use super::words::{Gap, Said, Samples, Subject};
use crate::family::Metric;
use crate::parse::mountinfo::Remote;
use crate::parse::smaps::Vma;
use crate::source::{PidFile, Source};

/// What one reader (glibc's heaps, a JVM's, a Go runtime's) may spend on a process: 16 Mi
/// pagemap entries (64 GiB of 4 KiB pages whose presence the mappings' `Rss` cannot tell,
/// ~0.6 s here), however the process shaped its memory, beside the walks' own caps on
/// chunks; and 5 s of wall time (the read timeout's default), for reads that are slow in
/// themselves. The time is generous: a slow machine (QEMU's TCG runs a walk some 50 times
/// slower) must not lose a figure to it. A reader that runs out gives no figure
/// (`budget`), and the process is read again only after a back-off.
pub const READER_BUDGET: memory::Budget = memory::Budget {
    time: std::time::Duration::from_secs(5),
    pages: 1 << 24,
};

/// The most a process's readers together may report as resident and free: its resident
/// anonymous memory plus its resident shared memory, as the mappings say (and, for ZGC,
/// the pages committed to its heap file: see `heap::read`). A figure above it cannot be
/// true and is not served.
pub fn resident_ceiling(vmas: &[Vma]) -> u64 {
    vmas.iter()
        .map(|v| {
            if v.perms[3] == b's' {
                v.rss_bytes
            } else {
                v.anonymous_bytes
            }
        })
        .fold(0u64, u64::saturating_add)
}

/// Why a reader has no figure: its reasons, in the order they are shown.
pub trait NoFigure: Copy + PartialEq + std::fmt::Debug + 'static {
    /// Every reason (at most [`MAX_REASONS`]).
    const ALL: &'static [Self];
    /// Its memory could not be read (no ptrace access, process gone).
    const UNREADABLE: Self;
    /// The read ran out of [`READER_BUDGET`].
    const BUDGET: Self;
    /// It found more free resident memory than the process has resident: not believed.
    const IMPLAUSIBLE: Self;
    /// The `outcome` label of a figure without its held bytes (a JVM whose heap's range
    /// could not be found: `no_resident`), for readers that can give one.
    const PARTIAL: Option<&'static str> = None;
    /// The `outcome` label.
    fn as_str(self) -> &'static str;
    /// Whether a read soon after can succeed where this one did not (what it read moved
    /// under it, or the process is starting): read again on the retry schedule, not a
    /// deep interval later.
    fn is_transient(self) -> bool {
        false
    }
    /// Whether the read stopped at its budget: read again only after a back-off.
    fn is_over_budget(self) -> bool {
        self == Self::BUDGET
    }
}

/// Implements [`NoFigure`] for a reader's enum of reasons from one list of its variants and
/// their `outcome` labels, in the order they are shown. Every reader has `Unreadable`,
/// `Budget` and `Implausible`; `transient:` names the one read again soon, `partial:` the
/// label of a figure without its held bytes, `remote:` the one for a library on a FUSE or
/// network mount (with `Unreadable`, the reasons a library could not be opened), `faults:`
/// the reasons a read's [`Fault`](super::target::Fault) becomes: moved under the read, a
/// layout that does not fit, a remote file.
macro_rules! reasons {
    ($ty:ty { $($variant:ident => $label:literal,)+ }
        $(transient: $transient:ident,)? $(partial: $partial:literal,)?
        $(remote: $remote:ident,)?
        $(faults: ($moving:ident, $layout:ident, $far:ident),)?) => {
        $(impl From<$crate::heap::target::Fault> for $ty {
            fn from(f: $crate::heap::target::Fault) -> Self {
                use $crate::heap::target::Fault;
                match f {
                    Fault::Unreadable => Self::Unreadable,
                    Fault::Budget => Self::Budget,
                    Fault::Inconsistent => Self::$moving,
                    Fault::NotFound => Self::$layout,
                    Fault::Outside => Self::Implausible,
                    Fault::Remote => Self::$far,
                }
            }
        })?
        $(impl From<$crate::heap::binaries::NotOpened> for $ty {
            fn from(e: $crate::heap::binaries::NotOpened) -> Self {
                match e {
                    $crate::heap::binaries::NotOpened::Remote => Self::$remote,
                    $crate::heap::binaries::NotOpened::Unreadable => Self::Unreadable,
                }
            }
        })?

        impl $crate::heap::shape::NoFigure for $ty {
            const ALL: &'static [Self] = &[$(Self::$variant),+];
            const UNREADABLE: Self = Self::Unreadable;
            const BUDGET: Self = Self::Budget;
            const IMPLAUSIBLE: Self = Self::Implausible;
            $(const PARTIAL: Option<&'static str> = Some($partial);)?

            fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $label,)+
                }
            }

            $(fn is_transient(self) -> bool {
                self == Self::$transient
            })?
        }
    };
}
pub(crate) use reasons;

/// A reader's figure for a process.
pub trait Figure {
    /// Resident memory it holds unused, which it could give back: the process's measured
    /// hoarding (`None`: figures without it).
    fn held_bytes(&self) -> Option<u64>;
    /// The free memory in resident pages it claims, which must fit in what the process
    /// has resident beside the other readers' ([`resident_ceiling`]).
    fn free_resident_bytes(&self) -> u64 {
        self.held_bytes().unwrap_or(0)
    }
}

impl<F: Figure> Figure for Box<F> {
    fn held_bytes(&self) -> Option<u64> {
        (**self).held_bytes()
    }
    fn free_resident_bytes(&self) -> u64 {
        (**self).free_resident_bytes()
    }
}

/// What a reader reads a process from: its mappings, executable and what the deep read
/// told of it, with no memory read yet.
pub struct Process<'a> {
    pub source: &'a Source,
    pub pid: u32,
    pub vmas: &'a [Vma],
    pub identity: &'a Identity,
    /// `/proc/PID/exe`, unless it lies on a FUSE or network mount.
    pub exe: Option<&'a PidFile>,
    /// The process's FUSE and network mounts (`None`: unknown, every file taken as one).
    pub remote: Option<&'a Remote>,
}

impl Process<'_> {
    /// Whether a mapping is of a file on a FUSE or network mount, which no reader opens
    /// or faults in: its server (any user's program) could hold the read forever.
    /// A process whose mounts could not be read at all is not said to be on one: its
    /// reads fail as unreadable.
    pub(crate) fn on_remote(&self, v: &Vma) -> bool {
        v.file_id.is_some_and(|(dev, _)| {
            self.remote
                .is_none_or(|r| !r.unreadable && r.has_device(dev))
        })
    }
}

impl<'a> Process<'a> {
    /// Whether the process's allocator is `allocator`, for its reader, which reads the
    /// allocator's `library` where the process maps it: `Ok(false)` another allocator,
    /// [`NotOpened::Remote`] where that library lies on a FUSE or network mount.
    pub(crate) fn allocator_is(
        &self,
        allocator: super::runtime::Allocator,
        library: crate::parse::smaps::Library,
    ) -> Result<bool, NotOpened> {
        if self.identity.allocator != allocator {
            return Ok(false);
        }
        if self
            .vmas
            .iter()
            .any(|v| v.library == Some(library) && self.on_remote(v))
        {
            return Err(NotOpened::Remote);
        }
        Ok(true)
    }

    /// The file an allocator's reader reads: its `library` as the process maps it, or,
    /// where it maps none, the executable that links the allocator in.
    pub(crate) fn library_or_exe(
        &self,
        library: crate::parse::smaps::Library,
    ) -> Result<Opened<'a>, NotOpened> {
        let opened =
            super::binaries::open_library(self.source, self.pid, self.vmas, self.remote, library)?;
        match (opened, self.exe) {
            (Some(lib), _) => Ok(Opened::Library(lib)),
            (None, Some(exe)) => Ok(Opened::Exe(exe)),
            (None, None) => Err(NotOpened::Unreadable),
        }
    }
}

/// A binary a reader opened: a library's file, or the process's executable.
pub(crate) enum Opened<'a> {
    Library(PidFile),
    Exe(&'a PidFile),
}

impl std::ops::Deref for Opened<'_> {
    type Target = PidFile;
    fn deref(&self) -> &PidFile {
        match self {
            Opened::Library(f) => f,
            Opened::Exe(f) => f,
        }
    }
}

/// What a reader's figure is to the process's measured hoarding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share {
    /// The process's allocator (glibc's heaps, jemalloc's arenas): its held bytes are the
    /// process's measured hoarding; without a figure, the suspicion the mappings give
    /// stands.
    Allocator,
    /// A managed runtime's heap beside the allocator's: its held bytes join the
    /// allocator's measured figure; without them the process has no measured figure
    /// (the allocator's alone would leave out the largest holder). `alone`: the mappings
    /// say nothing of its heap (Go's), so without a figure there is no suspected one
    /// either.
    Runtime { alone: bool },
}

/// One heap reader.
pub trait HeapReader {
    type Figure: Figure + Clone + std::fmt::Debug + PartialEq;
    type Reason: NoFigure;
    /// What it learns once per binary, kept by the scanner (bounded).
    type Cache: Default;
    /// Its name: the `runtime` label of the held series.
    const NAME: &'static str;
    /// What its figure is to the process's hoarding.
    const SHARE: Share;
    /// Whether what it counts as held may be pages given back with `MADV_FREE`, which the
    /// kernel also counts as the process's `LazyFree` (jemalloc's muzzy pages): the sheet
    /// then takes a process's LazyFree as inside its held bytes as far as they go, never
    /// both.
    const HOLDS_LAZY_FREE: bool;
    /// Whether it reads this process: `Ok(true)` read, `Ok(false)` not its (no outcome),
    /// or the reason it gives without reading; `cache` is what it learnt of binaries
    /// (a reader that knows its process by a symbol of the executable looks it up once).
    fn applies(process: &Process, cache: &Self::Cache) -> Result<bool, Self::Reason>;
    /// Reads the process's memory, within the budget `memory` carries. `ceiling` is what
    /// is left of its resident memory for the readers' figures: one that shows resident
    /// memory the mappings do not (ZGC's heap file) raises it.
    fn read(
        process: &Process,
        memory: &mut ProcessMemory,
        cache: &Self::Cache,
        ceiling: &mut Ceiling,
    ) -> Result<Self::Figure, Self::Reason>;
}

/// What a reader says of itself and of a process beyond its figure (`words.rs`): its
/// families and the words `explain` renders. No item has a default, so a new reader is
/// told by the compiler what it must say.
pub trait Says: HeapReader {
    /// Its counter of reads by outcome (labelled `outcome`), in the exporter's section.
    const READS: Metric;
    /// Its families of the top processes (labelled `pid` and `comm`, then any of their
    /// own), in the order served.
    const ROWS: &'static [Metric];
    /// The samples its rows take from its read of one process: its figures, or 1 with
    /// why it has none.
    fn samples(read: &Result<Self::Figure, Self::Reason>, out: &mut Samples);
    /// What its figure says of the process, which holds `held` bytes it could have back.
    fn said(figure: &Self::Figure, held: u64, process: Subject) -> Said;
    /// Why it has no figure (`None`: its figure lacks the held bytes, the `PARTIAL`
    /// label), as a finding; `None` where that is no finding of its own (an allocator's:
    /// the process's hoarding stays suspected, and says so).
    fn gap(why: Option<Self::Reason>) -> Option<Gap>;
}

/// Runs a reader that applies: its memory opened (`None`: it could not be), its budget
/// set and checked, its figure within the ceiling.
pub fn run<R: HeapReader>(
    process: &Process,
    memory: Option<&mut ProcessMemory>,
    cache: &R::Cache,
    ceiling: &mut Ceiling,
) -> Result<R::Figure, R::Reason> {
    let Some(memory) = memory else {
        return Err(R::Reason::UNREADABLE);
    };
    memory.budget(READER_BUDGET);
    match R::read(process, memory, cache, ceiling) {
        // A read that failed for the budget may have been taken for another fault.
        _ if memory.exhausted() => Err(R::Reason::BUDGET),
        Ok(f) if !ceiling.take(f.free_resident_bytes()) => Err(R::Reason::IMPLAUSIBLE),
        other => other,
    }
}

/// What is left of a process's resident memory for its readers' figures.
#[derive(Debug, Clone, Copy)]
pub struct Ceiling(pub u64);

impl Ceiling {
    /// Takes `bytes` from what is left: `false` (and nothing taken) when they do not fit.
    pub fn take(&mut self, bytes: u64) -> bool {
        match self.0.checked_sub(bytes) {
            Some(left) => {
                self.0 = left;
                true
            }
            None => false,
        }
    }

    /// Adds resident memory the mappings do not show.
    pub fn raise(&mut self, bytes: u64) {
        self.0 = self.0.saturating_add(bytes);
    }
}

/// The most reasons a reader may have.
pub(crate) const MAX_REASONS: usize = 14;

/// Reads counted by outcome: `measured`, the partial figure (if the reader has one), and
/// each reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts<R: NoFigure>([u64; 2 + MAX_REASONS], PhantomData<R>);

impl<R: NoFigure> Default for Counts<R> {
    fn default() -> Self {
        Counts([0; 2 + MAX_REASONS], PhantomData)
    }
}

impl<R: NoFigure> Counts<R> {
    pub fn count<F: Figure>(&mut self, read: &Result<F, R>) {
        let i = match read {
            Ok(f) if f.held_bytes().is_some() || R::PARTIAL.is_none() => 0,
            Ok(_) => 1,
            Err(e) => 2 + R::ALL.iter().position(|u| u == e).unwrap_or(0),
        };
        if let Some(n) = self.0.get_mut(i) {
            *n += 1;
        }
    }

    /// Each outcome's label (`measured` first) and count.
    pub(crate) fn outcomes(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        let labels = std::iter::once(Some("measured"))
            .chain(std::iter::once(R::PARTIAL))
            .chain(R::ALL.iter().map(|r| Some(r.as_str())));
        labels
            .zip(self.0)
            .filter_map(|(label, n)| Some((label?, n)))
    }

    /// The count of one outcome, by its label (0 for one the reader does not have).
    pub fn get(&self, outcome: &str) -> u64 {
        self.outcomes()
            .find(|&(o, _)| o == outcome)
            .map_or(0, |(_, n)| n)
    }

    /// These counts plus `other`'s (running totals across scans).
    #[must_use]
    pub fn plus(mut self, other: &Self) -> Self {
        for (sum, n) in self.0.iter_mut().zip(other.0) {
            *sum = sum.saturating_add(n);
        }
        self
    }
}
