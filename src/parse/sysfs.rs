//! Setting files under `/sys/kernel/mm/transparent_hugepage`.

use super::ParseError;

/// The selected word of a choice file such as `always [madvise] never`; a file without
/// brackets (`1`, `inherit`) is its own value. Only `[a-z0-9_+-]` words are accepted, so
/// the value is safe as a label.
pub fn selected(text: &str) -> Result<String, ParseError> {
    let text = text.trim();
    let word = match (text.find('['), text.find(']')) {
        (Some(open), Some(close)) if open < close => &text[open + 1..close],
        (None, None) => text,
        _ => return Err(ParseError::Malformed("choice")),
    };
    let ok = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_+-".contains(&b));
    if !ok {
        return Err(ParseError::Malformed("choice"));
    }
    Ok(word.to_string())
}

/// `hugepages-2048kB` -> 2 MiB in bytes.
pub fn hugepage_dir_size_bytes(name: &str) -> Option<u64> {
    let kib: u64 = name
        .strip_prefix("hugepages-")?
        .strip_suffix("kB")?
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_bracketed_choice() {
        // As on kernel 6.18 with THP in madvise mode.
        assert_eq!(selected("always [madvise] never\n").unwrap(), "madvise");
        assert_eq!(
            selected("always defer defer+madvise [madvise] never\n").unwrap(),
            "madvise"
        );
        assert_eq!(
            selected("always inherit madvise [never]\n").unwrap(),
            "never"
        );
        assert_eq!(selected("1\n").unwrap(), "1");
        assert!(selected("always [mad").is_err());
        assert!(selected("[x\"y]").is_err());
        assert!(selected("").is_err());
    }

    #[test]
    fn hugepage_dir_sizes() {
        assert_eq!(hugepage_dir_size_bytes("hugepages-2048kB"), Some(2 << 20));
        assert_eq!(hugepage_dir_size_bytes("hugepages-64kB"), Some(64 << 10));
        assert_eq!(hugepage_dir_size_bytes("stats"), None);
    }
}
