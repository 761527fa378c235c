use super::super::golang::image::{elf, part, symbols, Part};
use super::super::runtime::Allocator;
use super::{linked, unhide, MAX_RODATA_BYTES, MESSAGES};

/// `allocator`'s message prefix and then `rest`: built here, as the binary this runs in
/// may not hold the prefixes (see the last test).
fn says(allocator: Allocator, rest: &str) -> String {
    let (_, hidden) = MESSAGES.iter().find(|m| m.0 == allocator).unwrap();
    String::from_utf8(unhide(hidden)).unwrap() + rest
}

/// A symbol table (sections 2 and 3) defining `names`, as `.symtab` or `.dynsym`, each a
/// global function.
fn table(names: &[&str], kind: u32) -> Vec<Part> {
    let syms: Vec<(&str, u64)> = names.iter().map(|&n| (n, 0x1000)).collect();
    let [mut t, strings] = symbols(&syms);
    for sym in t.bytes.chunks_exact_mut(24).skip(1) {
        sym[4] = 0x12; // STB_GLOBAL, STT_FUNC
    }
    t.kind = kind;
    t.name = if kind == 2 { ".symtab" } else { ".dynsym" };
    t.link = 3;
    vec![t, strings]
}

#[test]
fn a_defined_allocator_symbol_names_the_allocator() {
    let cases: [(&[&str], Option<Allocator>); 10] = [
        (&["main", "_rjem_mallctl"], Some(Allocator::Jemalloc)),
        (&["je_mallctl", "je_malloc"], Some(Allocator::Jemalloc)),
        (&["mallctlnametomib"], Some(Allocator::Jemalloc)),
        (&["tc_malloc_size"], Some(Allocator::Tcmalloc)),
        (
            &["_ZN8tcmalloc6Static9pageheap_E"],
            Some(Allocator::Tcmalloc),
        ),
        (&["mi_malloc"], Some(Allocator::Mimalloc)),
        // A Rust program on the `mimalloc` crate (3.x): no `mi_malloc` kept.
        (&["mi_malloc_aligned", "mi_free"], Some(Allocator::Mimalloc)),
        (&["main", "__init_libc"], Some(Allocator::Musl)),
        // glibc's own names, and names that only look alike.
        (
            &[
                "malloc",
                "free",
                "malloc_trim",
                "mallctlx",
                "mi_mallocx",
                "mi_freed",
            ],
            None,
        ),
        (&[], None),
    ];
    for (names, want) in cases {
        for kind in [2, 11] {
            assert_eq!(
                linked(&elf(table(names, kind))[..]),
                want,
                "{names:?} {kind}"
            );
        }
    }
}

/// CPython 3.13 bundles mimalloc with its names local (`t mi_free`, `r _mi_page_empty`)
/// and allocates with pymalloc on glibc's malloc: not mimalloc's.
#[test]
fn a_local_mimalloc_name_is_not_the_allocator() {
    let mut parts = table(&["mi_free", "main"], 2);
    parts[0].bytes[24 + 4] = 0x02; // STB_LOCAL, STT_FUNC
    assert_eq!(linked(&elf(parts)[..]), None);
    // Global, it is.
    assert_eq!(
        linked(&elf(table(&["mi_free", "main"], 2))[..]),
        Some(Allocator::Mimalloc)
    );
}

#[test]
fn an_imported_symbol_is_not_the_allocator() {
    // A weak `mallctl` a program declares to find jemalloc if it is there (folly,
    // RocksDB): section 0, imported.
    let mut parts = table(&["mallctl"], 11);
    parts[0].bytes[24 + 6..24 + 8].copy_from_slice(&0u16.to_le_bytes());
    assert_eq!(linked(&elf(parts)[..]), None);
}

/// A stripped binary: a dynamic table of glibc's names and `rodata`.
fn stripped(rodata: Vec<u8>) -> Vec<u8> {
    let mut parts = table(&["malloc", "free"], 11);
    parts.push(part(".rodata", 1, rodata));
    elf(parts)
}

#[test]
fn a_stripped_binary_is_told_by_its_allocators_messages() {
    let msg = |m: String, at: usize| {
        let mut r = vec![b'x'; at + 4096];
        r[at..at + m.len()].copy_from_slice(m.as_bytes());
        r
    };
    // Across the edge of two pieces read, and at the very end.
    for at in [0, (64 << 10) - 5, 200_000] {
        let bin = stripped(msg(says(Allocator::Jemalloc, "Invalid conf pair"), at));
        assert_eq!(linked(&bin[..]), Some(Allocator::Jemalloc), "at {at}");
    }
    let bin = stripped(msg(says(Allocator::Mimalloc, "warning"), 10));
    assert_eq!(linked(&bin[..]), Some(Allocator::Mimalloc));
    let bin = stripped(msg(says(Allocator::Tcmalloc, "large alloc"), 10));
    assert_eq!(linked(&bin[..]), Some(Allocator::Tcmalloc));
    assert_eq!(linked(&stripped(vec![b'x'; 300_000])[..]), None);
    // Only the first MAX_RODATA_BYTES are searched.
    let far = msg(says(Allocator::Jemalloc, ""), MAX_RODATA_BYTES as usize);
    assert_eq!(linked(&stripped(far)[..]), None);
    // Where there are symbols, they decide: a message in a binary with a symbol table
    // and none of the allocators' names is the text of a program that speaks of them.
    let mut parts = table(&["main"], 2);
    parts.push(part(".rodata", 1, msg(says(Allocator::Jemalloc, ""), 10)));
    assert_eq!(linked(&elf(parts)[..]), None);
}

#[test]
fn this_binary_holds_no_allocator_of_its_own() {
    // It names each allocator and its messages, and links none of them.
    let exe = std::fs::File::open("/proc/self/exe").unwrap();
    assert_eq!(linked(&exe), None);
    // Stripped, as packages ship it, its read-only data is searched: it must not hold the
    // messages it searches for. (binutils' `strip` comes with the C compiler the suite
    // builds its reproducers with.)
    // A copy of the running image (/proc/self/exe opens it even once a rebuild replaced the
    // file), stripped in place.
    let copy = std::env::temp_dir().join(format!("membloat-stripped-{}", std::process::id()));
    std::fs::copy("/proc/self/exe", &copy).unwrap();
    let out = std::process::Command::new("strip")
        .arg("--strip-all")
        .arg(&copy)
        .output()
        .expect("binutils' strip");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stripped = std::fs::File::open(&copy).unwrap();
    let _ = std::fs::remove_file(&copy);
    let elf = super::Elf::parse(&stripped).unwrap();
    assert!(!elf.has_symtab());
    assert_eq!(linked(&stripped), None);
}

#[test]
fn truncated_or_garbage_binaries_never_panic() {
    let whole = stripped(says(Allocator::Jemalloc, "..").into_bytes());
    for cut in 0..whole.len() {
        let _ = linked(&whole[..cut]);
    }
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..2000 {
        let mut f = whole.clone();
        for _ in 0..4 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let i = (state as usize) % f.len();
            f[i] = (state >> 32) as u8;
        }
        let _ = linked(&f[..]);
    }
}

#[test]
fn a_symbol_named_by_the_tail_of_a_merged_string_is_found() {
    // One string, "je_mallctl", and a symbol `mallctl` pointing at its tail (linkers
    // merge strings so); the symbol `je_mallctl` itself is imported.
    let mut parts = table(&["je_mallctl"], 11);
    parts[0].bytes[24 + 6..24 + 8].copy_from_slice(&0u16.to_le_bytes());
    let mut tail = parts[0].bytes[24..48].to_vec();
    tail[0..4].copy_from_slice(&(1u32 + 3).to_le_bytes());
    tail[6..8].copy_from_slice(&1u16.to_le_bytes());
    parts[0].bytes.extend_from_slice(&tail);
    assert_eq!(linked(&elf(parts)[..]), Some(Allocator::Jemalloc));
}

#[test]
fn symbol_tables_are_read_in_pieces_within_their_cap() {
    // 200,000 symbols (4.8 MB of table, more of names), the allocator's last.
    let names: Vec<String> = (0..200_000).map(|i| format!("function_{i}")).collect();
    let mut all: Vec<&str> = names.iter().map(String::as_str).collect();
    all.push("_rjem_mallctl");
    assert_eq!(linked(&elf(table(&all, 2))[..]), Some(Allocator::Jemalloc));
    // A table that claims more than the cap is not read at all.
    let mut parts = table(&["_rjem_mallctl"], 2);
    parts[0].claimed = Some(super::super::elf::MAX_SYMBOLS_BYTES + 24);
    assert_eq!(linked(&elf(parts)[..]), None);
}
