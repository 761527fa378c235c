//! The perf-data parser on files built as HotSpot lays them out, each rule broken once,
//! and on a file captured from a real JVM (Debian's OpenJDK 17, G1, `-Xms64m -Xmx256m`).

use super::*;

/// A perf-data file as HotSpot writes it (little-endian, 2.0, accessible), with `entries`
/// as (name, type, vector length, data).
fn file(entries: &[(&str, u8, usize, Vec<u8>)]) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, kind, vector, data) in entries {
        let name_at = 20;
        let data_at = (name_at + name.len() + 1).next_multiple_of(8);
        let length = (data_at + data.len()).next_multiple_of(8);
        let mut e = vec![0u8; length];
        e[0..4].copy_from_slice(&(length as u32).to_le_bytes());
        e[4..8].copy_from_slice(&(name_at as u32).to_le_bytes());
        e[8..12].copy_from_slice(&(*vector as u32).to_le_bytes());
        e[12] = *kind;
        e[14] = 2;
        e[16..20].copy_from_slice(&(data_at as u32).to_le_bytes());
        e[name_at..name_at + name.len()].copy_from_slice(name.as_bytes());
        e[data_at..data_at + data.len()].copy_from_slice(data);
        body.extend(e);
    }
    let mut f = vec![0xca, 0xfe, 0xc0, 0xc0, 1, 2, 0, 1];
    f.extend(((32 + body.len()) as u32).to_le_bytes());
    f.extend(0u32.to_le_bytes());
    f.extend(0i64.to_le_bytes());
    f.extend(32u32.to_le_bytes());
    f.extend((entries.len() as u32).to_le_bytes());
    f.extend(body);
    f
}

fn long(name: &str, v: i64) -> (&str, u8, usize, Vec<u8>) {
    (name, b'J', 0, v.to_le_bytes().to_vec())
}

fn text(name: &str, t: &str, room: usize) -> (&'static str, u8, usize, Vec<u8>) {
    let mut d = t.as_bytes().to_vec();
    d.resize(room, 0);
    (Box::leak(name.to_string().into_boxed_str()), b'B', room, d)
}

fn sample() -> Vec<u8> {
    file(&[
        long("sun.gc.generation.0.space.0.capacity", 1 << 20),
        text("sun.gc.generation.0.space.0.name", "eden", 32),
        long("sun.gc.generation.0.space.0.used", -1),
    ])
}

#[test]
fn longs_and_text_in_the_files_byte_order() {
    let p = parse(&sample()).unwrap();
    assert_eq!(
        p.long("sun.gc.generation.0.space.0.capacity"),
        Some(1 << 20)
    );
    assert_eq!(p.text("sun.gc.generation.0.space.0.name"), Some("eden"));
    // A negative long is the JVM's to mean; the parser passes it on.
    assert_eq!(p.long("sun.gc.generation.0.space.0.used"), Some(-1));
    assert_eq!(p.long("sun.gc.generation.0.space.0.name"), None);
    assert_eq!(p.entries.len(), 3);
    // The same file written big-endian reads the same.
    let mut big = file(&[]);
    big[4] = 0;
    big[8..12].copy_from_slice(&(32u32 + 32).to_be_bytes());
    big[24..28].copy_from_slice(&32u32.to_be_bytes());
    big[28..32].copy_from_slice(&1u32.to_be_bytes());
    let mut e = vec![0u8; 32];
    e[0..4].copy_from_slice(&32u32.to_be_bytes());
    e[4..8].copy_from_slice(&20u32.to_be_bytes());
    e[12] = b'J';
    e[16..20].copy_from_slice(&24u32.to_be_bytes());
    e[20] = b'x';
    e[24..32].copy_from_slice(&7i64.to_be_bytes());
    big.extend(e);
    assert_eq!(parse(&big).unwrap().long("x"), Some(7));
}

#[test]
fn every_broken_rule_is_an_error_never_a_value() {
    let good = sample();
    let broken = |at: usize, bytes: &[u8]| {
        let mut f = good.clone();
        f[at..at + bytes.len()].copy_from_slice(bytes);
        parse(&f)
    };
    assert_eq!(parse(&[]), Err(ParseError::Empty));
    assert!(parse(&good[..31]).is_err(), "prologue cut short");
    assert!(broken(0, &[0xca, 0xfe, 0xc0, 0xc1]).is_err(), "magic");
    assert!(broken(4, &[2]).is_err(), "byte order");
    assert!(broken(5, &[1]).is_err(), "major version");
    assert!(broken(6, &[1]).is_err(), "minor version");
    assert_eq!(
        broken(7, &[0]),
        Err(ParseError::NotReady("hsperfdata not accessible yet"))
    );
    assert!(
        broken(24, &8u32.to_le_bytes()).is_err(),
        "entries in the prologue"
    );
    assert!(
        broken(24, &u32::MAX.to_le_bytes()).is_err(),
        "entry offset negative"
    );
    assert!(
        broken(28, &1000u32.to_le_bytes()).is_err(),
        "more entries than bytes"
    );
    // The first entry: its length, name and data offsets.
    assert!(
        broken(32, &4u32.to_le_bytes()).is_err(),
        "entry shorter than its header"
    );
    assert!(
        broken(32, &4096u32.to_le_bytes()).is_err(),
        "entry past the end"
    );
    assert!(
        broken(36, &4096u32.to_le_bytes()).is_err(),
        "name outside its entry"
    );
    assert!(
        broken(48, &4096u32.to_le_bytes()).is_err(),
        "data outside its entry"
    );
    assert!(
        broken(48, &68u32.to_le_bytes()).is_err(),
        "a long past its entry's end"
    );
    // A name without its NUL (the whole rest of the entry is name).
    let mut f = file(&[long("x", 1)]);
    for b in &mut f[32 + 20..32 + 32] {
        *b = b'n';
    }
    assert!(parse(&f).is_err(), "a name without its NUL");
    // An empty name (found by the fuzzer).
    let mut f = file(&[long("x", 1)]);
    f[32 + 20] = 0;
    assert!(parse(&f).is_err(), "an empty name");
    // Bytes past `used` are not entries, even when the file has them.
    let mut f = good.clone();
    f[8..12].copy_from_slice(&40u32.to_le_bytes());
    assert!(parse(&f).is_err(), "entries past the bytes used");
    let mut big = good.clone();
    big.resize(MAX_BYTES + 1, 0);
    assert!(parse(&big).is_err(), "larger than any JVM's");
}

#[test]
fn cut_anywhere_a_file_is_an_error_or_a_prefix_of_its_counters() {
    let good = sample();
    let whole = parse(&good).unwrap();
    for n in 0..good.len() {
        if let Ok(p) = parse(&good[..n]) {
            assert!(whole.entries.starts_with(&p.entries), "cut at {n}");
        }
    }
}

#[test]
fn other_types_are_skipped() {
    let f = file(&[
        ("sun.rt.vector", b'J', 2, vec![0; 16]),
        ("sun.rt.int", b'I', 0, vec![0; 8]),
        long("sun.rt.kept", 5),
    ]);
    let p = parse(&f).unwrap();
    assert_eq!(p.entries, vec![("sun.rt.kept".to_string(), Value::Long(5))]);
}
