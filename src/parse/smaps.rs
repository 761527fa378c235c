//! `/proc/PID/smaps`: one record per mapping (VMA). Read only for deep-tier candidates.
//!
//! The mapping name is free text a process controls (`/SYSVx`, spaces, `(deleted)`), so it
//! is never parsed beyond "empty", `[heap]` or anything else.

use super::{kib_to_bytes, ParseError};

/// The size glibc reserves for each arena heap on 64-bit (`HEAP_MAX_SIZE`).
pub(crate) const ARENA_HEAP_BYTES: u64 = 64 << 20;

/// One mapping, sizes in bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vma {
    pub start: u64,
    pub end: u64,
    /// `rw-p` and the like.
    pub perms: [u8; 4],
    /// No file behind it (inode 0) and no name.
    pub anonymous: bool,
    /// The `[heap]` mapping: the brk heap of glibc's main arena.
    pub brk_heap: bool,
    pub size_bytes: u64,
    pub rss_bytes: u64,
    pub anonymous_bytes: u64,
    pub anon_huge_bytes: u64,
    /// `Private_Clean` and `Private_Dirty`: resident pages no other process maps (the
    /// zero page, and pages shared copy-on-write after a fork, are not among them).
    pub private_clean_bytes: u64,
    pub private_dirty_bytes: u64,
    /// `ac`: the mapping is charged to the commit limit.
    pub accountable: bool,
    /// `nr`: MAP_NORESERVE, not charged (glibc arena heaps carry it).
    pub noreserve: bool,
    /// A file is mapped (inode not 0).
    pub file_backed: bool,
    /// The mapped file's device (`major << 32 | minor`) and inode: which file it is, across
    /// processes (a replaced file has a new inode).
    pub file_id: Option<(u64, u64)>,
    /// What the mapped file is, when it tells the allocator or runtime.
    pub library: Option<Library>,
}

impl Vma {
    /// Resident pages only this process maps (`Private_Clean` + `Private_Dirty`).
    pub(crate) fn private_bytes(&self) -> u64 {
        self.private_clean_bytes
            .saturating_add(self.private_dirty_bytes)
    }
}

/// Shared objects that tell a process's allocator or runtime, by file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Library {
    /// `libc.so.6`: glibc.
    Glibc,
    Jemalloc,
    Tcmalloc,
    Mimalloc,
    /// `ld-musl-*.so.1`
    Musl,
    /// The `java` executable (a launcher that loads `libjvm.so`).
    Jvm,
    /// `libjvm.so`: HotSpot itself, whose exported symbols lead to the Java heap.
    JvmLibrary,
    /// `/memfd:java_heap`: ZGC's Java heap, one file mapped at several addresses.
    ZgcHeap,
    /// A `python3.*` executable (often the interpreter itself, linked statically).
    Python,
    /// `libpython3.*.so`: the interpreter, loaded by a small executable.
    PythonLibrary,
    /// A free-threaded interpreter (`python3.13t`, `libpython3.13t.so`): mimalloc's
    /// objects, no pymalloc arenas.
    PythonFreeThreaded,
    /// `libnode.so.*` or the `node` executable.
    Node,
    /// `/tmp/hsperfdata_<user>/<pid>`: a HotSpot JVM's perf data, mapped by the JVM
    /// that publishes it.
    JvmPerfData,
}

impl Library {
    /// Classifies a mapping's file name (the last path component; free text a process
    /// controls, so it is only compared, never kept).
    pub fn of(name: &str) -> Option<Library> {
        let base = name.rsplit('/').next().unwrap_or(name);
        let base = base.strip_suffix(" (deleted)").unwrap_or(base);
        if base == "libc.so.6" || (base.starts_with("libc-2.") && base.ends_with(".so")) {
            Some(Library::Glibc)
        } else if base.starts_with("libjemalloc.so") {
            Some(Library::Jemalloc)
        } else if base.starts_with("libtcmalloc") && base.contains(".so") {
            Some(Library::Tcmalloc)
        } else if base.starts_with("libmimalloc") && base.contains(".so") {
            Some(Library::Mimalloc)
        } else if base.starts_with("ld-musl-") || base.starts_with("libc.musl-") {
            Some(Library::Musl)
        } else if base == "libjvm.so" {
            Some(Library::JvmLibrary)
        } else if base == "java" {
            Some(Library::Jvm)
        } else if let Some(version) = base
            .strip_prefix("libpython")
            .and_then(|rest| rest.split_once(".so"))
            .map(|(version, _)| version)
            .filter(|v| v.starts_with('3'))
        {
            Some(if version.ends_with('t') {
                Library::PythonFreeThreaded
            } else {
                Library::PythonLibrary
            })
        } else if let Some(free_threaded) = python_executable(base) {
            Some(if free_threaded {
                Library::PythonFreeThreaded
            } else {
                Library::Python
            })
        } else if base.starts_with("libnode.so") || base == "node" || base == "nodejs" {
            Some(Library::Node)
        } else if base == "memfd:java_heap" {
            Some(Library::ZgcHeap)
        } else if is_perf_data(name) {
            Some(Library::JvmPerfData)
        } else {
            None
        }
    }
}

/// `/tmp/hsperfdata_<user>/<pid>`: a HotSpot JVM's perf-data file, which the JVM maps
/// shared (`rw-s`) for as long as it runs (also when the file was deleted since).
fn is_perf_data(name: &str) -> bool {
    let name = name.strip_suffix(" (deleted)").unwrap_or(name);
    let mut parts = name.rsplit('/');
    let pid = parts.next().unwrap_or("");
    let dir = parts.next().unwrap_or("");
    !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) && dir.starts_with("hsperfdata_")
}

/// `python`, `python3`, `python3.11`: an interpreter executable (`Some(false)`), or a
/// free-threaded one, `python3.13t` (`Some(true)`).
fn python_executable(base: &str) -> Option<bool> {
    let rest = base.strip_prefix("python")?;
    let (version, free_threaded) = match rest.strip_suffix('t') {
        Some(v) if !v.is_empty() => (v, true),
        _ => (rest, false),
    };
    version
        .bytes()
        .all(|b| b.is_ascii_digit() || b == b'.')
        .then_some(free_threaded)
}

/// A set of [`Library`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Libraries(u16);

impl Libraries {
    pub fn insert(&mut self, l: Library) {
        self.0 |= 1 << l as u16;
    }

    pub fn has(self, l: Library) -> bool {
        self.0 & (1 << l as u16) != 0
    }
}

impl Vma {
    fn perms_are(&self, p: &[u8; 4]) -> bool {
        &self.perms == p
    }
}

/// Every mapping of a process, and the lines that fit no known shape (skipped).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Smaps {
    pub vmas: Vec<Vma>,
    pub rejected: u32,
}

/// Parses every mapping. Lines that fit no known shape are skipped and counted; text with
/// no mapping header at all is an error.
pub fn parse(text: &str) -> Result<Smaps, ParseError> {
    let mut p = Parser::default();
    for line in text.lines() {
        p.line(line);
    }
    p.finish()
}

/// The parse of `smaps` a line at a time, for a file read in pieces: what it keeps is the
/// mappings, whatever the file's length.
#[derive(Debug, Default)]
pub(crate) struct Parser {
    smaps: Smaps,
    /// A line that was not blank was given.
    text: bool,
}

impl Parser {
    /// Takes one line (without its newline).
    pub fn line(&mut self, line: &str) {
        self.text |= !line.trim().is_empty();
        let Smaps { vmas, rejected } = &mut self.smaps;
        if let Some(vma) = header(line) {
            vmas.push(vma);
            return;
        }
        let Some(vma) = vmas.last_mut() else {
            *rejected += 1;
            return;
        };
        let Some((key, value)) = line.split_once(':') else {
            *rejected += 1;
            return;
        };
        let value = value.trim();
        let slot = match key {
            "Size" => &mut vma.size_bytes,
            "Rss" => &mut vma.rss_bytes,
            "Anonymous" => &mut vma.anonymous_bytes,
            "AnonHugePages" => &mut vma.anon_huge_bytes,
            "Private_Clean" => &mut vma.private_clean_bytes,
            "Private_Dirty" => &mut vma.private_dirty_bytes,
            "VmFlags" => {
                for flag in value.split_ascii_whitespace() {
                    match flag {
                        "ac" => vma.accountable = true,
                        "nr" => vma.noreserve = true,
                        _ => {}
                    }
                }
                return;
            }
            _ => return,
        };
        // No figure of a mapping can exceed its address range: a larger one is absurd,
        // and summing it could wrap.
        let range = vma.end - vma.start;
        match kib_to_bytes(value) {
            Some(b) if b <= range => *slot = b,
            _ => *rejected += 1,
        }
    }

    /// The mappings; text with no mapping header at all is an error.
    pub fn finish(self) -> Result<Smaps, ParseError> {
        if self.smaps.vmas.is_empty() && self.text {
            return Err(ParseError::Missing("mapping"));
        }
        Ok(self.smaps)
    }
}

/// `start-end perms offset dev inode [name]`, or `None` when the line is not a header.
fn header(line: &str) -> Option<Vma> {
    let mut fields = line.splitn(6, ' ');
    let (start, end) = fields.next()?.split_once('-')?;
    let start = u64::from_str_radix(start, 16).ok()?;
    let end = u64::from_str_radix(end, 16).ok()?;
    let perms: [u8; 4] = fields.next()?.as_bytes().try_into().ok()?;
    let _offset = fields.next()?;
    let dev = fields.next()?;
    let inode: u64 = fields.next()?.parse().ok()?;
    let name = fields.next().unwrap_or("").trim_start();
    if end < start {
        return None;
    }
    let file_backed = inode != 0;
    let file_id = file_backed
        .then(|| device(dev).map(|d| (d, inode)))
        .flatten();
    Some(Vma {
        start,
        end,
        perms,
        anonymous: inode == 0 && name.is_empty(),
        brk_heap: name == "[heap]",
        file_backed,
        file_id,
        library: file_backed.then(|| Library::of(name)).flatten(),
        ..Vma::default()
    })
}

/// `fe:01` (major:minor in hex) as `major << 32 | minor`.
fn device(dev: &str) -> Option<u64> {
    let (major, minor) = dev.split_once(':')?;
    let major = u32::from_str_radix(major, 16).ok()?;
    let minor = u32::from_str_radix(minor, 16).ok()?;
    Some(u64::from(major) << 32 | u64::from(minor))
}

/// What the deep tier learns from one process's mappings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SmapsSummary {
    /// `[heap]` Size and Rss.
    pub brk_heap_size_bytes: u64,
    pub brk_heap_rss_bytes: u64,
    /// glibc arena heaps the mappings look like (see [`arena_heaps_in`]).
    pub arena_heaps: u64,
    /// Address space the arena heaps reserve (64 MiB each).
    pub arena_reserved_bytes: u64,
    /// Size and Rss of the arena heaps' read-write parts.
    pub arena_size_bytes: u64,
    pub arena_rss_bytes: u64,
    /// Sum of `Size` over mappings charged to the commit limit (`ac`): the process's
    /// commit charge, touched or not.
    pub commit_bytes: u64,
    /// Lines of the file that fit no known shape (skipped).
    pub rejected: u32,
}

impl SmapsSummary {
    pub fn from_vmas(vmas: &[Vma]) -> Self {
        let mut s = SmapsSummary::default();
        for (i, vma) in vmas.iter().enumerate() {
            if vma.accountable {
                s.commit_bytes = s.commit_bytes.saturating_add(vma.end - vma.start);
            }
            if vma.brk_heap {
                s.brk_heap_size_bytes = s.brk_heap_size_bytes.saturating_add(vma.size_bytes);
                s.brk_heap_rss_bytes = s.brk_heap_rss_bytes.saturating_add(vma.rss_bytes);
            } else if let n @ 1.. = arena_heaps_in(vma, vmas.get(i + 1)) {
                s.arena_heaps += n;
                s.arena_reserved_bytes =
                    s.arena_reserved_bytes.saturating_add(n * ARENA_HEAP_BYTES);
                s.arena_size_bytes = s.arena_size_bytes.saturating_add(vma.size_bytes);
                s.arena_rss_bytes = s.arena_rss_bytes.saturating_add(vma.rss_bytes);
            }
        }
        s
    }

    /// Heap memory resident: the brk heap plus the arena heaps.
    pub fn heap_rss_bytes(&self) -> u64 {
        self.brk_heap_rss_bytes.saturating_add(self.arena_rss_bytes)
    }

    pub fn heap_size_bytes(&self) -> u64 {
        self.brk_heap_size_bytes
            .saturating_add(self.arena_size_bytes)
    }
}

/// How many glibc arena heaps a mapping looks like, from the mappings' shape alone (the
/// heap walk finds them from glibc's own structures; this is the fallback where it cannot
/// run): an anonymous `rw-p` mapping whose start is a multiple of 64 MiB and which, with
/// the adjacent anonymous `---p` rest of its reservation, spans a whole number of 64 MiB
/// heaps. The kernel merges neighbouring heaps into one mapping, hence the count. glibc
/// maps heaps `MAP_NORESERVE` (`nr`) up to 2.40 and without it (`ac`) from 2.41. Go and
/// JVM heaps can look alike: callers that know the runtime set them aside.
pub(crate) fn arena_heaps_in(vma: &Vma, next: Option<&Vma>) -> u64 {
    let aligned = vma.start % ARENA_HEAP_BYTES == 0;
    let flagged = vma.noreserve || vma.accountable;
    if !(vma.anonymous && flagged && aligned && vma.perms_are(b"rw-p")) {
        return 0;
    }
    let end = match next {
        Some(n)
            if n.anonymous
                && n.perms_are(b"---p")
                && n.start == vma.end
                && n.noreserve == vma.noreserve =>
        {
            n.end
        }
        _ => vma.end,
    };
    let span = end - vma.start;
    if span % ARENA_HEAP_BYTES == 0 {
        span / ARENA_HEAP_BYTES
    } else {
        0
    }
}

impl Smaps {
    /// What the deep tier learns from the mappings, with the lines that were rejected.
    pub fn summary(&self) -> SmapsSummary {
        SmapsSummary {
            rejected: self.rejected,
            ..SmapsSummary::from_vmas(&self.vmas)
        }
    }
}

/// Convenience for callers that only need the summary.
pub fn summarize(text: &str) -> Result<SmapsSummary, ParseError> {
    Ok(parse(text)?.summary())
}

#[cfg(test)]
mod tests;
