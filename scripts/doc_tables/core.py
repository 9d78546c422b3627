"""The package's core: the table registry, where results files are read from, and the number formats
the tables share. Covers no results file and no doc table itself.

A table is a function that reads its results file and returns the table's lines (Markdown, without
the marker lines); `@table(NAME, FILE)` registers it under the NAME its doc's marker line gives,
beside the FILE that line names:

    <!-- table NAME (scripts/doc_tables.py; from FILE) -->

`add(NAME, FILE, make)` registers a function that needs arguments (functools.partial). driver.py
finds the markers and compares or rewrites what lies between them.
"""
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS_OVERRIDE = None  # --results DIR
TABLES = {}  # NAME -> (results file, function returning the table's lines)


def add(name, source, make):
    """Registers make() as the table NAME, made from the results file `source` (a path from the
    repository root, as its marker line names it)."""
    if name in TABLES:
        raise SystemExit("doc_tables: table %s registered twice" % name)
    TABLES[name] = (source, make)


def table(name, source):
    """Decorator: registers the function below as the table NAME made from `source`."""
    def register(make):
        add(name, source, make)
        return make
    return register


def resolve(path):
    if RESULTS_OVERRIDE and path.startswith("bench/results/"):
        return os.path.join(RESULTS_OVERRIDE, path[len("bench/results/"):])
    return os.path.join(ROOT, path)


def load(path):
    with open(resolve(path)) as f:
        return json.load(f)


def fmt(v, digits=4):
    return "%.*f" % (digits, v)


def thousands(v, digits=1):
    return "{:,.{d}f}".format(v, d=digits)


def mean_sd(xs, digits=4):
    """'mean ± sample standard deviation' of a list of numbers ('(1 seed)' for one)."""
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return "%s (1 seed)" % fmt(m, digits)
    sd = (sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) ** 0.5
    return "%s ± %s" % (fmt(m, digits), fmt(sd, digits))
