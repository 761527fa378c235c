//! Reads of a process's heap counted by how they ended: `measured`, or each reason a
//! reader gives for having no figure. One counter for every reader whose reasons
//! implement [`Reason`].

use std::marker::PhantomData;

/// Why a reader has no figure: its reasons, in the order they are shown.
pub trait Reason: Copy + PartialEq + 'static {
    /// Every reason (at most [`MAX_REASONS`]).
    const ALL: &'static [Self];
    /// The `outcome` label.
    fn as_str(self) -> &'static str;
}

/// The most reasons a reader may have.
pub const MAX_REASONS: usize = 15;

/// Reads counted by outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts<R: Reason>([u64; 1 + MAX_REASONS], PhantomData<R>);

impl<R: Reason> Default for Counts<R> {
    fn default() -> Self {
        Counts([0; 1 + MAX_REASONS], PhantomData)
    }
}

impl<R: Reason> Counts<R> {
    pub fn count<T>(&mut self, read: &Result<T, R>) {
        let i = match read {
            Ok(_) => 0,
            Err(e) => 1 + R::ALL.iter().position(|u| u == e).unwrap_or(0),
        };
        if let Some(n) = self.0.get_mut(i) {
            *n += 1;
        }
    }

    /// Each outcome's label (`measured` first) and count.
    pub fn outcomes(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        std::iter::once("measured")
            .chain(R::ALL.iter().map(|r| r.as_str()))
            .zip(self.0)
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
