//! `membloat-fuzz seed`: the first corpus of each target, from the fixture tree, from this
//! host's own /proc and /sys, and built here where no file holds the format (heap images,
//! a Go ELF, headers, flags). Written to fuzz/corpus/TARGET/, named by content.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::targets::TARGETS;
use crate::tree::pack;
use membloat_exporter::heap::golang;

/// Expands `a/*/b`: `*` matches one path component.
fn glob(root: &Path, pattern: &str) -> Vec<PathBuf> {
    let mut paths = vec![root.to_path_buf()];
    for comp in pattern.split('/') {
        let mut next = Vec::new();
        for p in paths {
            if comp == "*" {
                let mut kids: Vec<PathBuf> = std::fs::read_dir(&p)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path())
                    .collect();
                kids.sort();
                next.extend(kids);
            } else {
                next.push(p.join(comp));
            }
        }
        paths = next;
    }
    paths.into_iter().filter(|p| p.is_file()).collect()
}

fn live(paths: &[&str]) -> Vec<Vec<u8>> {
    paths.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

const MATCHER: &str = "process_names:\n  - name: \"{{.Comm}}\"\n    comm: [postgres, redis-server]\n  - name: \"java:{{.Matches.App}}\"\n    exe: [java]\n    cmdline: ['-jar\\s+(?P<App>\\S+)']\n---\njava\njava\0-jar\0app.jar\n";

const HEADERS: &str = "Basic dXNlcjpwYXNzd29yZA==\nbasic  Zm9vOmJhcjpiYXo=\nBearer abc\napplication/openmetrics-text; version=1.0.0; charset=utf-8, text/plain; q=0.5\napplication/openmetrics-text;q=0\n*/*\n";

const FLAGS: &str = "--web.listen-address=:10293\n--scan.interval=15s\n--collector.processes.top-k=5\n--collector.processes.deep-min-size=64MiB\n--no-collector.thp\n--log.level=debug\n250ms\n1h\n1GiB\n[::1]:9100\n";

/// A brk heap (mode byte 0) or an arena heap (mode byte 1) as glibc lays them out: a chunk
/// in use, a free one, another in use, the top chunk to the end.
fn heap_image(arena: bool) -> Vec<u8> {
    let len = 8192usize;
    let mut m = vec![0u8; len];
    let put = |m: &mut Vec<u8>, at: usize, v: u64| m[at..at + 8].copy_from_slice(&v.to_le_bytes());
    let (first, a) = if arena {
        // heap_info { ar_ptr = start + 48, prev = 0, size, mprotect_size }, malloc_state.
        put(&mut m, 0, 0x7f00_0000_0000 + 48);
        put(&mut m, 16, len as u64);
        put(&mut m, 24, len as u64);
        (2256, 4)
    } else {
        (0, 0)
    };
    put(&mut m, first + 8, 0x30 | 1 | a);
    put(&mut m, first + 0x30 + 8, 0x100 | 1 | a);
    put(&mut m, first + 0x130, 0x100);
    put(&mut m, first + 0x130 + 8, 0x40 | a);
    let top = first + 0x170;
    put(&mut m, top + 8, (len - top) as u64 | 1);
    let mut out = vec![arena as u8];
    out.extend(m);
    out
}

/// This host's /proc and /sys, reduced to what one scan reads, for the exporter itself.
fn live_tree() -> Vec<u8> {
    let tmp = std::env::temp_dir().join(format!("membloat-fuzz-seed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let me = std::process::id();
    let files = [
        "proc/meminfo",
        "proc/vmstat",
        "proc/stat",
        "proc/pressure/memory",
        "proc/sys/vm/overcommit_memory",
        "proc/sys/vm/overcommit_ratio",
        "proc/sys/vm/overcommit_kbytes",
        "proc/sys/vm/swappiness",
        "proc/sys/vm/panic_on_oom",
        "sys/kernel/mm/transparent_hugepage/enabled",
        "sys/kernel/mm/transparent_hugepage/defrag",
        "sys/kernel/mm/transparent_hugepage/shmem_enabled",
        "sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none",
        "sys/kernel/mm/transparent_hugepage/khugepaged/pages_collapsed",
    ];
    let per_pid = [
        "status",
        "stat",
        "statm",
        "smaps_rollup",
        "smaps",
        "cgroup",
        "oom_score",
        "oom_score_adj",
        "cmdline",
    ];
    let copy = |from: String, to: String| {
        if let Ok(d) = std::fs::read(&from) {
            let dest = tmp.join(to);
            let _ = std::fs::create_dir_all(dest.parent().unwrap());
            let _ = std::fs::write(dest, d);
        }
    };
    for f in files {
        copy(format!("/{f}"), f.to_string());
    }
    for f in per_pid {
        copy(format!("/proc/self/{f}"), format!("proc/{me}/{f}"));
    }
    let packed = pack(&tmp, 4096);
    let _ = std::fs::remove_dir_all(&tmp);
    packed
}

fn seeds_of(root: &Path, name: &str, patterns: &[&str]) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = patterns
        .iter()
        .flat_map(|p| glob(root, p))
        .filter_map(|p| std::fs::read(p).ok())
        .collect();
    match name {
        "meminfo" => v.extend(live(&["/proc/meminfo"])),
        "vmstat" => v.extend(live(&["/proc/vmstat"])),
        "status" => v.extend(live(&["/proc/self/status", "/proc/1/status"])),
        "stat" => v.extend(live(&["/proc/self/stat"])),
        "statm" => v.extend(live(&["/proc/self/statm"])),
        "smaps" => v.extend(live(&["/proc/self/smaps"])),
        "smaps_rollup" => v.extend(live(&["/proc/self/smaps_rollup"])),
        "pressure" => v.extend(live(&["/proc/pressure/memory"])),
        "cgroup" => v.extend(live(&["/proc/self/cgroup"])),
        "sockstat" => v.extend(live(&["/proc/net/sockstat", "/proc/net/tcp"])),
        "zoneinfo" => v.extend(live(&["/proc/zoneinfo"])),
        "mountinfo" => {
            v.extend(live(&["/proc/self/mountinfo"]));
            v.push(b"22 27 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:13 - proc proc rw,hidepid=invisible\n".to_vec());
        }
        "matcher" => v.push(MATCHER.as_bytes().to_vec()),
        "http_headers" => v.push(HEADERS.as_bytes().to_vec()),
        "flags" => v.push(FLAGS.as_bytes().to_vec()),
        "heap_walk" => v.extend([heap_image(false), heap_image(true)]),
        "go_buildinfo" => v.push(crate::go_elf::go_elf("go1.22.5", true)),
        "go_layout" => v.push(golang::image::go_binary()),
        // A binary that links jemalloc in (its symbols), and a stripped one (its message).
        "allocator_linked" => {
            let [mut table, strings] =
                golang::image::symbols(&[("main", 0x1000), ("_rjem_mallctl", 0x2000)]);
            table.link = 3;
            v.push(golang::image::elf(vec![table, strings]));
            let message: Vec<u8> = [
                b'<', b'j', b'e', b'm', b'a', b'l', b'l', b'o', b'c', b'>', b':', b' ',
            ]
            .iter()
            .copied()
            .chain(*b"Invalid conf pair\0")
            .collect();
            v.push(golang::image::elf(vec![golang::image::part(
                ".rodata", 1, message,
            )]));
        }
        // A patch that writes the first extent's size again: the process as built.
        "jemalloc_read" => {
            let mut p = vec![3u8];
            p.extend((16u16 / 8).to_le_bytes());
            p.extend((3u64 * 4096).to_le_bytes());
            v.push(p);
        }
        // A patch that writes the segment's cookie again: the process as built.
        "mimalloc_read" => {
            use membloat_exporter::heap::mimalloc::{image, layout};
            let cookie = layout::VERSIONS[2].2.cookie;
            let mut p = vec![6u8];
            p.extend(u16::try_from(cookie / 8).unwrap().to_le_bytes());
            p.extend((image::START ^ image::COOKIE).to_le_bytes());
            v.push(p);
        }
        // A patch that writes the first arena's address again: the process as built.
        "python_read" => {
            let mut p = vec![1u8];
            p.extend(0u16.to_le_bytes());
            p.extend(membloat_exporter::heap::python::image::arena_at(0).to_le_bytes());
            v.push(p);
        }
        // A patch that writes the free heap's own figure again: the process as built.
        "go_heap" => {
            let mut p = vec![0u8, 1, 0];
            p.extend((16u64 * 8192).to_le_bytes());
            v.push(p);
        }
        "pipeline" => {
            v.push(pack(&root.join("tests/fixtures/kernel-6.18"), 4096));
            v.push(live_tree());
        }
        _ => {}
    }
    // A seed longer than the target takes is cut, as the fuzzer would.
    let max = crate::targets::find(name).map_or(usize::MAX, |t| t.max_len);
    for s in &mut v {
        s.truncate(max);
    }
    v
}

pub fn write_all(root: &Path) -> ExitCode {
    for t in TARGETS {
        let dir = root.join("fuzz/corpus").join(t.name);
        let _ = std::fs::create_dir_all(&dir);
        let seeds = seeds_of(root, t.name, t.seeds);
        for s in &seeds {
            let _ = std::fs::write(dir.join(crate::digest(s)), s);
        }
        println!("{:<13} {} seeds", t.name, seeds.len());
    }
    ExitCode::SUCCESS
}
