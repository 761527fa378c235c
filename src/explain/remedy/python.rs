//! What to do about the arenas CPython's allocator keeps, and why they could not be read.

use super::advice::Advice;
use crate::heap::python::Unmeasured;

/// pymalloc gives an arena back only once its last object is freed, and nothing outside
/// the process can make it: the remedies are the program's shape and its lifetime.
pub fn python_arenas() -> Advice {
    (
        "pymalloc gives an arena back only when its last object is freed, and no call from outside releases the rest (malloc_trim never sees arenas): recycle the worker after a number of requests (gunicorn --max-requests 1000 --max-requests-jitter 100, celery --max-tasks-per-child, uwsgi --max-requests), call gc.freeze() in a pre-fork server's parent before it forks (its objects stay out of the children's collections and their pages shared), and keep fewer long-lived small objects made at once (load in batches; __slots__, array or numpy in place of many small objects)".into(),
        Some("a recycled worker pays its start-up again; its warm caches go with it"),
    )
}

/// Why a CPython process's arenas were not read, and what would let them be.
pub fn python_unmeasured(why: Unmeasured) -> (String, Advice) {
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
    (evidence.into(), (fix.into(), None))
}
