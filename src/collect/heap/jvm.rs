//! A HotSpot JVM's own account of its Java heap, read from outside: the perf data it
//! publishes for `jstat` (`parse::hsperfdata`), committed and used per heap space and for
//! metaspace, and its collector.
//!
//! The data is read from the JVM's own mapping of its perf-data file (`rw-s`, named
//! `/tmp/hsperfdata_<user>/<pid>` in its mount namespace), through its memory like the heap
//! walk. That finds a container's JVM whatever its /tmp, user name or namespace pid, and
//! only the file that JVM publishes: a JVM that shares /tmp and a namespace pid with
//! another and lost the file's lock maps none (it publishes nothing), so another JVM's
//! counters are never taken for its own. `-XX:-UsePerfData` and `-XX:+PerfDisableSharedMem`
//! publish nothing either.

use super::walk::Target;
use crate::parse::hsperfdata::{self, PerfData};
use crate::parse::smaps::{Library, Vma};
use crate::parse::ParseError;

/// The JVM's collector, as its perf data names it (`sun.gc.policy.name`, or the collector
/// names where there is no policy, as with ZGC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Collector {
    G1,
    Parallel,
    Serial,
    Z,
    Shenandoah,
    /// Named, but by none of the above.
    Other,
}

impl Collector {
    pub fn as_str(self) -> &'static str {
        match self {
            Collector::G1 => "g1",
            Collector::Parallel => "parallel",
            Collector::Serial => "serial",
            Collector::Z => "z",
            Collector::Shenandoah => "shenandoah",
            Collector::Other => "other",
        }
    }

    fn of(p: &PerfData) -> Collector {
        match p.text("sun.gc.policy.name") {
            Some("GarbageFirst") => return Collector::G1,
            Some("ParScav:MSC") => return Collector::Parallel,
            Some("Copy:MSC") => return Collector::Serial,
            Some(n) if n.starts_with("Shenandoah") => return Collector::Shenandoah,
            _ => {}
        }
        let names =
            (0..MAX_COLLECTORS).filter_map(|i| p.text(&format!("sun.gc.collector.{i}.name")));
        for n in names {
            if n.starts_with("Z ") || n.starts_with("ZGC") {
                return Collector::Z;
            }
            if n.starts_with("Shenandoah") {
                return Collector::Shenandoah;
            }
        }
        Collector::Other
    }
}

/// One space of the Java heap (`sun.gc.generation.G.space.S.*`): its generation's and its
/// own name as the JVM gives them (`young`/`eden`, `s0`, `s1`; `old`/`old` or `space`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Space {
    pub generation: String,
    pub name: String,
    /// Memory the JVM committed to the space. JDK 17's G1 adds the object alignment
    /// (8 bytes) to each space's figure so that none reads 0
    /// (`G1MonitoringSupport::pad_capacity`); JDK 25's does not.
    pub committed_bytes: u64,
    pub used_bytes: u64,
    /// The space's own maximum; spaces of one generation may share theirs (G1 gives
    /// each the whole heap's), so these do not add up to `-Xmx`.
    pub max_bytes: u64,
}

/// What the JVM says of its memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JavaHeap {
    pub collector: Collector,
    pub spaces: Vec<Space>,
    /// Metaspace committed and used (`sun.gc.metaspace.*`: jstat's MC and MU).
    pub metaspace: Option<(u64, u64)>,
}

impl JavaHeap {
    pub fn committed_bytes(&self) -> u64 {
        self.spaces.iter().map(|s| s.committed_bytes).sum()
    }

    pub fn used_bytes(&self) -> u64 {
        self.spaces.iter().map(|s| s.used_bytes).sum()
    }
}

/// Why a JVM's heap has no figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmeasured {
    /// It maps no perf-data file: `-XX:-UsePerfData`, `-XX:+PerfDisableSharedMem`, or
    /// another JVM holds the file of its /tmp and namespace pid.
    NotPublished,
    /// Its memory could not be read (no ptrace access, or it exited).
    Unreadable,
    /// The JVM is still writing the file's header (it is starting).
    NotReady,
    /// The file breaks HotSpot's format, or its figures are absurd.
    Malformed,
}

impl Unmeasured {
    pub fn as_str(self) -> &'static str {
        match self {
            Unmeasured::NotPublished => "not_published",
            Unmeasured::Unreadable => "unreadable",
            Unmeasured::NotReady => "not_ready",
            Unmeasured::Malformed => "malformed",
        }
    }
}

const MAX_GENERATIONS: usize = 4;
const MAX_SPACES: usize = 8;
const MAX_COLLECTORS: usize = 4;

/// Reads the perf data of the JVM whose mappings are `vmas`, through `target` (its memory).
pub fn read<T: Target>(target: &mut T, vmas: &[Vma]) -> Result<JavaHeap, Unmeasured> {
    let file = vmas
        .iter()
        .find(|v| v.library == Some(Library::JvmPerfData))
        .ok_or(Unmeasured::NotPublished)?;
    let len = usize::try_from(file.end.saturating_sub(file.start))
        .ok()
        .filter(|&l| l <= hsperfdata::MAX_BYTES)
        .ok_or(Unmeasured::Malformed)?;
    let mut bytes = vec![0u8; len];
    target
        .read(file.start, &mut bytes)
        .map_err(|_| Unmeasured::Unreadable)?;
    match hsperfdata::parse(&bytes) {
        Ok(p) => interpret(&p),
        Err(ParseError::NotReady(_)) => Err(Unmeasured::NotReady),
        Err(_) => Err(Unmeasured::Malformed),
    }
}

/// The heap's spaces, metaspace and collector from a JVM's counters. Every space must
/// have its name and figures, none negative and none used beyond its maximum; otherwise
/// the file is malformed, never partly believed.
pub fn interpret(p: &PerfData) -> Result<JavaHeap, Unmeasured> {
    let bytes = |name: &str| {
        p.long(name)
            .and_then(|v| u64::try_from(v).ok())
            .ok_or(Unmeasured::Malformed)
    };
    let mut spaces = Vec::new();
    for g in 0..MAX_GENERATIONS {
        let Some(count) = p.long(&format!("sun.gc.generation.{g}.spaces")) else {
            continue;
        };
        let count = usize::try_from(count)
            .ok()
            .filter(|&n| n <= MAX_SPACES)
            .ok_or(Unmeasured::Malformed)?;
        let generation = p
            .text(&format!("sun.gc.generation.{g}.name"))
            .ok_or(Unmeasured::Malformed)?;
        for s in 0..count {
            let key = |f: &str| format!("sun.gc.generation.{g}.space.{s}.{f}");
            let space = Space {
                generation: generation.to_string(),
                name: p
                    .text(&key("name"))
                    .ok_or(Unmeasured::Malformed)?
                    .to_string(),
                committed_bytes: bytes(&key("capacity"))?,
                used_bytes: bytes(&key("used"))?,
                max_bytes: bytes(&key("maxCapacity"))?,
            };
            if space.used_bytes > space.max_bytes {
                return Err(Unmeasured::Malformed);
            }
            spaces.push(space);
        }
    }
    if spaces.is_empty() {
        return Err(Unmeasured::Malformed);
    }
    let metaspace = match (
        p.long("sun.gc.metaspace.capacity"),
        p.long("sun.gc.metaspace.used"),
    ) {
        (Some(_), Some(_)) => Some((
            bytes("sun.gc.metaspace.capacity")?,
            bytes("sun.gc.metaspace.used")?,
        )),
        _ => None,
    };
    Ok(JavaHeap {
        collector: Collector::of(p),
        spaces,
        metaspace,
    })
}

#[cfg(test)]
mod tests;
