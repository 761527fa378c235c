//! Mutations for text made of lines (every /proc file, YAML, headers) and for binary
//! images (the heap walk): AFL's byte-level havoc plus line- and number-aware edits, with a
//! dictionary of the tokens the seeds hold.

/// xorshift64*: fast, seedable, good enough to pick mutations.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
}

/// Numbers that sit on the edges parsers get wrong: overflow of u32, i64, u64 and of a
/// kB-to-bytes multiplication, signs, leading zeros, other bases, floats where integers go.
const NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "+1",
    "007",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "18014398509481983",
    "18014398509481984",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999",
    "-9223372036854775808",
    "0x10",
    "1e308",
    "NaN",
    "inf",
    "1.5",
    "",
];

const BYTES: &[u8] = b"\0\n\r\t :()[]{}\"\\-+0123456789=#,;\xff\x80";

/// A 64-bit word a heap header could hold: flag combinations, the minimum chunk size, page
/// and arena sizes, and their neighbours.
const WORDS: &[u64] = &[
    0,
    1,
    2,
    4,
    5,
    7,
    16,
    0x20,
    0x21,
    0x25,
    0x30,
    0x31,
    0x1000,
    0x1001,
    0x20001,
    64 << 20,
    u64::MAX,
    u64::MAX - 7,
    1 << 63,
];

pub struct Mutator {
    pub rng: Rng,
    /// Tokens of the seeds (words, keys), inserted whole.
    pub dictionary: Vec<Vec<u8>>,
}

fn line_starts(data: &[u8]) -> Vec<usize> {
    let mut v = vec![0];
    v.extend(
        data.iter()
            .enumerate()
            .filter(|&(_, &b)| b == b'\n')
            .map(|(i, _)| i + 1)
            .filter(|&i| i < data.len()),
    );
    v
}

/// The line holding byte `at`: `[start, end)`, the newline included.
fn line_at(data: &[u8], starts: &[usize], k: usize) -> (usize, usize) {
    let start = starts[k];
    let end = starts.get(k + 1).copied().unwrap_or(data.len());
    (start, end)
}

impl Mutator {
    /// Builds the dictionary from the seeds: every whitespace-separated word of 2 to 40
    /// bytes, at most 2,000.
    pub fn new(seed: u64, seeds: &[Vec<u8>]) -> Mutator {
        let mut words = std::collections::BTreeSet::new();
        for s in seeds {
            for w in s.split(|b| b.is_ascii_whitespace()) {
                if (2..=40).contains(&w.len()) && words.len() < 2000 {
                    words.insert(w.to_vec());
                }
            }
        }
        Mutator {
            rng: Rng::new(seed),
            dictionary: words.into_iter().collect(),
        }
    }

    /// One to eight stacked mutations of `data`, spliced at times with `other`; the result
    /// is cut to `max_len`.
    pub fn mutate(&mut self, data: &mut Vec<u8>, other: &[u8], max_len: usize, binary: bool) {
        let n = 1 << self.rng.below(4);
        for _ in 0..n {
            self.one(data, other, binary);
        }
        data.truncate(max_len);
    }

    fn one(&mut self, data: &mut Vec<u8>, other: &[u8], binary: bool) {
        let r = &mut self.rng;
        if data.is_empty() {
            data.extend_from_slice(other.get(..other.len().min(64)).unwrap_or_default());
            if data.is_empty() {
                data.push(BYTES[r.below(BYTES.len())]);
            }
            return;
        }
        let len = data.len();
        let kinds = if binary { 9 } else { 12 };
        match r.below(kinds) {
            0 => {
                let i = r.below(len);
                data[i] ^= 1 << r.below(8);
            }
            1 => {
                let i = r.below(len);
                data[i] = BYTES[r.below(BYTES.len())];
            }
            2 => {
                let at = r.below(len);
                let n = 1 + r.below(16.min(len - at));
                data.drain(at..at + n);
            }
            3 => {
                let at = r.below(len + 1);
                let n = 1 + r.below(8);
                let bytes: Vec<u8> = (0..n).map(|_| r.next() as u8).collect();
                data.splice(at..at, bytes);
            }
            4 => {
                // Copy a block elsewhere (overwriting), as AFL does.
                let from = r.below(len);
                let n = 1 + r.below(64.min(len - from));
                let to = r.below(len - n + 1);
                let block = data[from..from + n].to_vec();
                data[to..to + n].copy_from_slice(&block);
            }
            5 => {
                // Splice: our head, the other input's tail.
                if !other.is_empty() {
                    let cut = r.below(len);
                    let from = r.below(other.len());
                    data.truncate(cut);
                    data.extend_from_slice(&other[from..]);
                }
            }
            6 => data.truncate(r.below(len)),
            7 | 8 if binary => {
                // An aligned word set to a value a heap header could hold, or the
                // distance to another aligned offset (a chunk size that lands somewhere).
                let words = len / 8;
                if words > 0 {
                    let i = r.below(words) * 8;
                    let v = if r.chance(2) {
                        WORDS[r.below(WORDS.len())]
                    } else {
                        ((r.below(words) * 8) as u64).wrapping_sub(i as u64) | (r.next() & 7)
                    };
                    data[i..i + 8].copy_from_slice(&v.to_le_bytes());
                }
            }
            7 => self.number(data),
            8 => {
                if !self.dictionary.is_empty() {
                    let w = self.dictionary[r.below(self.dictionary.len())].clone();
                    let starts = line_starts(data);
                    let at = if r.chance(2) {
                        starts[r.below(starts.len())]
                    } else {
                        r.below(len + 1)
                    };
                    data.splice(at..at, w);
                }
            }
            9 => {
                // Duplicate a line (a repeated key, a repeated header).
                let starts = line_starts(data);
                let (s, e) = line_at(data, &starts, r.below(starts.len()));
                let mut line = data[s..e].to_vec();
                if line.last() != Some(&b'\n') {
                    line.push(b'\n');
                }
                let at = starts[r.below(starts.len())];
                data.splice(at..at, line);
            }
            10 => {
                // Delete a line.
                let starts = line_starts(data);
                let (s, e) = line_at(data, &starts, r.below(starts.len()));
                data.drain(s..e);
            }
            _ => {
                // Swap two lines.
                let starts = line_starts(data);
                if starts.len() > 1 {
                    let a = r.below(starts.len());
                    let b = r.below(starts.len());
                    let (a, b) = (a.min(b), a.max(b));
                    if a != b {
                        let (as_, ae) = line_at(data, &starts, a);
                        let (bs, be) = line_at(data, &starts, b);
                        let mut out = data[..as_].to_vec();
                        out.extend_from_slice(&data[bs..be]);
                        out.extend_from_slice(&data[ae..bs]);
                        out.extend_from_slice(&data[as_..ae]);
                        out.extend_from_slice(&data[be..]);
                        *data = out;
                    }
                }
            }
        }
    }

    /// Replaces a run of digits with an edge-case number.
    fn number(&mut self, data: &mut Vec<u8>) {
        let r = &mut self.rng;
        let runs: Vec<usize> = (0..data.len())
            .filter(|&i| data[i].is_ascii_digit() && (i == 0 || !data[i - 1].is_ascii_digit()))
            .collect();
        let with = NUMBERS[r.below(NUMBERS.len())].as_bytes().to_vec();
        if runs.is_empty() {
            let at = r.below(data.len() + 1);
            data.splice(at..at, with);
            return;
        }
        let s = runs[r.below(runs.len())];
        let e = (s..data.len())
            .find(|&i| !data[i].is_ascii_digit())
            .unwrap_or(data.len());
        data.splice(s..e, with);
    }
}
