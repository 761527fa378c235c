//! The dynamic symbols of a loaded shared object (`libjvm.so`, `libpython3.*.so`), found
//! as the dynamic loader finds them: through its own `PT_DYNAMIC` and its GNU or System V
//! hash table, read from the process's memory, every count capped. No file is opened: a
//! library's file is reachable only through `/proc/PID/map_files`, which needs a
//! capability the exporter is not granted.

use super::target::{u16_at, u32_at, u64_at, Target};
use std::collections::HashMap;

/// `len` bytes of the target at `at`.
pub(crate) fn read_vec<T: Target>(t: &mut T, at: u64, len: usize) -> Option<Vec<u8>> {
    let mut b = vec![0u8; len];
    t.read(at, &mut b).ok()?;
    Some(b)
}

/// The System V ELF symbol hash (`DT_HASH`), which older builds carry alone.
pub fn sysv_hash(name: &[u8]) -> u32 {
    name.iter().fold(0u32, |h, &c| {
        let h = (h << 4).wrapping_add(c as u32);
        let g = h & 0xf000_0000;
        (h ^ (g >> 24)) & !g
    })
}

/// glibc's GNU symbol hash (`dl_new_hash`).
pub fn gnu_hash(name: &[u8]) -> u32 {
    name.iter()
        .fold(5381u32, |h, &c| h.wrapping_mul(33).wrapping_add(c as u32))
}

/// A loaded shared object's dynamic symbols, as its own dynamic section lays them out.
pub(crate) struct Symbols {
    base: u64,
    symtab: u64,
    strtab: u64,
    strsz: u64,
    hash: Hash,
}

/// How the symbols are found by name: the GNU hash table (`DT_GNU_HASH`, what current
/// toolchains emit), else the System V one (`DT_HASH`: JDK 11's builds carry only that).
enum Hash {
    Gnu {
        nbuckets: u32,
        symoffset: u32,
        buckets: Vec<u8>,
        chains: u64,
    },
    Sysv {
        nbuckets: u32,
        buckets: Vec<u8>,
        chains: u64,
    },
}

impl Symbols {
    /// The symbols of the shared object whose ELF header is mapped at `base`.
    pub fn of<T: Target>(t: &mut T, base: u64) -> Option<Symbols> {
        let eh = read_vec(t, base, 64)?;
        // ELF64, little-endian, a shared object.
        if &eh[..4] != b"\x7fELF" || eh[4] != 2 || eh[5] != 1 || eh[16] != 3 {
            return None;
        }
        let phoff = u64_at(&eh, 0x20)?;
        let phentsize = usize::from(u16_at(&eh, 0x36)?);
        let phnum = usize::from(u16_at(&eh, 0x38)?);
        if phentsize != 56 || phnum > 64 {
            return None;
        }
        let ph = read_vec(t, base.checked_add(phoff)?, phentsize * phnum)?;
        let dynamic = ph
            .chunks(56)
            .find(|p| u32_at(p, 0) == Some(2))
            .and_then(|p| Some((u64_at(p, 0x10)?, u64_at(p, 0x28)?)))?;
        let len = usize::try_from(dynamic.1).ok()?.min(64 << 10) / 16 * 16;
        let dyns = read_vec(t, base.checked_add(dynamic.0)?, len)?;
        let mut tags: HashMap<u64, u64> = HashMap::new();
        for d in dyns.chunks(16) {
            let (tag, val) = (u64_at(d, 0)?, u64_at(d, 8)?);
            if tag == 0 {
                break;
            }
            tags.entry(tag).or_insert(val);
        }
        // glibc's loader turns these into addresses in place; other loaders leave them
        // relative to the base.
        let addr = |tag| {
            let v = *tags.get(&tag)?;
            Some(if v < base { base.checked_add(v)? } else { v })
        };
        let (symtab, strtab) = (addr(6)?, addr(5)?);
        let strsz = *tags.get(&10)?;
        let hash = match (addr(0x6fff_fef5), addr(4)) {
            (Some(gnu), _) => {
                let head = read_vec(t, gnu, 16)?;
                let (nbuckets, symoffset, bloom) =
                    (u32_at(&head, 0)?, u32_at(&head, 4)?, u32_at(&head, 8)?);
                if nbuckets == 0 || nbuckets > 1 << 20 || bloom > 1 << 20 {
                    return None;
                }
                let buckets_at = gnu + 16 + u64::from(bloom) * 8;
                Hash::Gnu {
                    nbuckets,
                    symoffset,
                    buckets: read_vec(t, buckets_at, nbuckets as usize * 4)?,
                    chains: buckets_at + u64::from(nbuckets) * 4,
                }
            }
            (None, Some(sysv)) => {
                let head = read_vec(t, sysv, 8)?;
                let nbuckets = u32_at(&head, 0)?;
                if nbuckets == 0 || nbuckets > 1 << 20 {
                    return None;
                }
                Hash::Sysv {
                    nbuckets,
                    buckets: read_vec(t, sysv + 8, nbuckets as usize * 4)?,
                    chains: sysv + 8 + u64::from(nbuckets) * 4,
                }
            }
            (None, None) => return None,
        };
        Some(Symbols {
            base,
            symtab,
            strtab,
            strsz,
            hash,
        })
    }

    /// The address of symbol `i` when it is the defined symbol `name`.
    fn is<T: Target>(&self, t: &mut T, i: u32, name: &str) -> Option<u64> {
        let sym = read_vec(t, self.symtab + u64::from(i) * 24, 24)?;
        let st_name = u64::from(u32_at(&sym, 0)?);
        let value = u64_at(&sym, 8)?;
        if st_name >= self.strsz || value == 0 {
            return None;
        }
        let got = read_vec(t, self.strtab + st_name, name.len() + 1)?;
        (got.strip_suffix(b"\0") == Some(name.as_bytes()))
            .then(|| self.base.checked_add(value))
            .flatten()
    }

    fn u32_of<T: Target>(t: &mut T, at: u64) -> Option<u32> {
        u32::from_le_bytes(read_vec(t, at, 4)?.try_into().ok()?).into()
    }

    /// The address of the defined symbol `name`. A chain is followed for 4,096 entries
    /// at most.
    pub fn find<T: Target>(&self, t: &mut T, name: &str) -> Option<u64> {
        match &self.hash {
            Hash::Gnu {
                nbuckets,
                symoffset,
                buckets,
                chains,
            } => {
                let h = gnu_hash(name.as_bytes());
                let first = u32_at(buckets, (h % nbuckets) as usize * 4)?;
                if first < *symoffset {
                    return None;
                }
                // A chain ends at its entry with the low bit set.
                for i in (first..).take(4096) {
                    let chain = Symbols::u32_of(t, chains + u64::from(i - symoffset) * 4)?;
                    if chain | 1 == h | 1 {
                        if let Some(at) = self.is(t, i, name) {
                            return Some(at);
                        }
                    }
                    if chain & 1 == 1 {
                        return None;
                    }
                }
                None
            }
            Hash::Sysv {
                nbuckets,
                buckets,
                chains,
            } => {
                let h = sysv_hash(name.as_bytes());
                let mut i = u32_at(buckets, (h % nbuckets) as usize * 4)?;
                for _ in 0..4096 {
                    if i == 0 {
                        return None;
                    }
                    if let Some(at) = self.is(t, i, name) {
                        return Some(at);
                    }
                    i = Symbols::u32_of(t, chains + u64::from(i) * 4)?;
                }
                None
            }
        }
    }
}
