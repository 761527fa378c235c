//! Who holds the memory outside the processes' heaps: SysV shared memory
//! (`/proc/sysvipc/shm`), the slab caches (`/proc/slabinfo`), the dentry cache
//! (`/proc/sys/fs/dentry-state`), vmalloc's callers (`/proc/vmallocinfo`) and the files
//! processes hold open that no directory names (their `/proc/PID/fd` links). Each parser
//! keeps what it can read of a line and skips the rest (a line that fits no shape).

use super::ParseError;

/// One SysV segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub shmid: u64,
    /// As the file prints it (decimal; `0` for IPC_PRIVATE).
    pub key: String,
    pub size_bytes: u64,
    /// The pid that created it.
    pub creator: u64,
    /// Processes attached now; 0: none, the segment stays until removed.
    pub attached: u64,
    /// Resident bytes (kernel 4.5+; `None` before).
    pub rss_bytes: Option<u64>,
}

/// `/proc/sysvipc/shm`, by its header's column names.
pub fn sysv_shm(text: &str) -> Result<Vec<Segment>, ParseError> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .next()
        .ok_or(ParseError::Missing("header"))?
        .split_ascii_whitespace()
        .collect();
    let col = |name: &str| header.iter().position(|&h| h == name);
    let (key, id, size, cpid, nattch) = (
        col("key").ok_or(ParseError::Missing("key"))?,
        col("shmid").ok_or(ParseError::Missing("shmid"))?,
        col("size").ok_or(ParseError::Missing("size"))?,
        col("cpid").ok_or(ParseError::Missing("cpid"))?,
        col("nattch").ok_or(ParseError::Missing("nattch"))?,
    );
    let rss = col("rss");
    let mut out = Vec::new();
    for line in lines {
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
        let (Some(shmid), Some(size_bytes), Some(creator), Some(attached), Some(key)) =
            (n(id), n(size), n(cpid), n(nattch), f.get(key))
        else {
            continue;
        };
        out.push(Segment {
            shmid,
            key: (*key).to_string(),
            size_bytes,
            creator,
            attached,
            rss_bytes: rss.and_then(n),
        });
    }
    Ok(out)
}

/// `/proc/slabinfo` (version 2.1): each cache's name and the bytes of its slabs
/// (`num_slabs` x `pagesperslab` pages of `page` bytes).
pub fn slab_caches(text: &str, page: u64) -> Result<Vec<(String, u64)>, ParseError> {
    if !text.starts_with("slabinfo - version: 2.") {
        return Err(ParseError::Missing("slabinfo version 2"));
    }
    let mut out = Vec::new();
    for line in text.lines().skip(2) {
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        let Some(at) = f.iter().position(|&w| w == "slabdata") else {
            continue;
        };
        let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
        if let (Some(name), Some(pages), Some(slabs)) = (f.first(), n(5), n(at + 2)) {
            let bytes = slabs.saturating_mul(pages).saturating_mul(page);
            out.push(((*name).to_string(), bytes));
        }
    }
    Ok(out)
}

/// `/proc/sys/fs/dentry-state`: dentries in the cache, those unused, and the negative
/// ones (a name looked up that does not exist; kernel 5.1+, `None` before).
pub fn dentry_state(text: &str) -> Result<(u64, u64, Option<u64>), ParseError> {
    let f: Vec<u64> = text
        .split_ascii_whitespace()
        .map(|v| v.parse().map_err(|_| ParseError::Malformed("dentry-state")))
        .collect::<Result<_, _>>()?;
    match f.as_slice() {
        [total, unused, _, _, negative, ..] => Ok((*total, *unused, Some(*negative))),
        [total, unused, ..] => Ok((*total, *unused, None)),
        _ => Err(ParseError::Missing("nr_unused")),
    }
}

/// `/proc/vmallocinfo`: the pages vmalloc allocated, summed by caller (the function, its
/// offset dropped). Mappings without pages (ioremap, vmap of others' pages) are left out.
pub fn vmalloc_callers(text: &str, page: u64) -> Vec<(String, u64)> {
    let mut by: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    for line in text.lines() {
        let mut words = line.split_ascii_whitespace().skip(2);
        let Some(caller) = words.next() else {
            continue;
        };
        let Some(pages) = words
            .find_map(|w| w.strip_prefix("pages="))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        let name = caller.split('+').next().unwrap_or(caller);
        let sum = by.entry(name).or_insert(0);
        *sum = sum.saturating_add(pages.saturating_mul(page));
    }
    by.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// The longest name kept of a file held open (a memfd's name is at most 249 bytes, a
/// path up to 4,096; either is the holder's to choose).
pub const NAME_BYTES: usize = 128;

/// A file a process holds open that no directory names, by its `/proc/PID/fd` link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unlinked {
    /// `/memfd:NAME (deleted)`: its NAME.
    Memfd(String),
    /// `PATH (deleted)`: a file removed while open, its PATH as it was.
    Deleted(String),
}

/// What a descriptor's link says it is, its name cut to [`NAME_BYTES`] (at a character).
/// `None` for a link that names a file still linked.
pub fn unlinked(link: &str) -> Option<Unlinked> {
    let name = link.strip_suffix(" (deleted)")?;
    let cut = |s: &str| {
        let mut end = s.len().min(NAME_BYTES);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s[..end].to_string()
    };
    Some(match name.strip_prefix("/memfd:") {
        Some(m) => Unlinked::Memfd(cut(m)),
        None => Unlinked::Deleted(cut(name)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysv_segments_by_the_headers_columns() {
        let text = "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap\n\
                    \x20        0          3  1600             67108864  4242  4242      0     0     0     0     0 1795900000 1795900001 1795900000             67108864                     0\n\
                    1234567 7 600 4096 10 11 2 0 0 0 0 0 0 0 4096 0\n\
                    garbage line\n";
        let s = sysv_shm(text).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(
            (
                s[0].shmid,
                s[0].key.as_str(),
                s[0].size_bytes,
                s[0].creator,
                s[0].attached,
                s[0].rss_bytes
            ),
            (3, "0", 64 << 20, 4242, 0, Some(64 << 20))
        );
        assert_eq!((s[1].key.as_str(), s[1].attached), ("1234567", 2));
        // Before 4.5: no rss column.
        let old = "key shmid perms size cpid lpid nattch uid\n0 5 600 4096 1 1 0 0\n";
        assert_eq!(sysv_shm(old).unwrap()[0].rss_bytes, None);
        assert!(sysv_shm("").is_err());
    }

    #[test]
    fn slab_caches_in_bytes_of_their_slabs() {
        let text = "slabinfo - version: 2.1\n# name <active_objs> ...\n\
                    dentry            94876 103198    192   21    1 : tunables    0    0    0 : slabdata   4914   4914      0\n\
                    kmalloc-8k          100    120   8192    4    8 : tunables    0    0    0 : slabdata     30     30      0\n\
                    broken\n";
        let c = slab_caches(text, 4096).unwrap();
        assert_eq!(
            c,
            [
                ("dentry".to_string(), 4914 * 4096),
                ("kmalloc-8k".to_string(), 30 * 8 * 4096)
            ]
        );
        assert!(slab_caches("no header", 4096).is_err());
    }

    #[test]
    fn dentry_state_with_and_without_negative() {
        assert_eq!(
            dentry_state("103198\t94876\t45\t0\t26897\t0\n"),
            Ok((103198, 94876, Some(26897)))
        );
        assert_eq!(dentry_state("10 5 45 0 0 0\n").unwrap().2, Some(0));
        assert_eq!(dentry_state("10 5\n"), Ok((10, 5, None)));
        assert!(dentry_state("x").is_err());
    }

    #[test]
    fn vmalloc_pages_by_caller() {
        let text = "0x1-0x2   20480 kernel_clone+0x94/0x3e0 pages=4 vmalloc N0=4\n\
                    0x3-0x4    8192 acpi_os_map_iomem+0x1bc/0x1e0 phys=0x00000000000a0000 ioremap\n\
                    0x5-0x6   20480 kernel_clone+0x94/0x3e0 pages=4 vmalloc N0=4\n\
                    0x7-0x8 1052672 bpf_prog_alloc+0x1/0x2 pages=256 vmalloc vpages N0=256\n";
        let mut v = vmalloc_callers(text, 4096);
        v.sort();
        assert_eq!(
            v,
            [
                ("bpf_prog_alloc".to_string(), 256 * 4096),
                ("kernel_clone".to_string(), 8 * 4096)
            ]
        );
    }

    #[test]
    fn an_unlinked_file_by_its_link() {
        assert_eq!(
            unlinked("/memfd:java_heap (deleted)"),
            Some(Unlinked::Memfd("java_heap".into()))
        );
        assert_eq!(
            unlinked("/dev/shm/x (deleted) (deleted)"),
            Some(Unlinked::Deleted("/dev/shm/x (deleted)".into()))
        );
        assert_eq!(unlinked("/dev/shm/x"), None);
        assert_eq!(unlinked("anon_inode:[eventfd]"), None);
        // A long name is cut, never inside a character.
        let long = format!("/memfd:{} (deleted)", "é".repeat(200));
        let Some(Unlinked::Memfd(name)) = unlinked(&long) else {
            panic!()
        };
        assert_eq!(name, "é".repeat(NAME_BYTES / 2));
        let odd = format!("/{} (deleted)", "é".repeat(200));
        let Some(Unlinked::Deleted(path)) = unlinked(&odd) else {
            panic!()
        };
        assert_eq!(path.len(), NAME_BYTES - 1);
    }
}
