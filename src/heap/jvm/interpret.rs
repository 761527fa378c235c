//! What a JVM's perf-data counters say of its heap.

use super::*;

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
            .filter(|n| is_label(n))
            .ok_or(Unmeasured::Malformed)?;
        for s in 0..count {
            let key = |f: &str| format!("sun.gc.generation.{g}.space.{s}.{f}");
            let space = Space {
                generation: generation.to_string(),
                name: p
                    .text(&key("name"))
                    .filter(|n| is_label(n))
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
        collector: Gc::of(p),
        spaces,
        metaspace,
        reserved: None,
        resident_bytes: None,
        floor_bytes: p.text("java.rt.vmArgs").and_then(heap_floor),
        resident_above_floor_bytes: None,
        feature: p.text("java.property.java.version").and_then(feature),
    })
}

/// A generation's or space's name becomes a label value: HotSpot's are short words
/// (`young`, `eden`, `s0`, `old`, `space`); the program the JVM runs can write the file.
fn is_label(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
