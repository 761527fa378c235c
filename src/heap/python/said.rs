//! What the CPython reader says (`shape::Says`): its families, the finding its unused
//! arenas make, and what gives them back.

use super::{Python, PythonHeap, Unmeasured};
use crate::family::{metric, Metric};
use crate::heap::shape::{NoFigure, Says};
use crate::heap::words::{Gap, Remedy, Said, Samples, Size, Subject, EXPORTER, PROCESSES};

pub(crate) const PYTHON_READS_TOTAL: Metric = metric!(membloat "python_reads", Counter, None, ["outcome"], EXPORTER, "the exporter",
        "Reads of deep-read CPython processes' small-object arenas (pymalloc's state, found through the binary's or libpython's symbols, and each pool's header) by outcome: measured; stripped (3.11 and older without a symbol table: Debian's python3.11); unknown_version (a CPython other than 3.8 to 3.13); free_threaded (python3.13t: mimalloc, not read); unknown_layout (what was read does not fit the version's layout: another build configuration, or a crafted table); unreadable (no ptrace access, or libpython could not be opened); moving (the arenas changed under two reads, tried again at the next scans); budget (the read ran out of its time or pages: backed off); implausible (more resident unused memory than the process has resident: not believed); remote_file (the interpreter lies on a FUSE or network mount or on one no mountinfo lists: never read).");
pub(crate) const PROCESS_PYTHON_ARENAS: Metric = metric!(membloat "process_python_arenas", Gauge, None, ["pid", "comm"], PROCESSES, "/proc/PID/mem (pymalloc's arenas and pool headers), pagemap, the binary's symbols",
        "Arenas CPython's small-object allocator holds (sys._debugmallocstats' \"# arenas allocated current\"): 256 KiB each to 3.9, 1 MiB from 3.10; an arena is given back only when its last object is freed.");
pub(crate) const PROCESS_PYTHON_ALLOCATED_BYTES: Metric = metric!(membloat "process_python_allocated", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/mem (pymalloc's arenas and pool headers), pagemap, the binary's symbols",
        "Bytes of the blocks in use in CPython's arenas (\"# bytes in allocated blocks\"): its small objects.");
pub(crate) const PROCESS_PYTHON_UNUSED_BYTES: Metric = metric!(membloat "process_python_unused", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/mem (pymalloc's arenas and pool headers), pagemap, the binary's symbols",
        "What CPython's arenas hold unused: free blocks in pools in use (\"# bytes in available blocks\") plus pools with no block in use (\"unused pools\" times the pool size), resident or not.");
pub(crate) const PROCESS_PYTHON_UNUSED_RESIDENT_BYTES: Metric = metric!(membloat "process_python_unused_resident", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/mem (pymalloc's arenas and pool headers), pagemap, the binary's symbols",
        "Of CPython's unused arena memory, what is in resident pages (pagemap): kept until every object of its arena is freed, the process's measured hoarding beside glibc's.");
pub(crate) const PROCESS_PYTHON_UNMEASURED: Metric = metric!(membloat "process_python_unmeasured", Gauge, None, ["pid", "comm", "reason"], PROCESSES, "/proc/PID/exe or its libpython, /proc/PID/mem",
        "1 for a CPython process whose arenas could not be read, by reason (as membloat_python_reads_total's outcomes): stripped, unknown_version, free_threaded, unknown_layout, unreadable, moving, budget, implausible, remote_file. Such a process has no measured hoarding figure.");

impl Says for Python {
    const READS: Metric = PYTHON_READS_TOTAL;
    const ROWS: &'static [Metric] = &[
        PROCESS_PYTHON_ARENAS,
        PROCESS_PYTHON_ALLOCATED_BYTES,
        PROCESS_PYTHON_UNUSED_BYTES,
        PROCESS_PYTHON_UNUSED_RESIDENT_BYTES,
        PROCESS_PYTHON_UNMEASURED,
    ];

    fn samples(read: &Result<Box<PythonHeap>, Unmeasured>, out: &mut Samples) {
        let py = match read {
            Ok(py) => py,
            Err(why) => return out.reason(&PROCESS_PYTHON_UNMEASURED, Some(why.as_str())),
        };
        out.put(&PROCESS_PYTHON_ARENAS, Some(py.arenas));
        out.put(&PROCESS_PYTHON_ALLOCATED_BYTES, Some(py.allocated_bytes));
        out.put(&PROCESS_PYTHON_UNUSED_BYTES, Some(py.unused_bytes()));
        out.put(
            &PROCESS_PYTHON_UNUSED_RESIDENT_BYTES,
            Some(py.unused_resident_bytes),
        );
    }

    fn said(py: &Box<PythonHeap>, held: u64, _: Subject) -> Said {
        Said {
            kind: "python_arenas",
            evidence: format!(
                "CPython {}'s allocator keeps {} unused in RAM in its {} arenas ({} in all): {} free blocks in pools in use, {} pools with none, beside {} in use (its own figures, as sys._debugmallocstats prints them)",
                py.version,
                Size(held),
                py.arenas,
                Size(py.arenas_bytes()),
                Size(py.available_bytes),
                py.unused_pools,
                Size(py.allocated_bytes),
            ),
            remedy: Some(python_arenas()),
        }
    }

    fn gap(why: Option<Unmeasured>) -> Option<Gap> {
        let (evidence, fix) = python_unmeasured(why?);
        Some(Gap {
            kind: "python_arenas_unmeasured",
            evidence,
            fix,
        })
    }
}

/// pymalloc gives an arena back only once its last object is freed, and nothing outside
/// the process can make it: the remedies are the program's shape and its lifetime.
fn python_arenas() -> Remedy {
    Remedy::advice(
        "pymalloc gives an arena back only when its last object is freed, and no call from outside releases the rest (malloc_trim never sees arenas): recycle the worker after a number of requests (gunicorn --max-requests 1000 --max-requests-jitter 100, celery --max-tasks-per-child, uwsgi --max-requests), call gc.freeze() in a pre-fork server's parent before it forks (its objects stay out of the children's collections and their pages shared), and keep fewer long-lived small objects made at once (load in batches; __slots__, array or numpy in place of many small objects)",
        Some("a recycled worker pays its start-up again; its warm caches go with it"),
    )
}

/// Why a CPython process's arenas were not read, and what would let them be.
fn python_unmeasured(why: Unmeasured) -> (&'static str, &'static str) {
    let (evidence, fix) = match why {
        Unmeasured::Stripped => (
            "the interpreter has no symbol table, and before 3.12 the allocator's state is in static variables only it names (Debian's python3.11 is stripped)",
            "run a CPython 3.12 or later (its state is found through _PyRuntime, which stripping keeps), or an interpreter built with its symbols",
        ),
        Unmeasured::UnknownVersion => (
            "a CPython whose allocator layout this exporter does not know (it reads 3.8 to 3.13)",
            "tell the exporter's maintainers the version (python3 -VV)",
        ),
        Unmeasured::FreeThreaded => (
            "a free-threaded CPython (3.13t): its objects are mimalloc's, which this exporter does not read",
            "nothing to do on the program; its memory shows in RSS only",
        ),
        Unmeasured::UnknownLayout => (
            "what was read of the interpreter's allocator does not fit its version's layout (another build configuration)",
            "tell the exporter's maintainers how the interpreter was built (python3 -VV, sysconfig.get_config_var('CONFIG_ARGS'))",
        ),
        Unmeasured::Unreadable => (
            "the interpreter's memory or library could not be read, so its arenas were not measured",
            "grant the exporter CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH (see the README's Privileges)",
        ),
        Unmeasured::Moving => (
            "the interpreter's arenas changed under two reads",
            "wait for the next deep read",
        ),
        Unmeasured::Budget => (
            "reading the interpreter's arenas took more than a reader may spend on one process",
            "nothing to do on the program; the exporter tries again after a back-off (membloat_python_reads_total{outcome=\"budget\"} counts these)",
        ),
        Unmeasured::Implausible => (
            "the arenas read held more unused memory in RAM than the process has resident, so the figure was not believed",
            "look at the process: its memory does not hold CPython's arenas as its binary describes them",
        ),
        Unmeasured::RemoteFile => (
            "the interpreter lies on a FUSE or network mount, which the exporter never reads",
            "nothing to do: a file server that stops answering would hold the exporter",
        ),
    };
    (evidence, fix)
}
