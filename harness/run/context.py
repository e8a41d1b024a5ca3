"""What a run of cells shares (RunContext: its results folder, settings, host, stacks, envs, known
issues, limits and run id), and what one cell runs with in place of its grid's own (Override).
Read by the runner, the record builder and the Ray dispatcher alike."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import uuid
from pathlib import Path

from harness.catalog.known_issues import KnownIssues
from harness.catalog.stacks import Stack
from harness.evidence import records, signature
from harness.run import hardware
from harness.run.envs import EnvManager
from harness.run.hardware import Host

MATRIX_DIR = Path(__file__).resolve().parents[2] / "matrix"


@dataclasses.dataclass
class RunContext:
    results_dir: Path
    records_path: Path
    settings: dict
    host: Host
    stacks: dict[str, Stack]
    envs: EnvManager
    matrix_dir: Path = MATRIX_DIR  # where matrix/deepspeed/<strategy>.json are read from
    known_issues: KnownIssues | None = None  # failed cells are tagged with the entries they match
    # matrix/models.toml, for cells with a model other than "default"
    models: dict = dataclasses.field(default_factory=dict)
    run_id: str = dataclasses.field(
        default_factory=lambda: dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]
    )
    timeout_s: float | None = None  # overrides every other time limit (compat run --timeout)
    timeouts: dict[str, float] = dataclasses.field(default_factory=dict)  # cell id -> its grid's timeout_s
    keep_workdirs: bool = False
    runner: dict = dataclasses.field(default_factory=hardware.runner_identity)
    key: signature.RunnerKey = dataclasses.field(default_factory=signature.RunnerKey.load)  # signs each record
    stop_at: float | None = None  # time.monotonic() after which no cell starts (compat run --stop-after)
    warm: object | None = (
        None  # a harness.run.warm_cells.Warm: one-process cells start as forks of a warm worker (--warm)
    )
    agreement: object | None = (
        None  # a harness.evidence.agreement.Book: each record's losses held to the reference stack's
    )

    @property
    def log_dir(self) -> Path:
        if not re.match(records.RUN_ID, self.run_id):  # it names a folder: never a path of its own
            raise ValueError(f"run id {self.run_id!r} is not of compat's shape")
        return self.results_dir / "logs" / self.run_id


@dataclasses.dataclass(frozen=True)
class Override:
    """What one cell runs with in place of the grid's own (compat preflight: a user's configs)."""

    deepspeed_config: Path | None = None  # a user's own, used as given, instead of matrix/deepspeed/
    fsdp_args: dict | None = None  # a user's own TrainingArguments fsdp / fsdp_config, as given
    # fields its record carries (compat preflight's "preflight")
    record_extra: dict = dataclasses.field(default_factory=dict)


NO_OVERRIDE = Override()
