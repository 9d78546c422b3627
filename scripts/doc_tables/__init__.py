"""The tables in README.md and docs/ generated from committed results JSON (scripts/doc_tables.py
runs driver.main). core.py holds the registry and shared formats, driver.py the marker handling,
common.py and seeds.py helpers shared by several studies; every other module covers one results file
or a closely related group and registers its tables with @table beside their functions."""
