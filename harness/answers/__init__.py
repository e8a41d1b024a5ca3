"""What compat tells a user: a stack for a card (recommend), whether a fine-tune fits (fit, with
model_configs), a training config mapped to a cell and run tiny (preflight), what a log's error
means (explain), and which release broke a cell (bisect: the search; bisect_run: its probes). Each
answer says what is measured (records) and what is predicted (a named rule)."""
