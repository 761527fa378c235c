//! HotSpot's performance-data file, `hsperfdata_<user>/<pid>` in the JVM's temporary
//! directory: the counters `jstat` reads, published by every HotSpot JVM (JDK 1.5 on,
//! format version 2.0) unless started with `-XX:-UsePerfData`.
//!
//! Layout, from HotSpot's `perfMemory.hpp` and `perfData.hpp`: a 32-byte prologue (magic
//! bytes `CA FE C0 C0`, byte order, major and minor version, `accessible`, bytes used,
//! overflow, last structural change, offset of the first entry, number of entries), then
//! the entries, each a 20-byte header (its length, the offset of its NUL-terminated name,
//! a vector length (0 for a scalar), type, flags, units, variability, the offset of its
//! data) followed by its name and data. Numbers are `J` (a 64-bit long); text is a `B`
//! (byte) vector holding a NUL-terminated string. The JVM writes the file while it runs:
//! every offset and length here is checked against the bytes in hand, and a file whose
//! writer has not finished its header (`accessible` 0) is not read.

use super::ParseError;

/// Largest file read: HotSpot's default is 64 KiB (`-XX:PerfDataMemorySize`), rounded up
/// to a page; a file this large is not a JVM's.
pub(crate) const MAX_BYTES: usize = 1 << 20;

const PROLOGUE_BYTES: usize = 32;
const ENTRY_HEADER_BYTES: usize = 20;

/// One counter's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A `J` scalar.
    Long(i64),
    /// A `B` vector: text up to its first NUL.
    Text(String),
}

/// The counters of one file, in the file's order; other types (vectors of longs, the
/// rare `I`/`D` entries) are left out.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PerfData {
    pub entries: Vec<(String, Value)>,
}

impl PerfData {
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.entries.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    pub fn long(&self, name: &str) -> Option<i64> {
        match self.get(name)? {
            Value::Long(v) => Some(*v),
            Value::Text(_) => None,
        }
    }

    pub fn text(&self, name: &str) -> Option<&str> {
        match self.get(name)? {
            Value::Text(t) => Some(t),
            Value::Long(_) => None,
        }
    }
}

/// The file's bytes, in the order its prologue names.
struct Bytes<'a> {
    data: &'a [u8],
    big_endian: bool,
}

impl Bytes<'_> {
    fn u32_at(&self, at: usize) -> Option<u32> {
        let b: [u8; 4] = self.data.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(if self.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    }

    /// A `jint` that must be a length or an offset: negative is malformed.
    fn offset_at(&self, at: usize) -> Option<usize> {
        usize::try_from(i32::try_from(self.u32_at(at)?).ok()?).ok()
    }

    fn i64_at(&self, at: usize) -> Option<i64> {
        let b: [u8; 8] = self.data.get(at..at.checked_add(8)?)?.try_into().ok()?;
        Some(if self.big_endian {
            i64::from_be_bytes(b)
        } else {
            i64::from_le_bytes(b)
        })
    }
}

/// Parses one file. Errors: not a perf-data file (magic), a byte order or version other
/// than HotSpot's 2.0, a file its writer has not finished (`accessible` 0:
/// [`ParseError::NotReady`]), a prologue or entry that points outside the bytes, or a
/// name that is not text. An entry's data of another type is skipped, not an error.
pub fn parse(data: &[u8]) -> Result<PerfData, ParseError> {
    if data.is_empty() {
        return Err(ParseError::Empty);
    }
    if data.len() < PROLOGUE_BYTES {
        return Err(ParseError::Malformed("hsperfdata prologue cut short"));
    }
    if data.len() > MAX_BYTES {
        return Err(ParseError::Malformed("hsperfdata larger than 1 MiB"));
    }
    if data[..4] != [0xca, 0xfe, 0xc0, 0xc0] {
        return Err(ParseError::Malformed("hsperfdata magic"));
    }
    let big_endian = match data[4] {
        0 => true,
        1 => false,
        _ => return Err(ParseError::Malformed("hsperfdata byte order")),
    };
    if (data[5], data[6]) != (2, 0) {
        return Err(ParseError::Malformed("hsperfdata version (2.0 known)"));
    }
    if data[7] == 0 {
        return Err(ParseError::NotReady("hsperfdata not accessible yet"));
    }
    let b = Bytes { data, big_endian };
    let bad = ParseError::Malformed;
    let used = b.offset_at(8).ok_or(bad("hsperfdata used"))?;
    let first = b.offset_at(24).ok_or(bad("hsperfdata entry offset"))?;
    let count = b.offset_at(28).ok_or(bad("hsperfdata entry count"))?;
    // Only the bytes the JVM says it used hold entries.
    let end = used.min(data.len());
    if first < PROLOGUE_BYTES || first > end {
        return Err(bad("hsperfdata entry offset"));
    }
    if count > (end - first) / ENTRY_HEADER_BYTES {
        return Err(bad("hsperfdata entry count"));
    }
    let mut entries = Vec::with_capacity(count);
    let mut at = first;
    for _ in 0..count {
        let length = b.offset_at(at).ok_or(bad("hsperfdata entry length"))?;
        let entry_end = at
            .checked_add(length)
            .filter(|&e| length >= ENTRY_HEADER_BYTES && e <= end)
            .ok_or(bad("hsperfdata entry length"))?;
        let entry = &data[at..entry_end];
        let field = |off: usize| b.offset_at(at + off).filter(|&o| o < length);
        let name_at = field(4).ok_or(bad("hsperfdata name offset"))?;
        let vector = b.offset_at(at + 8).ok_or(bad("hsperfdata vector length"))?;
        let kind = entry[12];
        let data_at = field(16).ok_or(bad("hsperfdata data offset"))?;
        let name = until_nul(&entry[name_at..]).ok_or(bad("hsperfdata name"))?;
        let value = match (kind, vector) {
            (b'J', 0) => {
                let v = (data_at + 8 <= length)
                    .then(|| b.i64_at(at + data_at))
                    .flatten()
                    .ok_or(bad("hsperfdata long"))?;
                Some(Value::Long(v))
            }
            (b'B', n) if n > 0 => {
                let bytes = entry
                    .get(data_at..data_at.checked_add(n).ok_or(bad("hsperfdata text"))?)
                    .ok_or(bad("hsperfdata text"))?;
                let nul = bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len());
                Some(Value::Text(
                    String::from_utf8_lossy(&bytes[..nul]).into_owned(),
                ))
            }
            _ => None,
        };
        if let Some(v) = value {
            entries.push((name.to_string(), v));
        }
        at = entry_end;
    }
    Ok(PerfData { entries })
}

/// The text before the first NUL, when there is one, some text before it, and the text
/// is UTF-8.
fn until_nul(bytes: &[u8]) -> Option<&str> {
    let nul = bytes.iter().position(|&c| c == 0).filter(|&n| n > 0)?;
    std::str::from_utf8(&bytes[..nul]).ok()
}

#[cfg(test)]
mod tests;
