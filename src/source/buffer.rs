//! A reusable read buffer and path, and the buffers of one reader thread.

use std::path::PathBuf;

/// What a buffer starts with and shrinks back to: every small file fits.
pub(super) const START_BYTES: usize = 16 << 10;

/// A reusable read buffer and path: a scan allocates nothing per file once warm.
#[derive(Debug, Default)]
pub struct Buffer {
    /// Always zero-filled up to its length; `len` bytes of it are the file.
    pub(super) data: Vec<u8>,
    pub(super) len: usize,
    pub(super) path: PathBuf,
    /// The last file was longer than the limit and was cut.
    pub(super) cut: bool,
}

impl Buffer {
    /// True when the last file read was cut at the size limit.
    pub(crate) fn was_cut(&self) -> bool {
        self.cut
    }

    /// The text of the last file read.
    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.data[..self.len]).unwrap_or_default()
    }

    /// Gives back memory a large file (a deep-tier smaps) made the buffer take.
    pub fn shrink(&mut self) {
        if self.data.len() > START_BYTES {
            self.data.truncate(START_BYTES);
            self.data.shrink_to_fit();
            self.len = self.len.min(START_BYTES);
        }
    }
}

/// The buffers of one reader thread.
#[derive(Debug, Default)]
pub struct Buffers {
    pub main: Buffer,
    /// For a second file while the first is still in use (`cmdline` beside `stat`).
    pub aux: Buffer,
}
