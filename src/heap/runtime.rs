//! Which allocator and runtime a process runs, told from its mappings and executable.
//!
//! The heap walk is only for heaps glibc made, and the remedy for hoarding, arenas or
//! khugepaged regrowth depends on the runtime (Go 1.21.1+ and the JVM manage THP and
//! their own heaps), so both are told before anything is walked.

use crate::parse::smaps::{Libraries, Library};

/// The malloc the process's heap memory comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Allocator {
    /// glibc's ptmalloc (`libc.so.6`): the only one walked.
    Glibc,
    Jemalloc,
    Tcmalloc,
    Mimalloc,
    Musl,
    /// Go's own heap (a static Go binary, no libc).
    Go,
    /// No shared C library mapped: statically linked, allocator unknown.
    Static,
}

impl Allocator {
    pub fn as_str(self) -> &'static str {
        match self {
            Allocator::Glibc => "glibc",
            Allocator::Jemalloc => "jemalloc",
            Allocator::Tcmalloc => "tcmalloc",
            Allocator::Mimalloc => "mimalloc",
            Allocator::Musl => "musl",
            Allocator::Go => "go",
            Allocator::Static => "static",
        }
    }
}

/// The language runtime, where it can be told cheaply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Runtime {
    /// Nothing recognised: C, C++, Rust and the like.
    Native,
    Go,
    Jvm,
    Python,
    Node,
}

impl Runtime {
    pub fn as_str(self) -> &'static str {
        match self {
            Runtime::Native => "native",
            Runtime::Go => "go",
            Runtime::Jvm => "jvm",
            Runtime::Python => "python",
            Runtime::Node => "node",
        }
    }
}

/// A process's allocator and runtime.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identity {
    pub allocator: Allocator,
    pub runtime: Runtime,
    /// The runtime's version where the binary says it (Go: `go1.22.5`); empty otherwise.
    pub version: String,
}

/// Decides from the files mapped, the Go build info of the executable (`Some(version)`
/// when it is a Go binary) and the allocator linked into it (as `linked.rs` reads it).
pub(crate) fn identify(libs: Libraries, go: Option<String>, linked: Option<Allocator>) -> Identity {
    // A malloc replacement wins over libc: it is preloaded, or linked in front of it.
    let allocator = if libs.has(Library::Jemalloc) {
        Allocator::Jemalloc
    } else if libs.has(Library::Tcmalloc) {
        Allocator::Tcmalloc
    } else if libs.has(Library::Mimalloc) {
        Allocator::Mimalloc
    } else if let Some(linked) = linked {
        linked
    } else if libs.has(Library::Musl) {
        Allocator::Musl
    } else if libs.has(Library::Glibc) {
        Allocator::Glibc
    } else if go.is_some() {
        Allocator::Go
    } else {
        Allocator::Static
    };
    let runtime = if go.is_some() {
        Runtime::Go
    } else if libs.has(Library::Jvm) || libs.has(Library::JvmLibrary) {
        Runtime::Jvm
    } else if libs.has(Library::Python)
        || libs.has(Library::PythonLibrary)
        || libs.has(Library::PythonFreeThreaded)
    {
        Runtime::Python
    } else if libs.has(Library::Node) {
        Runtime::Node
    } else {
        Runtime::Native
    };
    Identity {
        allocator,
        runtime,
        version: go.unwrap_or_default(),
    }
}

/// Go's build info magic, at the start of the `.go.buildinfo` section.
const GO_MAGIC: &[u8; 14] = b"\xff Go buildinf:";

/// Finds the `.go.buildinfo` section of an ELF64 little-endian executable through
/// `read(offset, buf) -> bool` and returns the Go version (`go1.22.5`); an empty version
/// when the binary is Go but older than 1.18 (no inline strings). `None`: not Go, or not
/// an ELF this reads. Reads at most a few KiB whatever the file says.
pub fn go_version(mut read: impl FnMut(u64, &mut [u8]) -> bool) -> Option<String> {
    let mut eh = [0u8; 64];
    if !read(0, &mut eh) || &eh[..4] != b"\x7fELF" || eh[4] != 2 || eh[5] != 1 {
        return None;
    }
    let u16_at = |b: &[u8], i: usize| u64::from(super::target::u16_at(b, i).unwrap_or(0));
    let u64_at = |b: &[u8], i: usize| super::target::u64_at(b, i).unwrap_or(0);
    let shoff = u64_at(&eh, 0x28);
    let shentsize = u16_at(&eh, 0x3a);
    let shnum = u16_at(&eh, 0x3c).min(256);
    let shstrndx = u16_at(&eh, 0x3e);
    if shentsize != 64 || shstrndx >= shnum {
        return None;
    }
    let mut table = vec![0u8; (shnum * 64) as usize];
    if !read(shoff, &mut table) {
        return None;
    }
    let section = |i: u64| {
        let s = &table[(i * 64) as usize..(i * 64 + 64) as usize];
        (u64_at(s, 0) & 0xffff_ffff, u64_at(s, 0x18), u64_at(s, 0x20))
    };
    let (_, names_off, names_len) = section(shstrndx);
    let mut names = vec![0u8; names_len.min(16 << 10) as usize];
    if !read(names_off, &mut names) {
        return None;
    }
    let wanted = b".go.buildinfo\0";
    let (_, off, len) = (0..shnum).map(section).find(|&(name, _, _)| {
        names
            .get(name as usize..)
            .is_some_and(|n| n.starts_with(wanted))
    })?;
    let mut head = [0u8; 32 + 1 + 64];
    let n = (len as usize).min(head.len());
    if n < 32 || !read(off, &mut head[..n]) || &head[..14] != GO_MAGIC {
        return None;
    }
    // Go 1.18+: flag bit 1 means the version follows inline as a varint-prefixed string.
    if head[15] & 2 == 0 {
        return Some(String::new());
    }
    let vlen = head[32] as usize;
    let version = head.get(33..33 + vlen).filter(|_| vlen < 0x80)?;
    let printable = version.starts_with(b"go")
        && version
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"._+-:".contains(b));
    Some(if printable {
        String::from_utf8_lossy(version).into_owned()
    } else {
        String::new()
    })
}

#[cfg(test)]
mod go_elf;

#[cfg(test)]
mod tests {
    use super::go_elf::go_elf;
    use super::*;

    fn libs(list: &[Library]) -> Libraries {
        let mut l = Libraries::default();
        for &x in list {
            l.insert(x);
        }
        l
    }

    #[test]
    fn a_preloaded_malloc_wins_over_libc_and_static_go_is_go() {
        let id = identify(libs(&[Library::Glibc, Library::Jemalloc]), None, None);
        assert_eq!(id.allocator, Allocator::Jemalloc);
        assert_eq!(id.runtime, Runtime::Native);
        let id = identify(libs(&[]), Some("go1.22.5".into()), None);
        assert_eq!((id.allocator, id.runtime), (Allocator::Go, Runtime::Go));
        assert_eq!(id.version, "go1.22.5");
        // cgo: glibc's malloc serves the C side of a Go program.
        let id = identify(libs(&[Library::Glibc]), Some("go1.21.1".into()), None);
        assert_eq!((id.allocator, id.runtime), (Allocator::Glibc, Runtime::Go));
        let id = identify(libs(&[]), None, None);
        assert_eq!(id.allocator, Allocator::Static);
        let id = identify(libs(&[Library::Glibc, Library::Python]), None, None);
        assert_eq!(
            (id.allocator, id.runtime),
            (Allocator::Glibc, Runtime::Python)
        );
        let id = identify(libs(&[Library::Glibc, Library::Jvm]), None, None);
        assert_eq!(id.runtime, Runtime::Jvm);
        // jemalloc linked into a binary that maps libc: jemalloc's, never glibc's.
        let linked = Some(Allocator::Jemalloc);
        let id = identify(libs(&[Library::Glibc]), None, linked);
        assert_eq!(
            (id.allocator, id.runtime),
            (Allocator::Jemalloc, Runtime::Native)
        );
        // A preloaded one is the one malloc calls reach.
        let id = identify(libs(&[Library::Glibc, Library::Mimalloc]), None, linked);
        assert_eq!(id.allocator, Allocator::Mimalloc);
        let id = identify(libs(&[Library::Glibc, Library::Jvm]), None, None);
        assert_eq!(id.runtime, Runtime::Jvm);
    }

    fn reader(f: &[u8]) -> impl FnMut(u64, &mut [u8]) -> bool + '_ {
        move |off, buf| {
            let Some(src) = f.get(off as usize..off as usize + buf.len()) else {
                return false;
            };
            buf.copy_from_slice(src);
            true
        }
    }

    #[test]
    fn go_build_info_gives_the_version() {
        assert_eq!(
            go_version(reader(&go_elf("go1.22.5", true))).as_deref(),
            Some("go1.22.5")
        );
        assert_eq!(
            go_version(reader(&go_elf("go1.16", false))).as_deref(),
            Some("")
        );
        // A hostile "version" is not carried into a label.
        assert_eq!(
            go_version(reader(&go_elf("go\"\n{x}", true))).as_deref(),
            Some("")
        );
        assert_eq!(go_version(reader(b"#!/bin/sh\n")), None);
    }

    #[test]
    fn truncated_or_garbage_elf_never_panics() {
        let whole = go_elf("go1.22.5", true);
        for cut in 0..whole.len() {
            let _ = go_version(reader(&whole[..cut]));
        }
        let mut state = 0x9e3779b97f4a7c15u64;
        for _ in 0..2000 {
            let mut f = whole.clone();
            for _ in 0..4 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let i = (state as usize) % f.len();
                f[i] = (state >> 32) as u8;
            }
            let _ = go_version(reader(&f));
        }
    }
}
