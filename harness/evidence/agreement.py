"""Losses agree across stacks (issue 25).

A cell passes when its run trained; that does not say it trained as the other stacks train it. Every
stack starts a cell from the same initial weights (workloads/initial.py, hashed into the record)
and sees the same batches in the same order (workloads/finetune.make_data), so on one machine with
one torch, the same cell's losses differ from stack to stack only where the libraries compute
differently. Each record that trained is held to the reference stack's record of the same cell
(matrix/agreement.toml): its eval loss before training and its first step's loss within the
`first` tolerance of the reference's, every later step within the `band`. One that leaves it is
flagged `trains_differently`, with the step where the losses part (0: the eval loss before
training, the same weights computed differently; 1: the same weights and batch gave another
training loss; later: the updates differed), and the table lists it.

The record's `agreement` says which: `reference` (it is the reference's record), `agrees`,
`differs`, or `not-compared` with why (no reference record of the cell on this hardware and torch,
other initial weights, another number of steps). A reference is looked for among the records of
this run first (a run starts its reference stack's cells first: runner.recorder), then in
the results folder (the newest of the cell's).
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

from harness.errors import MatrixError
from harness.evidence import records
from harness.tomldata import Key, Table, check, kind, load_data

FLAG = "trains_differently"
PRECISIONS = ("fp32", "bf16", "fp16")

_NUMBER = kind(
    lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1,
    "{r} must be a number from 0 up to 1",
)
_TOLERANCE = Table({name: Key.of(_NUMBER, required=True) for name in ("abs", "first_rel", "band_rel")})


@dataclasses.dataclass(frozen=True)
class Tolerance:
    abs: float
    first_rel: float
    band_rel: float

    def allowed(self, reference: float, first: bool) -> float:
        return self.abs + (self.first_rel if first else self.band_rel) * abs(reference)


@dataclasses.dataclass(frozen=True)
class Config:
    """matrix/agreement.toml: the reference stack and the tolerance of each precision."""

    reference: str
    tolerance: dict[str, Tolerance]

    @classmethod
    def load(cls, path: Path, stacks) -> "Config":
        doc, where = load_data(path, ("agreement", "tolerance"))
        problems: list[str] = []
        head = doc.get("agreement", {})
        reference = head.get("reference")
        check(
            head,
            Table(
                {
                    "reference": Key.of(
                        kind(lambda v: v in stacks, "{v} is not a stack of matrix/stacks.toml"), required=True
                    )
                }
            ),
            lambda k, m: where(k, f"[agreement].{k}", m, table="agreement"),
            problems,
            lambda m: where("agreement", "[agreement]", m),
        )
        given = doc.get("tolerance", {})
        for name in PRECISIONS:
            if name not in given:
                problems.append(
                    where("tolerance", f"[tolerance.{name}]", "missing: every precision needs its tolerance")
                )
            elif not isinstance(given[name], dict):
                problems.append(where(name, f"tolerance.{name}", "must be a table"))
            else:
                check(
                    given[name],
                    _TOLERANCE,
                    lambda k, m, n=name: where(k, f"[tolerance.{n}].{k}", m, table=f"tolerance.{n}"),
                    problems,
                    lambda m, n=name: where(n, f"[tolerance.{n}]", m, table=f"tolerance.{n}"),
                )
        for name in sorted(set(given) - set(PRECISIONS)):
            problems.append(
                where(name, f"[tolerance.{name}]", f"unknown precision; the precisions are {', '.join(PRECISIONS)}")
            )
        if problems:
            raise MatrixError(problems)
        return cls(reference, {name: Tolerance(**given[name]) for name in PRECISIONS})


def comparable(record: dict) -> str:
    """What two records must share to be compared: the cell but its stack, the run's settings but
    its time limit, the hardware and the torch build."""
    fp = record.get("fingerprint") or {}
    hw = fp.get("hardware") or {}
    return json.dumps(
        [
            {k: v for k, v in (record.get("axes") or {}).items() if k != "stack"},
            {k: v for k, v in (record.get("settings") or {}).items() if k != "timeout_s"},
            [hw.get("cpu"), hw.get("cpu_flags"), [g.get("name") for g in hw.get("gpus") or []]],
            (fp.get("torch") or {}).get("version"),
        ],
        sort_keys=True,
    )


def curve(record: dict) -> list[float] | None:
    """The eval loss before training, then each step's loss; None where the run did not train."""
    losses = record.get("losses") or {}
    steps = losses.get("steps")
    if not steps:
        return None
    values = [losses.get("eval_before"), *steps]
    if any(not isinstance(x, (int, float)) or not math.isfinite(x) for x in values):
        return None
    return values


def compare(record: dict, reference: dict, tolerance: Tolerance) -> dict:
    """The agreement of a record with its reference's record (both have a curve)."""
    mine, theirs = curve(record), curve(reference)
    out = {"reference_record": reference["id"], "reference_outcome": reference["outcome"]}
    init, ref_init = (record.get("agreement") or {}).get("init"), (reference.get("agreement") or {}).get("init")
    if not init or not ref_init:
        return {
            **out,
            "status": "not-compared",
            "why": "the initial weights of "
            + ("this run" if not init else "the reference's run")
            + " are not known (a record from before compat hashed them)",
        }
    if init != ref_init:
        return {
            **out,
            "status": "not-compared",
            "why": "the two runs started from different initial weights (agreement.init differs)",
        }
    if len(mine) != len(theirs):
        return {
            **out,
            "status": "not-compared",
            "why": f"{len(mine) - 1} logged steps here, {len(theirs) - 1} in the reference's run",
        }
    worst = 0.0
    for step, (a, b) in enumerate(zip(mine, theirs)):
        allowed = tolerance.allowed(b, first=step <= 1)
        gap = abs(a - b)
        if gap > allowed:
            return {
                **out,
                "status": "differs",
                "parted_at_step": step,
                "loss": a,
                "reference_loss": b,
                "allowed": allowed,
            }
        if allowed:
            worst = max(worst, gap / allowed)
    return {**out, "status": "agrees", "worst": round(worst, 4)}


class Book:
    """The references a run's records are held to: its own records of the reference stack, and
    the results folder's (read when first needed)."""

    def __init__(self, config: Config, results: Path | None = None, check=None, key=None):
        """`check(record)`: why a stored record is not evidence (trust.Rules.check), as every
        reader of a results folder skips such a line; None: none is skipped. `key`
        (signature.RunnerKey): a stored record is a reference only if this runner made it here, signed
        by its key (another runner's record, merged in, never steers this one's verdicts: issue 41,
        finding 2); None: any stored record."""
        self.config, self.results, self.check, self.key = config, results, check, key
        self.ran: dict[str, dict] = {}  # comparable(record) -> this run's record of the reference stack
        self.stored: dict[str, dict] | None = None if results is not None else {}  # the same, of the results folder

    def judge(self, record: dict) -> None:
        """Put `agreement` in a record that trained (and its flag where it differs)."""
        if curve(record) is None:
            return
        checks = record.get("checks")
        init = checks.get("init") if isinstance(checks, dict) else None  # a contributed record: any shape
        record["agreement"] = {"reference": self.config.reference, **({"init": init} if init else {})}
        key = comparable(record)
        if record["axes"].get("stack") == self.config.reference:
            record["agreement"]["status"] = "reference"
            self.ran[key] = record
            return
        reference = self.ran.get(key) or self._stored().get(key)
        precision = record["axes"].get("precision")
        if reference is None:
            why = f"no record of this cell on the {self.config.reference} stack on this hardware and torch"
            record["agreement"].update(status="not-compared", why=why)
        elif precision not in self.config.tolerance:
            record["agreement"].update(status="not-compared", why=f"no tolerance for precision {precision!r}")
        else:
            record["agreement"].update(compare(record, reference, self.config.tolerance[precision]))
        if record["agreement"]["status"] == "differs" and FLAG not in record.get("flags", []):
            record["flags"] = [*record.get("flags", []), FLAG]

    def _stored(self) -> dict[str, dict]:
        """The results folder's newest record of each cell on the reference stack, read once."""
        if self.stored is None:
            self.stored = {}
            recs, _ = records.read_records(records.record_files(self.results), self.check)
            for rec in sorted(recs, key=lambda r: r.get("finished_at") or ""):
                if rec["axes"].get("stack") != self.config.reference or curve(rec) is None:
                    continue
                if self.key is None or self.key.made(rec):
                    self.stored[comparable(rec)] = rec
        return self.stored


class Rejudge:
    """compat merge's verdicts: a contributed record's `agreement` is judged again here from the
    losses, never taken as claimed (issue 41, finding 5: three times the reference's losses were
    stored as "agrees"). Each record is held to the reference stack's record of the same cell that
    the same runner (its key, else its name) sent in the same merge; a run writes its reference
    stack's cells first (runner.recorder), so they come first in its file."""

    def __init__(self, config: Config):
        self.config = config
        self.books: dict[str, Book] = {}  # runner -> the references its records of this merge give

    def __call__(self, record: dict) -> dict:
        """The record with compat's verdict in place of the one it came with."""
        record = dict(record)
        record.pop("agreement", None)
        if FLAG in (record.get("flags") or []):
            record["flags"] = [f for f in record["flags"] if f != FLAG]
        runner = record.get("runner") or {}
        who = runner.get("key") or f"name:{runner.get('name')}"
        self.books.setdefault(who, Book(self.config)).judge(record)
        return record


def mark(record: dict) -> str:
    """What a table row adds to its outcome: where its losses part from the reference's."""
    a = record.get("agreement") or {}
    if a.get("status") != "differs":
        return ""
    return f" ≠ trains differently from {a.get('reference')} (step {a.get('parted_at_step')})"


def table_lines(rows: list[dict], label) -> list[str]:
    """COMPATIBILITY.md's "Losses across stacks" section: per hardware and stack, how many cells
    agree with the reference stack's, differ or were not compared, then each cell that differs.
    `label(record)`: the hardware a row belongs to."""
    judged = [r for r in rows if (r.get("agreement") or {}).get("status") in ("agrees", "differs", "not-compared")]
    if not judged:
        return []
    out = [
        "",
        "## Losses across stacks",
        "",
        "Each stack's losses against the reference stack's same cell (matrix/agreement.toml), run on the same "
        "hardware with the same torch, from the same initial weights (their hash is in each record) and the same "
        "batches: the eval loss before training and the first step within the `first` tolerance, every later "
        "step within the `band`. **Measured**: each row counts the newest records. A cell that differs still "
        "passed or failed on its own checks; it trained differently, from the step given (0: the eval loss "
        "before training; 1: the same weights and batch gave another loss; later: the updates differed).",
        "",
        "| hardware | stack | against | agree | differ | not compared | parts at step |",
        "|---|---|---|---|---|---|---|",
    ]
    counts: dict[tuple[str, str], dict] = {}
    for r in judged:
        a = r["agreement"]
        c = counts.setdefault(
            (label(r), r["axes"]["stack"]),
            {"ref": a.get("reference"), "agrees": 0, "differs": 0, "not-compared": 0, "steps": {}},
        )
        c[a["status"]] += 1
        if a["status"] == "differs":
            c["steps"][a.get("parted_at_step")] = c["steps"].get(a.get("parted_at_step"), 0) + 1
    for (hw, stack), c in sorted(counts.items()):
        steps = ", ".join(
            f"{s} ({n} cell{'s' if n != 1 else ''})" for s, n in sorted(c["steps"].items(), key=lambda kv: str(kv[0]))
        )
        out.append(
            f"| {hw} | `{stack}` | `{c['ref']}` | {c['agrees']} | {c['differs']} | {c['not-compared']} | {steps} |"
        )
    differ = sorted((r for r in judged if r["agreement"]["status"] == "differs"), key=lambda r: (label(r), r["cell"]))
    if differ:
        out += [
            "",
            "Cells that train differently:",
            "",
            "| hardware | cell | parts at step | its loss | the reference's | allowed gap | record | reference "
            "record | date |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in differ:
            a = r["agreement"]
            out.append(
                f"| {label(r)} | `{r['cell']}` | {a.get('parted_at_step')} | {_num(a.get('loss'))} | "
                f"{_num(a.get('reference_loss'))} | "
                f"{_num(a.get('allowed'))} | `{r['id'][:12]}` | `{str(a.get('reference_record'))[:12]}` | "
                f"{r.get('finished_at', '')[:10]} |"
            )
    return out


def _num(x) -> str:
    return "—" if not isinstance(x, (int, float)) else f"{x:.5g}"
