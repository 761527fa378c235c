//! What every heap reader (glibc's heaps, a JVM's, a Go runtime's, jemalloc's) reads a
//! process through: its memory and page presence as a [`Target`], the [`Fault`]s a read
//! ends with, and the little-endian words read out of what it returns, which never panic
//! on a short slice: the bytes are the process's to write.

/// What every reader reads: the target's memory and which of its pages are resident.
pub trait Target {
    /// Fills `buf` from the target's address `addr`; any short or failed read is an error.
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), Fault>;
    /// Reads each `(address, length)` of `at` into consecutive parts of `out` (as long as
    /// the lengths together).
    fn read_many(&mut self, at: &[(u64, usize)], out: &mut [u8]) -> Result<(), Fault> {
        let mut rest = out;
        for &(a, len) in at {
            let (o, tail) = std::mem::take(&mut rest).split_at_mut(len);
            self.read(a, o)?;
            rest = tail;
        }
        Ok(())
    }
    /// Bytes of `[start, end)` in pages present in RAM that the process holds: not the
    /// zero page, nor a page it shares copy-on-write with another process.
    fn resident_bytes(&mut self, start: u64, end: u64) -> Result<u64, Fault>;
    /// The target's page size: what `malloc_trim` releases whole, and the unit of
    /// `pagemap` (4 KiB on x86-64, 16 or 64 KiB on some arm64 kernels). No default: each
    /// target says what it is.
    fn page_size(&self) -> u64;
    /// Whether `[start, end)` lies wholly in the process's private anonymous memory, what
    /// an allocator's heap is made of: a range in a shared or file mapping, or outside
    /// every mapping, holds nothing the allocator could give back, and a figure over it
    /// could be counted in every process that maps it. A target that knows no mappings
    /// cannot tell, and answers `true`.
    fn private_anonymous(&self, start: u64, end: u64) -> bool {
        let _ = (start, end);
        true
    }
}

/// Why a read gave no number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// A header broke a rule: the heap moved under the walk, or it is not glibc's.
    Inconsistent,
    /// More chunks than the walk may visit.
    Budget,
    /// The target's memory or pagemap could not be read (denied, gone, I/O).
    Unreadable,
    /// No glibc arena that fits was found: not a layout this exporter knows.
    NotFound,
    /// A range the allocator says it holds lies outside the process's private anonymous
    /// memory ([`Target::private_anonymous`]): not believed.
    Outside,
    /// An address lies in a mapping of a file on a FUSE or network mount, whose page a
    /// read could fault in from a server that never answers: not read.
    Remote,
}

/// The little-endian `u64` at `at` of `b`; `None` past its end.
pub fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// The little-endian `u32` at `at` of `b`; `None` past its end.
pub(crate) fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// The little-endian `u16` at `at` of `b`; `None` past its end.
pub(crate) fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::{u16_at, u32_at, u64_at};

    #[test]
    fn words_past_the_end_are_none_never_a_panic() {
        let b = [1, 0, 0, 0, 0, 0, 0, 0, 2];
        assert_eq!(u64_at(&b, 0), Some(1));
        assert_eq!(u64_at(&b, 1), Some(2 << 56));
        assert_eq!(u64_at(&b, 2), None);
        assert_eq!(u64_at(&b, usize::MAX), None);
        assert_eq!(u32_at(&b, 5), Some(2 << 24));
        assert_eq!(u32_at(&b, 6), None);
        assert_eq!(u16_at(&b, 8), None);
        assert_eq!(u16_at(&b, 7), Some(2 << 8));
    }
}
