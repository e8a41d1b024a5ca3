"""Support statements: what the records say works on each hardware, as the top of
COMPATIBILITY.md and the page's GPU picker show it. For each stack and each value of a feature
(precision, quantization, method, strategy), one statement:

    works    every cell with it passed (its newest record)
    note     works, with a note: some cells passed, others did not; the note names them and why
    fails    none passed; the statement names the known issue, error or reason
    unknown  no record: never shown as a failure

The model row is the model family (matrix/models.toml; "default" is the Llama of defaults.toml, the
baseline every stack runs). A cell of another model that never trained on a stack counts in that
model's row only: its failure is the model's (a transformers without the family), not its
precision's or strategy's.

Each statement has the date it was last tested and its evidence: measured here (a record `compat
run` wrote into this results folder) or measured by a named runner (a record `compat merge` took
in: a CI runner's or a contributor's, named by the runner that ran it). Statements are computed
from the rows the table shows (summary.Summary.rows()), never stored. A cell's newest record
counts once; a runner's own trouble (outcome infra) says nothing about the stack and is left out.

Measurement runs (size sweeps, fit calibration, experiments: the cells of a model with its own
[NAME.train] in matrix/models.toml, whose run is shaped to measure memory, not to check a
feature) are not support evidence: the table shows them in their own section.
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

from harness.catalog import strategies
from harness.catalog.packages import TRACKED
from harness.evidence.summary import configuration, hardware_label, known_issues_of, measured_by, versions

FEATURES = ("model", "precision", "quantization", "method", "strategy")
NOT_A_VERDICT = frozenset({"infra"})
WHY_CHARS = 160  # an error signature is cut here in a note; the row below has all of it
CELLS_NAMED = 3  # cells a note names before "and N more"


@dataclasses.dataclass(frozen=True)
class Layout:
    """What matrix/ says about the summary's shape: the models whose cells are measurement runs,
    and the order of each feature's values (matrix/axes.toml, strategies.py)."""

    measurement_models: frozenset[str] = frozenset()
    order: dict = dataclasses.field(default_factory=dict)
    # GPU architecture -> stack -> the ids of the cells compat's grids plan for it (planned())
    planned: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def load(cls, matrix_dir: Path | None) -> "Layout":
        order = {"strategy": strategies.names()}
        models: set[str] = set()
        if matrix_dir is None:
            return cls(frozenset(), order)
        try:
            axes = tomllib.loads((matrix_dir / "axes.toml").read_text(encoding="utf-8"))
            order.update(
                {f: list(axes[f]["values"]) for f in FEATURES if isinstance(axes.get(f, {}).get("values"), list)}
            )
        except (OSError, tomllib.TOMLDecodeError):
            pass  # an unreadable axes.toml only changes the order: values then sort by name
        try:
            doc = tomllib.loads((matrix_dir / "models.toml").read_text(encoding="utf-8"))
            models = {name for name, table in doc.items() if isinstance(table, dict) and table.get("train")}
        except (OSError, tomllib.TOMLDecodeError):
            pass
        return cls(frozenset(models), order, planned(matrix_dir))

    def is_measurement(self, rec: dict) -> bool:
        return rec["axes"].get("model", "default") in self.measurement_models

    def sort(self, feature: str, values) -> list:
        known = [str(v) for v in self.order.get(feature, [])]
        return sorted(values, key=lambda v: (known.index(v) if v in known else len(known), v))


def planned(matrix_dir: Path) -> dict[str, dict[str, frozenset[str]]]:
    """GPU architecture -> stack -> the ids of every cell the grids of `matrix_dir` plan for it,
    so a card's section can say what was not run. A grid that does not load adds nothing (the
    table is still rendered; `compat list` names its problem)."""
    from harness.catalog.matrix import MatrixData, grid_paths, load_matrix
    from harness.errors import MatrixError

    out: dict[str, dict[str, set[str]]] = {}
    try:
        data = MatrixData.load(matrix_dir)
        paths = grid_paths(matrix_dir)
    except (MatrixError, OSError):
        return {}
    for path in paths:
        try:
            cells = load_matrix(path, data).cells
        except (MatrixError, OSError):
            continue
        for c in cells:
            if c.hardware != "cpu":
                out.setdefault(c.hardware, {}).setdefault(c.stack, set()).add(c.id)
    return {arch: {s: frozenset(ids) for s, ids in stacks.items()} for arch, stacks in out.items()}


@dataclasses.dataclass(frozen=True)
class StackSummary:
    """One stack on one card: its versions and how its cells went, every cell counted (feature
    checks and measurement runs alike: the version axis runs at a real size), and how many of the
    cells compat's grids plan for the card's architecture it has no record of."""

    stack: str
    versions: str
    passed: int
    not_passed: dict  # outcome -> cells (fail, oom, timeout, crash, install-error)
    unsupported: int
    not_run: int  # planned cells with no record (or only a runner's own trouble, infra)
    planned: int
    last_tested: str

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def stack_summaries(recs: list[dict], arch: str, layout: Layout) -> list[StackSummary]:
    """Each stack on one card: the stacks it has records of, then those planned for its
    architecture that it has none of (every cell not run)."""
    plan = layout.planned.get(arch, {})
    mine: dict[str, list[dict]] = {}
    for r in recs:
        mine.setdefault(r["axes"]["stack"], []).append(r)
    out = []
    for stack in sorted(mine) + sorted(set(plan) - set(mine)):
        rs = [r for r in mine.get(stack, []) if r["outcome"] not in NOT_A_VERDICT]
        not_passed: dict[str, int] = {}
        for r in rs:
            if r["outcome"] not in ("pass", "unsupported"):
                not_passed[r["outcome"]] = not_passed.get(r["outcome"], 0) + 1
        newest = max(mine.get(stack, []), key=lambda r: r.get("finished_at", ""), default=None)
        planned_ids = plan.get(stack, frozenset())
        out.append(
            StackSummary(
                stack,
                _versions_text(newest) if newest else "",
                sum(r["outcome"] == "pass" for r in rs),
                dict(sorted(not_passed.items())),
                sum(r["outcome"] == "unsupported" for r in rs),
                len(planned_ids - {r["cell"] for r in rs}),
                len(planned_ids),
                newest.get("finished_at", "")[:10] if newest else "",
            )
        )
    return out


def _versions_text(rec: dict) -> str:
    return ", ".join(f"{n} {v}" for n, v in zip(TRACKED, versions(rec)) if v != "—") or "no versions recorded"


@dataclasses.dataclass
class Reason:
    """Why some cells did not pass: their outcome and the known issue, error or reason they share."""

    outcome: str
    why: str
    cells: list[str]  # their configurations (summary.configuration)
    last_tested: str
    evidence: list[str]

    def text(self, named: int = CELLS_NAMED) -> str:
        listed = ", ".join(self.cells[:named]) + (
            f" and {len(self.cells) - named} more" if len(self.cells) > named else ""
        )
        return f"{self.outcome} in {len(self.cells)} cell(s) ({listed}): {self.why}"


@dataclasses.dataclass
class Statement:
    state: str  # works | note | fails | unknown
    passed: int = 0
    total: int = 0
    reasons: list[Reason] = dataclasses.field(default_factory=list)  # for note and fails: what did not pass, and why
    disputed: list[str] = dataclasses.field(default_factory=list)  # cells whose runners disagree (see Conflicts)
    last_tested: str = ""
    evidence: list[str] = dataclasses.field(default_factory=list)
    records: list[str] = dataclasses.field(default_factory=list)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class HardwareSupport:
    label: str  # summary.hardware_label
    arch: str  # the hardware axis: cpu or sm_XY
    stacks: list[str]
    features: list[tuple[str, str]]  # (feature, value), in axis order
    grid: dict[tuple[str, str], dict[str, Statement]]  # (feature, value) -> stack -> statement
    first_tested: str
    last_tested: str
    evidence: list[str]  # every runner behind it, with its level
    stack_versions: dict[str, str]  # stack -> "torch 2.6.0, transformers ..." of its newest record
    host: str  # driver and CUDA of a GPU host; "" on a CPU
    by_stack: list[StackSummary] = dataclasses.field(default_factory=list)  # on a GPU: stack_summaries()

    def as_dict(self) -> dict:
        return {
            "by_stack": [b.as_dict() for b in self.by_stack],
            "label": self.label,
            "arch": self.arch,
            "stacks": self.stacks,
            "features": [list(f) for f in self.features],
            "grid": [[self.grid[f][s].as_dict() for s in self.stacks] for f in self.features],
            "first_tested": self.first_tested,
            "last_tested": self.last_tested,
            "evidence": self.evidence,
            "stack_versions": self.stack_versions,
            "host": self.host,
        }


def evidence_of(rec: dict) -> str:
    """The evidence level of one record."""
    return f"measured {measured_by(rec)}"


def _value(rec: dict, feature: str) -> str:
    return str(rec["axes"].get(feature, "default" if feature == "model" else None))


def newest_per_cell(rows: list[dict], layout: Layout, measurements: bool = False) -> list[dict]:
    """The newest record of each (hardware, cell) among the rows, measurement runs left out
    unless `measurements`."""
    newest: dict[tuple[str, str], dict] = {}
    for rec in rows:
        if not measurements and layout.is_measurement(rec):
            continue
        k = (hardware_label(rec), rec["cell"])
        if k not in newest or rec.get("finished_at", "") >= newest[k].get("finished_at", ""):
            newest[k] = rec
    return list(newest.values())


def _why(rec: dict, tag) -> str:
    issues = known_issues_of(rec, tag)
    if issues:
        return "known issue " + ", ".join(issues)
    err = rec.get("error") or {}
    text = " ".join(str(err.get("signature") or rec.get("reason") or "no error recorded").split())
    return text if len(text) <= WHY_CHARS else text[: WHY_CHARS - 1] + "…"


def _reasons(failed: list[dict], tag) -> list[Reason]:
    """What did not pass, grouped by outcome and reason, the most cells first."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for rec in sorted(failed, key=lambda r: r["cell"]):
        groups.setdefault((rec["outcome"], _why(rec, tag)), []).append(rec)
    return [
        Reason(
            outcome,
            why,
            [configuration(r) for r in recs],
            max(r.get("finished_at", "")[:10] for r in recs),
            sorted({evidence_of(r) for r in recs}),
        )
        for (outcome, why), recs in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    ]


def statement(recs: list[dict], tag=None, conflicted: set[str] = frozenset()) -> Statement:
    """One stack's statement for one feature value, from the newest record of each of its cells."""
    recs = [r for r in recs if r["outcome"] not in NOT_A_VERDICT]
    if not recs:
        return Statement("unknown")
    passed = [r for r in recs if r["outcome"] == "pass"]
    reasons = _reasons([r for r in recs if r["outcome"] != "pass"], tag)
    disputed = sorted(r["cell"] for r in recs if r["cell"] in conflicted)
    state = "fails" if not passed else ("note" if reasons or disputed else "works")
    newest = sorted(recs, key=lambda r: r.get("finished_at", ""), reverse=True)
    return Statement(
        state,
        len(passed),
        len(recs),
        reasons,
        disputed,
        newest[0].get("finished_at", "")[:10],
        sorted({evidence_of(r) for r in recs}),
        [r["id"] for r in newest],
    )


def by_hardware(rows: list[dict], layout: Layout, tag=None, conflicted_keys=()) -> list[HardwareSupport]:
    """Every hardware's support summary, from the rows the table shows."""
    conflicted = {k[1] for k in conflicted_keys}
    cells = newest_per_cell(rows, layout, measurements=True)
    groups: dict[str, list[dict]] = {}
    for rec in cells:
        groups.setdefault(hardware_label(rec), []).append(rec)
    return [_hardware(label, every, layout, tag, conflicted) for label, every in groups.items()]


def _hardware(label: str, every: list[dict], layout: Layout, tag, conflicted: set[str]) -> HardwareSupport:
    """One card's support: the statements from its feature checks, and on a GPU each stack's
    cells (every record, measurement runs too) against what the grids plan."""
    arch = every[0]["axes"]["hardware"]
    recs = [r for r in every if not layout.is_measurement(r)]
    by_stack = stack_summaries(every, arch, layout) if arch != "cpu" else []
    stacks = sorted({r["axes"]["stack"] for r in recs})
    features = [(f, v) for f in FEATURES for v in layout.sort(f, {_value(r, f) for r in recs})]
    trained = {(r["axes"]["stack"], _value(r, "model")) for r in recs if r["outcome"] == "pass"}
    # per stack and feature value, its cells: one pass over the records
    cells: dict[tuple[str, str, str], list[dict]] = {}
    for r in recs:
        stack, model = r["axes"]["stack"], _value(r, "model")
        counts = model == "default" or (stack, model) in trained
        for f in FEATURES:
            if f == "model" or counts:
                cells.setdefault((stack, f, _value(r, f)), []).append(r)
    grid = {(f, v): {s: statement(cells.get((s, f, v), []), tag, conflicted) for s in stacks} for f, v in features}
    dates = sorted(r.get("finished_at", "")[:10] for r in every)
    stack_versions = {}
    for s in stacks:
        stack_versions[s] = _versions_text(
            max((r for r in recs if r["axes"]["stack"] == s), key=lambda r: r.get("finished_at", ""))
        )
    hw = every[0]["fingerprint"].get("hardware") or {}
    host = ", ".join(f"{k} {hw[k]}" for k in ("driver", "cuda_driver") if hw.get(k))
    return HardwareSupport(
        label,
        arch,
        stacks,
        features,
        grid,
        dates[0],
        dates[-1],
        sorted({evidence_of(r) for r in every}),
        stack_versions,
        host.replace("cuda_driver", "CUDA driver API"),
        by_stack,
    )
