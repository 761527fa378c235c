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

