"""The catalog: the names compat uses, read from matrix/*.toml and checked there: cells and their
ids, grids, strategies, stacks and the packages they pin, the GPU database, the known-issue base,
and the outcome vocabulary. It reads data files (harness/tomldata.py) and knows nothing of records,
runs, pages or answers."""
