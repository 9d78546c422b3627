"""The check/write driver: finds the marked tables in README.md and docs/*.md, makes each from its
registered function and compares (--check), rewrites (default) or prints (--print) them. Covers no
results file itself; every other module of the package is imported first, which registers its tables.

A marked table:

    <!-- table NAME (scripts/doc_tables.py; from FILE) -->
    | ... |
    <!-- end table -->
"""
import importlib
import os
import pkgutil
import re
import sys

from . import core
from .core import ROOT, TABLES, resolve

OPEN = re.compile(r"^<!-- table (\S+) \(scripts/doc_tables\.py; from (\S+)\) -->$")
CLOSE = "<!-- end table -->"


def register_all():
    """Imports every module of the package, so that each registers its tables."""
    package = __name__.rsplit(".", 1)[0]
    for info in pkgutil.iter_modules([os.path.dirname(os.path.abspath(__file__))]):
        importlib.import_module("%s.%s" % (package, info.name))


def process(doc, check):
    """Makes every marked table of `doc`; returns (tables found, tables that differ) and, unless
    `check`, rewrites the doc where one differs."""
    with open(doc) as f:
        lines = f.read().split("\n")
    out, i, differ, found = [], 0, [], []
    while i < len(lines):
        m = OPEN.match(lines[i])
        out.append(lines[i])
        i += 1
        if not m:
            continue
        name, source = m.group(1), m.group(2)
        if name not in TABLES:
            raise SystemExit("%s: unknown table '%s' (known: %s)" % (doc, name, ", ".join(sorted(TABLES))))
        if source != TABLES[name][0]:
            raise SystemExit("%s: table %s says it is from %s, it is from %s" % (doc, name, source, TABLES[name][0]))
        end = i
        while end < len(lines) and lines[end] != CLOSE:
            end += 1
        if end == len(lines):
            raise SystemExit("%s: table %s has no '%s' line" % (doc, name, CLOSE))
        want = TABLES[name][1]()
        if lines[i:end] != want:
            differ.append(name)
        out.extend(want)
        found.append(name)
        i = end
    if differ and not check:
        with open(doc + ".tmp", "w") as f:
            f.write("\n".join(out))
        os.replace(doc + ".tmp", doc)
    return found, differ


def print_tables():
    """--print: every table whose results file exists (under --results DIR where given), no doc touched."""
    shown, stale = 0, []
    for name, (source, make) in sorted(TABLES.items()):
        if not os.path.exists(resolve(source)):
            continue
        try:
            lines = make()
        except KeyError as e:  # a results file from an older version of its study
            stale.append("%s: %s has no %s (written by an older version of its study? rerun it)"
                         % (name, resolve(source), e))
            continue
        print("%s (from %s):\n%s\n" % (name, resolve(source), "\n".join(lines)))
        shown += 1
    for line in stale:
        print("not made: " + line)
    print("tables OK: %d of %d tables made from %s" % (shown, len(TABLES), core.RESULTS_OVERRIDE or "bench/results"))


def main(args):
    register_all()
    check = "--check" in args
    if "--results" in args:
        core.RESULTS_OVERRIDE = os.path.abspath(args[args.index("--results") + 1])
    if "--print" in args:
        print_tables()
        return
    docs = ["README.md"] + sorted("docs/" + n for n in os.listdir(os.path.join(ROOT, "docs")) if n.endswith(".md"))
    total, bad = 0, []
    for name in docs:
        found, differ = process(os.path.join(ROOT, name), check)
        total += len(found)
        bad += ["%s: table %s" % (name, t) for t in differ]
    if check and bad:
        for b in bad:
            print("%s differs from its results JSON (run python3 scripts/doc_tables.py and commit)" % b, file=sys.stderr)
        sys.exit(1)
    print("tables OK: %d generated tables in README.md and docs/ %s their results" % (total, "match" if check else "written from"))
