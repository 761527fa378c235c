//! Files and trees: the inputs of a corpus directory, and a /proc and /sys tree as one
//! text for the `pipeline` target and its seeds (`=== PATH` starts a file, the lines up
//! to the next header are its content).

use std::path::{Path, PathBuf};

/// A tree as one text: `=== proc/meminfo` starts a file, the lines up to the next such
/// header are its content. Paths are relative, of plain names, under `proc/` or `sys/`.
pub fn unpack(data: &[u8], root: &Path) -> usize {
    let t = String::from_utf8_lossy(data);
    let mut files = 0;
    for part in t.split("=== ").skip(1) {
        let (path, content) = part.split_once('\n').unwrap_or((part, ""));
        let content = content.strip_suffix('\n').map_or(content, |c| c);
        let comps: Vec<&str> = path.trim_end().split('/').collect();
        let plain = comps.len() <= 10
            && matches!(comps[0], "proc" | "sys")
            && comps.iter().all(|c| {
                !c.is_empty()
                    && *c != "."
                    && *c != ".."
                    && c.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"_.+:-@".contains(&b))
            });
        if !plain || files >= 400 {
            continue;
        }
        let file: PathBuf = comps.iter().fold(root.to_path_buf(), |p, c| p.join(c));
        let dir_ok = file
            .parent()
            .is_some_and(|d| std::fs::create_dir_all(d).is_ok());
        // A name already taken by a directory (or the reverse) is skipped, as a tree
        // cannot hold both.
        if dir_ok && std::fs::write(&file, content).is_ok() {
            files += 1;
        }
    }
    files
}

/// Packs a directory tree the way `unpack` reads it (files in sorted order).
pub fn pack(root: &Path, max_file: usize) -> Vec<u8> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(root, &mut files);
    let mut out = Vec::new();
    for f in files {
        let rel = f.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        let mut content = std::fs::read(&f).unwrap_or_default();
        if content.len() > max_file {
            // Cut at a line, keeping the start: smaps records stay whole.
            let cut = content[..max_file]
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1);
            content.truncate(cut);
        }
        out.extend_from_slice(format!("=== {rel}\n").as_bytes());
        out.extend_from_slice(&content);
        // The newline before the next header is not the file's: `unpack` drops it.
        out.push(b'\n');
    }
    out
}

/// The files of one directory (a target's corpus or regressions), in name order; none when
/// it does not exist.
pub fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}
