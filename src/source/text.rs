//! A file read into a [`Buffer`]: whole, as text (up to a limit, grown as it fills), or a
//! line at a time in pieces, for a file too large to hold (a process's `smaps`).

use std::fs::File;
use std::io::{self, Read};

use super::{Buffer, ReadError, START_BYTES};

/// Opens `buf`'s path, its content and cut flag cleared.
fn open_into(buf: &mut Buffer) -> Result<File, ReadError> {
    buf.len = 0;
    buf.cut = false;
    File::open(&buf.path).map_err(|e| ReadError::new(&buf.path, e))
}

pub(super) fn read_text(
    buf: &mut Buffer,
    whole_in_one: bool,
    max: usize,
) -> Result<&str, ReadError> {
    let mut file = open_into(buf)?;
    let Buffer {
        data,
        len,
        path,
        cut,
    } = buf;
    if data.len() < START_BYTES {
        data.resize(START_BYTES, 0);
    }
    loop {
        if *len == data.len() {
            if data.len() >= max {
                *cut = true;
                break;
            }
            let grown = (data.len() * 2).min(max);
            data.resize(grown, 0);
        }
        let want = data.len() - *len;
        let n = match file.read(&mut data[*len..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ReadError::new(path, e)),
        };
        *len += n;
        if n == 0 || (whole_in_one && n < want) {
            break;
        }
    }
    // /proc text is ASCII except for names a process gives itself; invalid UTF-8 there is
    // replaced rather than failing the whole file.
    if std::str::from_utf8(&data[..*len]).is_err() {
        let lossy = String::from_utf8_lossy(&data[..*len]).into_owned();
        data.clear();
        data.extend_from_slice(lossy.as_bytes());
        *len = data.len();
    }
    Ok(std::str::from_utf8(&data[..*len]).unwrap_or_default())
}

/// Read at a time by [`read_lines`]: a line longer than this (no `/proc` file has one; a
/// mapping's name is at most `PATH_MAX`) is given in pieces.
pub(super) const LINE_PIECE_BYTES: usize = 64 << 10;

/// Reads `buf`'s path in pieces of [`LINE_PIECE_BYTES`], giving `line` each line without
/// its newline (invalid UTF-8 replaced), at most `max` bytes in all: `Ok(false)` when the
/// file was longer.
pub(super) fn read_lines(
    buf: &mut Buffer,
    max: usize,
    mut line: impl FnMut(&str),
) -> Result<bool, ReadError> {
    let mut file = open_into(buf)?;
    let Buffer {
        data,
        len,
        path,
        cut,
    } = buf;
    data.resize(LINE_PIECE_BYTES, 0);
    let mut total = 0usize;
    let mut give = |bytes: &[u8]| line(&String::from_utf8_lossy(bytes));
    loop {
        let n = match file.read(&mut data[*len..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ReadError::new(path, e)),
        };
        total += n;
        *len += n;
        let end = if n == 0 {
            *len
        } else {
            match data[..*len].iter().rposition(|&b| b == b'\n') {
                Some(i) => i + 1,
                // A piece with no end of line in it: given as it is.
                None if *len == data.len() => *len,
                None => continue,
            }
        };
        for l in data[..end].split_inclusive(|&b| b == b'\n') {
            give(l.strip_suffix(b"\n").unwrap_or(l));
        }
        data.copy_within(end..*len, 0);
        *len -= end;
        if n == 0 {
            break;
        }
        if total >= max {
            *cut = true;
            break;
        }
    }
    *len = 0;
    Ok(!*cut)
}
