//! What a remedy is: what to change, its cost, and its commands; and the settings more
//! than one allocator's remedy names.

use std::borrow::Cow;

/// What to change, and what the change costs where it costs something.
pub type Advice = (String, Option<&'static str>);

pub use crate::heap::words::Remedy;

impl From<Advice> for Remedy {
    fn from((what, cost): Advice) -> Remedy {
        Remedy {
            what,
            cost: cost.map(Cow::Borrowed),
            ..Remedy::default()
        }
    }
}

/// glibc's thresholds fixed at their defaults: the dynamic mmap threshold, which a freed
/// large block raises (and with it the trim threshold, to twice as much), stays off.
pub const GLIBC_TUNABLES: &str =
    "GLIBC_TUNABLES=glibc.malloc.trim_threshold=131072:glibc.malloc.mmap_threshold=131072";
