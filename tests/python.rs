//! CPython's small-object arenas read from outside, against CPython's own count: random
//! programs (`tests/reproducers/pyarenas.py`: small objects over many size classes, a
//! random share dropped) on Debian's 3.9, 3.11 and 3.13 with their symbols (from each
//! release's -dbg package) and as shipped (stripped: 3.13 read through what it exports),
//! and, where this machine has pyenv, on its 3.7 to 3.13 and `--strip-all` copies of their
//! libpython.
//! The oracle is `sys._debugmallocstats()`, written by the program just before the read
//! and again just after it; the reader's figures must equal it exactly. Reading another
//! process's memory needs ptrace access: CI runs as root.

use crate::common;

use common::repro::Repro;
use common::*;
use membloat_exporter::heap::python::{Python, PythonHeap, Unmeasured};
use membloat_exporter::heap::{self, HeapReading};
use membloat_exporter::parse::smaps;
use membloat_exporter::source::Source;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

/// What the exporter's heap readers make of process `pid`.
fn read(pid: u32) -> HeapReading {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    let vmas = smaps::parse(&text).unwrap().vmas;
    heap::read(&Source::new("/proc", "/sys"), pid, &vmas, true)
}

/// One CPython with its symbols.
struct Cpython {
    /// `Debian 3.11`, `pyenv 3.12`.
    label: String,
    minor: String,
    python: PathBuf,
    /// A pyenv build (with a shared libpython beside it), not Debian's.
    pyenv: bool,
}

/// Every CPython with symbols here, oldest first: Debian's 3.9, 3.11 and 3.13 (fetched on
/// any Debian machine), then pyenv's 3.7 to 3.13 where this machine has them, each one
/// missing said out loud.
fn pythons() -> Vec<Cpython> {
    let mut found: Vec<Cpython> = common::python::debian()
        .iter()
        .map(|d| Cpython {
            label: format!("Debian {}", d.minor),
            minor: d.minor.clone(),
            python: d.symbols.clone(),
            pyenv: false,
        })
        .collect();
    for minor in ["3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13"] {
        match common::python::pyenv(minor) {
            Some(python) => found.push(Cpython {
                label: format!("pyenv {minor}"),
                minor: minor.to_string(),
                python,
                pyenv: true,
            }),
            None => skipped(&format!(
                "no pyenv build of CPython {minor} on this machine (Debian's 3.9, 3.11 and 3.13 ran)"
            )),
        }
    }
    found
}

/// CPython's own figures, as `sys._debugmallocstats()` prints them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Own {
    arenas: u64,
    allocated: u64,
    available: u64,
    unused_pools: u64,
    pool: u64,
}

fn own(stats: &Path) -> Own {
    let text = std::fs::read_to_string(stats).unwrap();
    let number = |s: &str| -> u64 { s.trim().replace(',', "").parse().unwrap() };
    let after = |label: &str| {
        text.lines()
            .find(|l| l.starts_with(label))
            .and_then(|l| l.split('=').nth(1))
            .map(number)
            .unwrap_or_else(|| panic!("{label} in {text}"))
    };
    // "885 unused pools * 4096 bytes      =            3,624,960"
    let pools = text
        .lines()
        .find(|l| l.contains(" unused pools * "))
        .unwrap_or_else(|| panic!("unused pools in {text}"));
    let words: Vec<&str> = pools.split_whitespace().collect();
    Own {
        arenas: after("# arenas allocated current"),
        allocated: after("# bytes in allocated blocks"),
        available: after("# bytes in available blocks"),
        unused_pools: number(words[0]),
        pool: number(words[4]),
    }
}

/// One random program run by `python` with `env`.
struct Program {
    r: Repro,
    stats: PathBuf,
    _dir: tempfile::TempDir,
}

impl Program {
    fn start(python: &Path, env: &[(&str, &str)], seed: u64, objects: u64, drop: u64) -> Program {
        let dir = tempfile::tempdir().unwrap();
        let stats = dir.path().join("stats");
        let r = common::python::pyarenas(python, env, (seed, objects, drop), &stats);
        Program {
            r,
            stats,
            _dir: dir,
        }
    }

    /// Has the program write its figures afresh.
    fn again(&mut self) -> Own {
        let stdin = self.r.child.stdin.as_mut().unwrap();
        stdin.write_all(b"stats\n").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        self.r.out.read_line(&mut line).unwrap();
        assert!(line.starts_with("ready"), "{line:?}");
        own(&self.stats)
    }

    /// The reader's figure or reason, and CPython's figures just before and just after
    /// it, once those agree (nothing moved between them; up to five tries).
    fn read_between(&mut self) -> (Result<PythonHeap, Unmeasured>, Own) {
        let mut before = own(&self.stats);
        for _ in 0..5 {
            let h = read(self.r.pid());
            let after = self.again();
            if before == after {
                let h = h.get::<Python>().cloned().expect("a python reading");
                return (h.map(|b| *b), before);
            }
            before = after;
        }
        panic!("CPython's figures moved around five reads");
    }
}

/// A copy of `lib` (a libpython) with its symbol table removed, in a folder of its own
/// under the name the interpreter loads.
fn stripped_library(python: &Path, minor: &str, into: &Path) -> PathBuf {
    let name = format!("libpython{minor}.so.1.0");
    let lib = python
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("lib")
        .join(&name);
    let status = tool("strip")
        .arg("--strip-all")
        .arg(&lib)
        .arg("-o")
        .arg(into.join(&name))
        .status()
        .unwrap();
    assert!(status.success(), "strip {}", lib.display());
    let out = Command::new("readelf")
        .arg("-S")
        .arg(into.join(&name))
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains(".symtab"),
        "the copy still has a symbol table"
    );
    into.to_path_buf()
}

/// The random programs: `MEMBLOAT_PYTHON_PROGRAMS` per interpreter (3 by default; the
/// closing figures ran 100).
fn programs() -> u64 {
    std::env::var("MEMBLOAT_PYTHON_PROGRAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

/// Runs `programs()` random programs under `python` and `env`; each read must equal
/// CPython's own figures exactly.
fn agree(label: &str, python: &Path, env: &[(&str, &str)], version: &str) -> Vec<String> {
    let mut rows = Vec::new();
    for seed in 0..programs() {
        // Seeded per interpreter, so a failure is rerun as it was.
        let salt = label
            .bytes()
            .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
        let mut rng = (seed + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ salt;
        let mut next = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let objects = 20_000 + next(380_000);
        let drop = 10 + next(86);
        let mut p = Program::start(python, env, seed, objects, drop);
        let (h, want) = p.read_between();
        let h = h.unwrap_or_else(|e| panic!("{label} seed {seed}: {e:?}"));
        let got = Own {
            arenas: h.arenas,
            allocated: h.allocated_bytes,
            available: h.available_bytes,
            unused_pools: h.unused_pools,
            pool: h.pool_bytes,
        };
        assert_eq!(
            got, want,
            "{label} seed {seed} ({objects} objects, {drop}% dropped)"
        );
        assert_eq!(h.version, version, "{label}");
        assert!(
            h.unused_resident_bytes <= h.unused_bytes(),
            "{label}: {h:?}"
        );
        rows.push(format!(
            "{label} seed {seed}: {objects} objects, {drop}% dropped: {} arenas, {:.1} MiB unused ({:.1} resident), equal",
            h.arenas,
            h.unused_bytes() as f64 / 1048576.0,
            h.unused_resident_bytes as f64 / 1048576.0
        ));
    }
    rows
}

/// An interpreter started with `PYTHONMALLOC=malloc`: CPython prints no arena figures (its
/// objects are glibc's), and the reader finds no arena: measured at zero, never a guess.
fn without_pymalloc(python: &Path, label: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("stats");
    let env = [("PYTHONMALLOC", "malloc")];
    let r = common::python::pyarenas(python, &env, (1, 100_000, 50), &stats);
    let own = std::fs::read_to_string(&stats).unwrap();
    assert!(!own.contains("arenas allocated"), "{own}");
    let h = read(r.pid())
        .get::<Python>()
        .cloned()
        .expect("a python reading")
        .unwrap_or_else(|e| panic!("PYTHONMALLOC=malloc: {e:?}"));
    assert_eq!(
        (h.arenas, h.unused_bytes(), h.allocated_bytes),
        (0, 0, 0),
        "{h:?}"
    );
    format!("{label} PYTHONMALLOC=malloc: no arena, measured 0")
}

/// The layout's name for a minor version.
fn layout_version(minor: &str) -> &'static str {
    match minor {
        "3.8" | "3.9" => "3.8-3.9",
        "3.10" => "3.10",
        "3.11" => "3.11",
        "3.12" => "3.12",
        "3.13" => "3.13",
        _ => "",
    }
}

#[test]
fn arenas_equal_cpythons_own_count_on_every_version_stripped_or_not() {
    let mut rows = Vec::new();
    let dir = tempfile::tempdir().unwrap();
    for Cpython {
        label,
        minor,
        python,
        pyenv,
    } in pythons()
    {
        if minor == "3.7" {
            // Before 3.8: other size classes, no layout here; named, never a number.
            let mut p = Program::start(&python, &[], 1, 50_000, 50);
            let (h, _) = p.read_between();
            assert_eq!(h, Err(Unmeasured::UnknownVersion), "3.7");
            rows.push("3.7: unknown_version".to_string());
            continue;
        }
        rows.extend(agree(&label, &python, &[], layout_version(&minor)));
        if !pyenv && minor == "3.13" {
            rows.push(without_pymalloc(&python, &label));
        }
        if pyenv && (minor == "3.11" || minor == "3.12" || minor == "3.13") {
            let lib = dir.path().join(&minor);
            std::fs::create_dir_all(&lib).unwrap();
            let lib = stripped_library(&python, &minor, &lib);
            let env = [("LD_LIBRARY_PATH", lib.to_str().unwrap())];
            if minor == "3.11" {
                // 3.11's state is in static variables: stripped, they are gone.
                let mut p = Program::start(&python, &env, 1, 50_000, 50);
                assert_eq!(
                    p.read_between().0,
                    Err(Unmeasured::Stripped),
                    "3.11 stripped"
                );
                rows.push("3.11 --strip-all: stripped".to_string());
            } else {
                let label = format!("{label} --strip-all");
                rows.extend(agree(&label, &python, &env, layout_version(&minor)));
            }
        }
    }
    // Debian's interpreters as shipped: stripped, libpython linked in. 3.13's state is
    // found through the _PyRuntime it exports; before 3.12 it lies in static variables
    // the symbol table alone names.
    for d in common::python::debian() {
        let label = format!("Debian {} as shipped", d.minor);
        if d.minor == "3.13" {
            rows.extend(agree(&label, &d.stripped, &[], layout_version(&d.minor)));
        } else {
            let mut p = Program::start(&d.stripped, &[], 1, 50_000, 50);
            assert_eq!(p.read_between().0, Err(Unmeasured::Stripped), "{label}");
            rows.push(format!("{label}: stripped"));
        }
    }
    for r in rows {
        eprintln!("{r}");
    }
}

/// What gdb reads from `lib`'s DWARF for each of `exprs`: `print/d (long)&EXPR`.
fn dwarf_offsets(lib: &Path, exprs: &[&str]) -> Vec<u64> {
    let mut cmd = tool("gdb");
    cmd.args(["-q", "-batch", "-nx"]);
    for e in exprs {
        cmd.arg("-ex").arg(format!("print/d (long)&{e}"));
    }
    let out = cmd.arg(lib).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let values: Vec<u64> = text
        .lines()
        .filter_map(|l| l.split('=').nth(1)?.trim().parse().ok())
        .collect();
    assert_eq!(
        values.len(),
        exprs.len(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    values
}

/// The places the reader takes from its table for 3.12 and 3.13 are where each build's
/// DWARF puts them (`gdb`, on Debian's 3.13 with its -dbg symbols, and on pyenv's
/// libpython, built with `-g`, where this machine has it).
#[test]
fn the_tables_places_are_each_builds_dwarfs() {
    use membloat_exporter::heap::python::layout::{
        DEBUG_INTERPRETERS_HEAD, IN_RUNTIME, MGMT_ARENAS, MGMT_IN_STATE, MGMT_MAXARENAS,
        MGMT_NARENAS,
    };
    let gdb = dwarf_offsets;
    let mut checked = std::collections::BTreeSet::new();
    for Cpython {
        minor,
        python,
        pyenv,
        ..
    } in pythons()
    {
        let m: u32 = minor.strip_prefix("3.").unwrap().parse().unwrap();
        let Some(&(_, main, obmalloc, pointer)) = IN_RUNTIME.iter().find(|(v, ..)| *v == m) else {
            continue;
        };
        // pyenv's interpreter loads libpython; Debian's has it linked in.
        let lib = if pyenv {
            python
                .parent()
                .unwrap()
                .parent()
                .unwrap()
                .join(format!("lib/libpython{minor}.so.1.0"))
        } else {
            python.clone()
        };
        let v = gdb(
            &lib,
            &[
                "((_PyRuntimeState*)0)->_main_interpreter",
                "((PyInterpreterState*)0)->obmalloc",
                "((struct _obmalloc_state*)0)->mgmt",
                "((struct _obmalloc_state*)0)->mgmt.arenas",
                "((struct _obmalloc_state*)0)->mgmt.maxarenas",
                "((struct _obmalloc_state*)0)->mgmt.narenas_currently_allocated",
                "((struct pool_header*)0)->arenaindex",
                "((struct pool_header*)0)->szidx",
                "((struct arena_object*)0)->ntotalpools",
                "((struct arena_object*)0)[1]",
            ],
        );
        match main {
            Some(at) => assert_eq!(v[0], at, "{minor}: _main_interpreter"),
            None => {
                // Found through _PyRuntime's debug offsets: where they say
                // interpreters.head is, and main beside it.
                let d = gdb(
                    &lib,
                    &[
                        "((_Py_DebugOffsets*)0)->runtime_state.interpreters_head",
                        "((_PyRuntimeState*)0)->interpreters.head",
                        "((_PyRuntimeState*)0)->interpreters.main",
                    ],
                );
                assert_eq!(d[0], DEBUG_INTERPRETERS_HEAD, "{minor}: debug offsets");
                assert_eq!(d[2], d[1] + 8, "{minor}: interpreters.main");
            }
        }
        assert_eq!(v[1], obmalloc, "{minor}: PyInterpreterState.obmalloc");
        let v = &v[1..];
        assert_eq!(v[1], MGMT_IN_STATE, "{minor}");
        assert_eq!(
            v[2..5],
            [
                MGMT_IN_STATE + MGMT_ARENAS,
                MGMT_IN_STATE + MGMT_MAXARENAS,
                MGMT_IN_STATE + MGMT_NARENAS
            ],
            "{minor}"
        );
        assert_eq!(
            v[5..],
            [32, 36, 20, 48],
            "{minor}: pool_header, arena_object"
        );
        // 3.13 keeps a pointer to the state; 3.12 the state itself.
        let ty = Command::new("gdb")
            .args([
                "-q",
                "-batch",
                "-nx",
                "-ex",
                "ptype ((PyInterpreterState*)0)->obmalloc",
            ])
            .arg(&lib)
            .output()
            .unwrap();
        let ty = String::from_utf8_lossy(&ty.stdout).into_owned();
        assert_eq!(ty.contains(" *"), pointer, "{minor}: {ty}");
        checked.insert(m);
    }
    // Debian has 3.13; 3.12 comes from pyenv alone, and its absence is said out loud.
    assert!(checked.contains(&13), "Debian's 3.13 checked: {checked:?}");
    for (v, ..) in IN_RUNTIME {
        if !checked.contains(&v) {
            skipped(&format!(
                "CPython 3.{v}'s places against its DWARF: no build with DWARF here (pyenv's)"
            ));
        }
    }
}

/// A worker that built 1.5 M small objects and dropped 85 % of them: the exporter serves
/// the arenas' unused resident memory as the process's measured hoarding (beside glibc's),
/// and `explain` names it with CPython's own figures and the remedies that apply; Debian's
/// stripped interpreter is named as unmeasured, with why.
#[test]
fn the_exporter_serves_and_explains_what_cpythons_arenas_keep() {
    // Debian's 3.13 as it ships it: stripped, read through the _PyRuntime it exports.
    let python = &common::python::debian_of("3.13").stripped;
    let mut p = Program::start(python, &[], 5, 1_500_000, 85);
    let (h, own) = p.read_between();
    let h = h.unwrap();
    assert!(h.unused_resident_bytes >= 64 << 20, "{h:?} {own:?}");
    let pid = p.r.pid();
    let d = Daemon::start(&[
        "--scan.interval=1s",
        "--collector.processes.top-k=100000",
        "--collector.processes.deep-min-size=0",
    ]);
    let labels = format!("{{pid=\"{pid}\",comm=\"python3\"}}");
    let unused = format!("membloat_process_python_unused_resident_bytes{labels}");
    let mut t = String::new();
    d.wait_until(std::time::Duration::from_secs(60), || {
        t = d.metrics();
        value(&t, &unused).is_some()
    });
    // The program is parked in a read: what was read before is what the exporter read.
    assert_eq!(value(&t, &unused), Some(h.unused_resident_bytes as f64));
    let series = |name: &str| value(&t, &format!("membloat_process_python_{name}{labels}"));
    assert_eq!(series("arenas"), Some(own.arenas as f64));
    assert_eq!(
        series("unused_bytes"),
        Some((own.available + own.unused_pools * own.pool) as f64)
    );
    let held = format!(
        "membloat_process_runtime_held_bytes{{pid=\"{pid}\",comm=\"python3\",runtime=\"python\"}}"
    );
    assert_eq!(value(&t, &held), Some(h.unused_resident_bytes as f64));
    let measured = value(
        &t,
        &format!(
            "membloat_process_hoarded_bytes{{pid=\"{pid}\",comm=\"python3\",method=\"measured\"}}"
        ),
    )
    .expect("measured hoarding");
    assert!(measured >= h.unused_resident_bytes as f64, "{measured}");
    eprintln!(
        "Debian's CPython 3.13, 1.5 M objects, 85 % dropped: {} arenas, {:.1} MiB unused ({:.1} MiB resident) beside {:.1} MiB in use; measured hoarding {:.1} MiB",
        h.arenas,
        h.unused_bytes() as f64 / 1048576.0,
        h.unused_resident_bytes as f64 / 1048576.0,
        h.allocated_bytes as f64 / 1048576.0,
        measured / 1048576.0
    );
    drop(d);
    let f = explained(pid, "python_arenas");
    assert_eq!(f["certainty"], "measured", "{f}");
    assert_eq!(
        f["bytes"].as_f64(),
        Some(h.unused_resident_bytes as f64),
        "{f}"
    );
    let evidence = f["evidence"].as_str().unwrap();
    assert!(
        evidence.contains("CPython 3.13") && evidence.contains(&format!("{} arenas", own.arenas)),
        "{f}"
    );
    assert!(
        f["remedy"].as_str().unwrap().contains("--max-requests"),
        "{f}"
    );
    // Debian's 3.11: no symbols, so no figure; said, with the way to one.
    let q = Program::start(
        &common::python::debian_of("3.11").stripped,
        &[],
        1,
        50_000,
        50,
    );
    let f = explained(q.r.pid(), "python_arenas_unmeasured");
    assert!(
        f["evidence"].as_str().unwrap().contains("no symbol table"),
        "{f}"
    );
    assert!(f["remedy"].as_str().unwrap().contains("3.12"), "{f}");
}
