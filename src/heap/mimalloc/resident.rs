//! What both mimalloc readers (2's segments, 3's pages) add up resident bytes with: a word
//! of the process's memory, and runs of ranges asked of the pagemap as one.

use crate::heap::target::{Fault, Target};

/// The little-endian word at `addr` of the process.
pub(super) fn word(t: &mut impl Target, addr: u64) -> Result<u64, Fault> {
    let mut b = [0u8; 8];
    t.read(addr, &mut b)?;
    Ok(u64::from_le_bytes(b))
}

/// Adds the resident bytes of `[lo, hi)` to `sum`, ranges that touch asked as one: `run`
/// is the range not yet asked.
pub(super) fn add_run<T: Target>(
    t: &mut T,
    run: &mut Option<(u64, u64)>,
    lo: u64,
    hi: u64,
    sum: &mut u64,
) -> Result<(), Fault> {
    *run = match *run {
        Some((a, b)) if b == lo => Some((a, hi)),
        Some((a, b)) => {
            *sum = sum.saturating_add(t.resident_bytes(a, b)?);
            Some((lo, hi))
        }
        None => Some((lo, hi)),
    };
    Ok(())
}

/// Adds what is left in `run` to `sum`.
pub(super) fn flush<T: Target>(t: &mut T, run: &mut Option<(u64, u64)>, sum: &mut u64) -> Result<(), Fault> {
    if let Some((a, b)) = run.take() {
        *sum = sum.saturating_add(t.resident_bytes(a, b)?);
    }
    Ok(())
}

/// Committed bytes at most a count can give: the x86-64 user address space.
const MAX_COMMITTED: u64 = 1 << 47;

/// mimalloc's own count of the bytes it has committed (`committed.current` of its
/// statistics, at `at`): what `mi_process_info` gives. A count no process can have (below
/// 0, or beyond the address space) means the place is not the count: not believed.
pub(super) fn committed(t: &mut impl Target, at: u64) -> Result<u64, Fault> {
    let n = word(t, at)?;
    if n > MAX_COMMITTED {
        return Err(Fault::Inconsistent);
    }
    Ok(n)
}
