//! What a remedy is: what to change, its cost, and its commands; and the settings more
//! than one allocator's remedy names.

use std::borrow::Cow;

/// What to change, and what the change costs where it costs something.
pub type Advice = (String, Option<&'static str>);

/// What to change, what it costs, and the exact commands where the facts measured make
/// them right: none is printed for a case where it would not give the memory back.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Remedy {
    pub what: String,
    pub cost: Option<Cow<'static, str>>,
    /// A command that gives the memory back now, as it runs (the process's pid in it).
    pub now: Option<String>,
    /// What `now` gives back, in bytes of RAM, as far as the measurement tells.
    pub now_gives_back_bytes: Option<u64>,
    /// The environment or flags to start the program with, so that it does not happen
    /// again.
    pub next_start: Option<String>,
}

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
