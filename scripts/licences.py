#!/usr/bin/env python3
"""Every crate the exporter's binary is built from (normal dependencies, not tests or
benchmarks) is under a licence an operator can ship: its SPDX expression must hold with
only the licences in ALLOWED. Offline: it reads `cargo tree`, which needs no network once
the crates are fetched. Exits 1 naming each crate that fails; `--self-test` checks the
expression rules first.

usage: python3 scripts/licences.py [--self-test]
"""

import re
import subprocess
import sys

# Permissive licences: no obligation beyond keeping the notice.
ALLOWED = {
    "MIT", "Apache-2.0", "BSD-2-Clause", "BSD-3-Clause", "ISC", "Zlib", "0BSD",
    "BSL-1.0", "Unlicense", "CC0-1.0", "Unicode-3.0", "Unicode-DFS-2016",
}


def holds(expr):
    """Whether an SPDX expression (AND, OR, WITH, parentheses; the old `/` for OR) is
    satisfied by the allowed licences. An empty one (no licence stated) does not hold."""
    tokens = re.findall(r"\(|\)|[A-Za-z0-9.+-]+|/", expr)
    if not tokens:
        return False
    pos = 0

    def peek():
        return tokens[pos] if pos < len(tokens) else None

    def take():
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def primary():
        t = take()
        if t == "(":
            v = any_of()
            if take() != ")":
                raise ValueError(expr)
            return v
        if peek() == "WITH":  # an exception only widens what the licence allows
            take()
            take()
        return t in ALLOWED

    def all_of():
        v = primary()
        while peek() == "AND":
            take()
            v = primary() and v
        return v

    def any_of():
        v = all_of()
        while peek() in ("OR", "/"):
            take()
            v = all_of() or v
        return v

    v = any_of()
    if pos != len(tokens):
        raise ValueError(expr)
    return v


def self_test():
    cases = {
        "MIT": True, "MIT OR Apache-2.0": True, "(MIT OR Apache-2.0) AND Unicode-3.0": True,
        "Apache-2.0 AND ISC": True, "MIT/Apache-2.0": True, "GPL-3.0-only": False,
        "MIT OR GPL-3.0-only": True, "MIT AND GPL-3.0-only": False, "": False,
        "Apache-2.0 WITH LLVM-exception": True, "(GPL-2.0-only OR LGPL-2.1-only) AND MIT": False,
    }
    for expr, want in cases.items():
        got = holds(expr)
        assert got == want, f"{expr!r}: {got}, want {want}"


def main():
    self_test()
    if "--self-test" in sys.argv:
        print("licences.py: expression rules hold")
        return
    out = subprocess.run(
        ["cargo", "tree", "--locked", "-e", "normal", "--prefix", "none",
         "--format", "{p}|{l}", "-p", "membloat_exporter"],
        check=True, capture_output=True, text=True).stdout
    crates = {}
    for line in out.splitlines():
        name, _, licence = line.replace(" (*)", "").partition("|")
        crates[name.strip()] = licence.strip()
    bad = sorted(f"{n}: {l or 'no licence stated'}" for n, l in crates.items() if not holds(l))
    if bad:
        sys.exit("licences.py: not shippable under " + ", ".join(sorted(ALLOWED)) + ":\n  " + "\n  ".join(bad))
    print(f"licences.py: {len(crates)} crates in the binary, every licence allowed")


if __name__ == "__main__":
    main()
