//! What is learnt from a binary once and kept for every process that runs it: bounded,
//! keyed by the file's identity (device, inode, size, modification time), so a binary
//! replaced in place is read again.

use std::sync::{Arc, Mutex};

/// A file's identity: device, inode, size, modification time.
pub(crate) type FileId = (u64, u64, u64, i64);

/// Where a process loaded the binary `id`: the start of the lowest of its mappings of it
/// (file offset 0 of a binary the kernel or the loader mapped).
///
/// A binary on overlayfs (a container's image) stats as the overlay's file, with the
/// overlay's device, while from 4.19 to 6.7 the kernel maps the file of the layer below
/// and smaps names that: another device, the same inode number where the layers share a
/// file system (as a container runtime's do). So where no mapping has the binary's device
/// and inode, the mappings of the one file with its inode number on another device are
/// its; none where two such files are mapped.
pub fn first_mapping(vmas: &[crate::parse::smaps::Vma], id: FileId) -> Option<u64> {
    let (dev, ino) = (id.0, id.1);
    // smaps writes the device as major:minor; the file's stat gives it encoded.
    let dev = (nix::sys::stat::major(dev) << 32) | nix::sys::stat::minor(dev);
    let lowest = |file: (u64, u64)| {
        vmas.iter()
            .filter(|v| v.file_id == Some(file))
            .map(|v| v.start)
            .min()
    };
    lowest((dev, ino)).or_else(|| {
        let mut same_inode = vmas
            .iter()
            .filter_map(|v| v.file_id)
            .filter(|&(_, i)| i == ino);
        let file = same_inode.next()?;
        same_inode.all(|f| f == file).then(|| lowest(file))?
    })
}

/// Why the library a reader reads could not be opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotOpened {
    /// It lies on a FUSE or network mount, which no reader opens.
    Remote,
    /// It could not be opened (no ptrace access, process gone).
    Unreadable,
}

/// The lowest mapping of `library` in the process, opened as the process maps it
/// (`/proc/PID/map_files`), never on a FUSE or network mount; `None` when it maps none.
pub(crate) fn open_library(
    source: &crate::source::Source,
    pid: u32,
    vmas: &[crate::parse::smaps::Vma],
    remote: Option<&crate::parse::mountinfo::Remote>,
    library: crate::parse::smaps::Library,
) -> Result<Option<crate::source::PidFile>, NotOpened> {
    let Some(v) = vmas
        .iter()
        .filter(|v| v.library == Some(library))
        .min_by_key(|v| v.start)
    else {
        return Ok(None);
    };
    let link = format!("map_files/{:x}-{:x}", v.start, v.end);
    match source.open_pid_local(pid, &link, remote) {
        Ok(Some(f)) => Ok(Some(f)),
        Ok(None) => Err(NotOpened::Remote),
        Err(_) => Err(NotOpened::Unreadable),
    }
}

/// Up to `max` values, one per binary; the oldest goes first.
pub struct ByFile<V> {
    kept: Mutex<Vec<(FileId, Arc<V>)>>,
    max: usize,
}

/// The binaries a reader keeps by default: a node runs a few dozen distinct ones.
pub(crate) const DEFAULT_BINARIES: usize = 64;

impl<V> Default for ByFile<V> {
    fn default() -> Self {
        ByFile::new(DEFAULT_BINARIES)
    }
}

impl<V> ByFile<V> {
    pub const fn new(max: usize) -> ByFile<V> {
        ByFile {
            kept: Mutex::new(Vec::new()),
            max,
        }
    }

    /// The value kept for `id`, if any.
    pub fn get(&self, id: FileId) -> Option<Arc<V>> {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.iter()
            .find(|(k, _)| *k == id)
            .map(|(_, v)| Arc::clone(v))
    }

    /// Keeps `v` for `id`, in place of what was kept for it.
    pub fn put(&self, id: FileId, v: V) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|(k, _)| *k != id);
        if kept.len() >= self.max {
            kept.remove(0);
        }
        kept.push((id, Arc::new(v)));
    }

    /// The value kept for `id`, or `make()`'s, kept. `make` runs outside the lock: a large
    /// binary takes a while to read, and readers of other binaries wait for nothing.
    pub fn get_or(&self, id: FileId, make: impl FnOnce() -> V) -> Arc<V> {
        if let Some(v) = self.get(id) {
            return v;
        }
        let v = Arc::new(make());
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|(k, _)| *k != id);
        if kept.len() >= self.max {
            kept.remove(0);
        }
        kept.push((id, Arc::clone(&v)));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::{first_mapping, ByFile};
    use crate::parse::smaps::Vma;

    fn mapping(start: u64, file_id: (u64, u64)) -> Vma {
        Vma {
            start,
            end: start + 4096,
            file_id: Some(file_id),
            ..Vma::default()
        }
    }

    #[test]
    fn a_binary_is_found_by_device_and_inode_or_on_an_overlay_by_its_inode_alone() {
        // 8:1 inode 42, as the file's stat encodes it.
        let id = (nix::sys::stat::makedev(8, 1), 42, 100, 0);
        let own = (8u64 << 32 | 1, 42);
        let vmas = [
            mapping(0x2000, own),
            mapping(0x1000, own),
            mapping(0x500, (9 << 32, 7)),
        ];
        assert_eq!(first_mapping(&vmas, id), Some(0x1000));
        // The overlay's file (device 0:50) mapped as the layer's (8:1), same inode.
        let overlay = (nix::sys::stat::makedev(0, 50), 42, 100, 0);
        assert_eq!(first_mapping(&vmas, overlay), Some(0x1000));
        // Two files of that inode number on other devices: neither is taken.
        let both = [mapping(0x1000, own), mapping(0x3000, (8 << 32 | 2, 42))];
        assert_eq!(first_mapping(&both, overlay), None);
        assert_eq!(first_mapping(&both, id), Some(0x1000));
        // No file of that inode number: none.
        assert_eq!(
            first_mapping(&vmas, (nix::sys::stat::makedev(0, 50), 43, 100, 0)),
            None
        );
    }

    #[test]
    fn each_binary_is_read_once_and_the_oldest_goes_first() {
        let cache: ByFile<u32> = ByFile::new(2);
        let reads = std::cell::Cell::new(0);
        let get = |ino: u64| {
            *cache.get_or((1, ino, 10, 0), || {
                reads.set(reads.get() + 1);
                ino as u32
            })
        };
        assert_eq!((get(1), get(1), get(2)), (1, 1, 2));
        assert_eq!(reads.get(), 2);
        get(3); // 1 goes
        get(2);
        assert_eq!(reads.get(), 3);
        get(1);
        assert_eq!(reads.get(), 4);
        // A binary replaced in place (another size or time) is read again.
        assert_eq!(*cache.get_or((1, 1, 11, 0), || 7), 7);
        // A value put replaces the one kept.
        cache.put((1, 1, 11, 0), 8);
        assert_eq!(cache.get((1, 1, 11, 0)).as_deref(), Some(&8));
        assert_eq!(cache.get((1, 9, 11, 0)), None);
    }
}
