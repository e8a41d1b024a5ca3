"""A cell from plan to record: which cells this host runs (runner, schedule), its stack's
environment (envs, wheelhouse, deepspeed_ops), its process started, guarded and ended (launch,
guard, warm_cells, classify), the host and its memory (hardware, memory), its record written
(cellrecord, context), and a run's progress, resumption, JUnit file and Ray dispatch. It never
imports torch: the workloads (harness/workloads/) run inside the stack's env."""
