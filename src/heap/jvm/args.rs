//! What a JVM's arguments and properties in its perf data say: the heap's floor and the
//! JDK's feature release.

/// The heap's floor among a JVM's arguments: `-XX:MinHeapSize=` where given (JDK 13+),
/// else the last `-Xms` or `-XX:InitialHeapSize=`.
pub fn heap_floor(args: &str) -> Option<u64> {
    let last = |prefixes: &[&str]| {
        args.split_ascii_whitespace()
            .filter_map(|a| prefixes.iter().find_map(|p| a.strip_prefix(p)))
            .filter_map(size_argument)
            .next_back()
    };
    last(&["-XX:MinHeapSize="]).or_else(|| last(&["-Xms", "-XX:InitialHeapSize="]))
}

/// The feature release in a `java.version` (`17.0.15`, `21`, `1.8.0_402`).
pub(super) fn feature(version: &str) -> Option<u32> {
    let mut parts = version.split(['.', '_', '-', '+']);
    match parts.next()?.parse().ok()? {
        1 => parts.next()?.parse().ok(),
        n => Some(n),
    }
}

/// A size as HotSpot's options take it: digits and an optional k, m, g or t.
fn size_argument(v: &str) -> Option<u64> {
    let (digits, unit) = match v.as_bytes().last()?.to_ascii_lowercase() {
        b'k' => (&v[..v.len() - 1], 1u64 << 10),
        b'm' => (&v[..v.len() - 1], 1 << 20),
        b'g' => (&v[..v.len() - 1], 1 << 30),
        b't' => (&v[..v.len() - 1], 1 << 40),
        _ => (v, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(unit)
}
