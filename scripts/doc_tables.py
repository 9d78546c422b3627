#!/usr/bin/env python3
"""Tables in README.md and docs/ generated from committed results JSON, so a doc table cannot drift
from its data.

A generated table sits between two marker lines in a Markdown file:

    <!-- table NAME (scripts/doc_tables.py; from FILE) -->
    | ... |
    <!-- end table -->

  python3 scripts/doc_tables.py          rewrite every marked table from its JSON
  python3 scripts/doc_tables.py --check  fail (exit 1, naming doc and table) when a table differs;
                                         CTest docs_tables (label lint) runs this in CI
  python3 scripts/doc_tables.py --results DIR --print
                                         print every table whose file DIR holds (bench/results/X read as
                                         DIR/X) and touch no doc: studies/run_all.sh --quick checks
                                         its scratch results this way (a file from an older version of
                                         its study that lacks a table's part is named, not printed)

Each NAME is a function in the package scripts/doc_tables/ (a module per results file, or per group
of related ones), registered beside it with @table("NAME", FILE); this script only runs the
package's driver. To add a table: write the function in the module of its results file (a new
module for a new file: the driver imports every module of the package), put @table above it, and
the marker lines in the doc; then run this script to fill it in.
"""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ beside the package in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from doc_tables.driver import main  # noqa: E402  (the package scripts/doc_tables/, not this file)

if __name__ == "__main__":
    main(sys.argv[1:])
