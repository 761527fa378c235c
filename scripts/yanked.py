#!/usr/bin/env python3
"""No crate version in Cargo.lock has been yanked from crates.io. A yanked version is how
a crate's authors withdraw a release that is broken or unsafe; cargo keeps building a
lock file that holds one without a word. Reads each crate's entry in the crates.io sparse
index (https://index.crates.io, the registry cargo fetches from), so it needs the same
network as `cargo fetch`. Exits 1 naming each yanked version, 2 when the index cannot be
read. `--self-test` first checks the index's path rule and a version crates.io is known to
have yanked (serde 1.0.31).

This is not an advisory check: the RustSec advisory database is served from GitHub, which
the CI machine cannot reach.

usage: python3 scripts/yanked.py [--self-test]
"""

import concurrent.futures
import json
import os
import sys
import tomllib
import urllib.request

INDEX = "https://index.crates.io"
CRATES_IO = "registry+https://github.com/rust-lang/crates.io-index"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def index_path(name):
    """Where the sparse index keeps a crate: 1/a, 2/ab, 3/a/abc, se/rd/serde."""
    n = name.lower()
    if len(n) <= 2:
        return f"{len(n)}/{n}"
    if len(n) == 3:
        return f"3/{n[0]}/{n}"
    return f"{n[:2]}/{n[2:4]}/{n}"


def yanked_versions(name):
    """Every yanked version of a crate, from its index entry (one JSON object per line)."""
    with urllib.request.urlopen(f"{INDEX}/{index_path(name)}", timeout=30) as r:
        lines = r.read().decode().splitlines()
    return {e["vers"] for e in map(json.loads, filter(None, lines)) if e.get("yanked")}


def self_test():
    cases = {"a": "1/a", "ab": "2/ab", "abc": "3/a/abc", "serde": "se/rd/serde", "Inflector": "in/fl/inflector"}
    for name, want in cases.items():
        got = index_path(name)
        assert got == want, f"index_path({name!r}) = {got!r}, want {want!r}"
    serde = yanked_versions("serde")
    assert "1.0.31" in serde, "serde 1.0.31 was yanked: the index reader does not see it"
    assert "1.0.0" not in serde, "serde 1.0.0 is not yanked"


def main():
    if "--self-test" in sys.argv[1:]:
        self_test()
    with open(os.path.join(ROOT, "Cargo.lock"), "rb") as f:
        lock = tomllib.load(f)
    crates = sorted(
        {(p["name"], p["version"]) for p in lock["package"] if p.get("source") == CRATES_IO}
    )
    names = sorted({n for n, _ in crates})
    try:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            yanked = dict(zip(names, pool.map(yanked_versions, names)))
    except OSError as e:
        print(f"yanked.py: cannot read the crates.io index ({INDEX}): {e}", file=sys.stderr)
        return 2
    bad = [f"{n} {v}" for n, v in crates if v in yanked[n]]
    for b in bad:
        print(f"yanked.py: {b} is yanked on crates.io: `cargo update -p {b.split()[0]}`", file=sys.stderr)
    if bad:
        return 1
    print(f"yanked.py: none of the {len(crates)} crate versions in Cargo.lock is yanked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
