//! What is learnt from a binary once and kept for every process that runs it: bounded,
//! keyed by the file's identity (device, inode, size, modification time), so a binary
//! replaced in place is read again.

use std::sync::{Arc, Mutex};

/// A file's identity: device, inode, size, modification time.
pub(crate) type FileId = (u64, u64, u64, i64);

/// Where a process loaded the binary `id`: the start of the lowest of its mappings of it
/// (file offset 0 of a binary the kernel or the loader mapped).
pub fn first_mapping(vmas: &[crate::parse::smaps::Vma], id: FileId) -> Option<u64> {
    let (dev, ino) = (id.0, id.1);
    // smaps writes the device as major:minor; the file's stat gives it encoded.
    let dev = (nix::sys::stat::major(dev) << 32) | nix::sys::stat::minor(dev);
    vmas.iter()
        .filter(|v| v.file_id == Some((dev, ino)))
        .map(|v| v.start)
        .min()
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
    use super::ByFile;

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
