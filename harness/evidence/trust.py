"""What a record must be beyond its shape before compat stores it or reads it as evidence.

The schema (harness/evidence/record.schema.json) says what type and size each field is. A record that
passes it can still claim what never ran: a stack or architecture compat does not have, a cell id
that is not its own axes, an sm_90 measurement made by a CPU-only torch, a date in the future (to
stay "newest" for ever) or in another offset than the UTC compat writes (read as text, a +23:59
offset is a day ahead), a runner named like a label compat writes ("... (merged)"), known issues
that are not in the base. Who made a record is not this module's: a runner is known by its key
(signature.py), and merge.py holds a record's name and signature to the folder's. `Rules.check(record)` names the
first such problem, or None; `compat merge` refuses the record with it (file:line: why), and
every reader of a results folder (`table`, `recommend`, `fit`, `--resume`) skips and reports a
stored line that fails, as it does a corrupt one. Nothing here imports torch.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import re
from pathlib import Path

from harness.catalog.cell import AXES, Cell

FUTURE_SLACK = dt.timedelta(hours=1)  # clocks differ between runners by minutes; an hour ahead is not a clock
UTC = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?\+00:00$")  # as compat writes
# labels compat writes beside runner names (summary.runner_name, identity): a runner may not call itself one
RESERVED_NAME = re.compile(r"(\(merged\)\s*$)|(^from )|(^unnamed runner$)", re.IGNORECASE)
RAN = {"pass", "fail", "oom", "timeout", "crash", "infra"}  # outcomes of a cell that was started


@dataclasses.dataclass(frozen=True)
class Rules:
    values: dict[str, tuple]  # axis -> the values matrix/axes.toml (and stacks, models) allow
    hardware: str  # the hardware axis pattern
    known_issues: frozenset[str] | None  # ids of the known-issue base; None: not checked
    now: dt.datetime
    cards: dict[str, str] = dataclasses.field(default_factory=dict)  # a card's name, normalized -> its sm_XY
    memo: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)  # (cell, axes) -> _cell's answer

    @classmethod
    def load(cls, matrix_dir: Path, now: dt.datetime | None = None) -> "Rules":
        from harness.catalog.matrix import MatrixData

        data = MatrixData.load(matrix_dir)
        values = {
            axis: tuple(data.allowed(axis))
            for axis in (*AXES, "ranks", "grad_ckpt", "expandable_segments", "model")
            if data.allowed(axis) is not None
        }
        issues = None
        if (matrix_dir / "known_issues.toml").exists():
            from harness.catalog.known_issues import ids_in

            issues = ids_in(matrix_dir)  # the ids only: checking the base is its own loader's work
        cards = {}
        if (matrix_dir / "gpus.toml").exists():
            from harness.catalog import gpus

            for gpu in gpus.GpuDb.load(matrix_dir).gpus:
                cards.update({gpus.normalize(n): gpu.arch for n in (gpu.key, gpu.name, *gpu.aliases)})
        return cls(values, data.axes["hardware"]["pattern"], issues, now or dt.datetime.now(dt.timezone.utc), cards)

    def check(self, rec: dict) -> str | None:
        """Why `rec` (a record the schema accepts) is not evidence compat can use, or None."""
        memo_key = (rec["cell"], tuple(sorted((k, repr(v)) for k, v in rec["axes"].items())))
        problem = self.memo.get(memo_key, self)  # a results folder is the same cells again and again
        if problem is self:
            problem = self._cell(rec["cell"], rec["axes"])
            if len(self.memo) < 65536:
                self.memo[memo_key] = problem
        if problem:
            return problem
        problem = self._dates(rec) or self._runner(rec)
        if problem:
            return problem
        if self.known_issues is not None:
            unknown = [k for k in rec.get("known_issues") or [] if k not in self.known_issues]
            if unknown:
                return f"known issue {unknown[0]!r} is not in matrix/known_issues.toml"
        if rec["outcome"] == "pass":
            lo = rec.get("losses") or {}
            if not all(isinstance(lo.get(k), (int, float)) for k in ("first", "last", "eval_before", "eval_after")):
                return (
                    "a pass without its losses (first, last, eval_before, eval_after): it says it trained and "
                    "shows nothing"
                )
        if rec["axes"]["hardware"] != "cpu":
            return self._gpu_evidence(rec)
        return None

    def _dates(self, rec: dict) -> str | None:
        """Why a record's dates are not when it ran: not a date, not in UTC as compat writes them
        (a +23:59 offset read as text is a day ahead), in the future, or started after it ended."""
        for field in ("started_at", "finished_at"):
            text = rec.get(field)
            if text is None and field == "started_at":
                continue
            if _time(text) is None:
                return f"{field} {str(text)[:40]!r} is not a date and time"
            if not UTC.match(text):
                return f"{field} {text[:40]!r} is not in UTC (+00:00), as compat writes it"
        when = _time(rec["finished_at"])
        if when > self.now + FUTURE_SLACK:
            return f"finished_at {rec['finished_at'][:25]} is in the future: a record cannot be newer than now"
        if _time(rec.get("started_at") or rec["finished_at"]) > when:
            return "started_at is after finished_at"
        return None

    @staticmethod
    def _runner(rec: dict) -> str | None:
        name = (rec.get("runner") or {}).get("name")
        if name and RESERVED_NAME.search(name):
            return f"runner name {name[:60]!r} is a label compat writes (merged, from FILE, unnamed runner), not a name"
        return None

    @functools.cached_property
    def identity(self) -> str:
        """What these rules are, for a cache of what they judged (lastgood's reports): every value
        and name they allow, to the day."""
        return repr(
            (
                sorted((k, repr(v)) for k, v in self.values.items()),
                self.hardware,
                sorted(self.known_issues or ()),
                sorted(self.cards.items()),
                self.now.date().isoformat(),
                Path(__file__).read_bytes(),
            )
        )

    @functools.cached_property
    def _allowed(self) -> dict[str, frozenset]:
        """axis -> the (type, value) pairs it allows: one lookup a record, not a walk of the list."""
        return {axis: frozenset((type(a), a) for a in allowed) for axis, allowed in self.values.items()}

    def _cell(self, cell: str, axes: dict) -> str | None:
        """Why axes are not this compat's, or not the cell id's, or None."""
        for axis, allowed in self._allowed.items():
            value = axes.get(
                axis, Cell.__dataclass_fields__[axis].default if axis in Cell.__dataclass_fields__ else None
            )
            try:
                known = (type(value), value) in allowed  # of the same type: True is not 1
            except TypeError:  # a list or a table where a value belongs
                known = False
            if not known:
                return (
                    f"axes.{axis} {str(value)[:60]!r} is not one of this compat's (matrix/axes.toml, "
                    "stacks.toml, models.toml)"
                )
        if not re.match(self.hardware, str(axes["hardware"])):
            return f"axes.hardware {str(axes['hardware'])[:60]!r} is not cpu or sm_XY"
        try:
            own = Cell(**{k: axes[k] for k in Cell.__dataclass_fields__ if k in axes}).id
        except (TypeError, ValueError) as exc:
            return f"axes do not make a cell: {exc}"[:200]
        if own != cell:
            return f"cell {cell!r} is not the id of its own axes ({own!r})"
        return None

    def _gpu_evidence(self, rec: dict) -> str | None:
        """A GPU cell's record names cards that are what they say (a card the GPU database knows has
        its compute capability); one that ran, or failed to install, names a card of the cell's
        architecture; one that ran carries a CUDA build of torch and, for a pass, a CUDA device's
        memory per card. (An `unsupported` record may come from a host without the card: that is
        what it says.)"""
        arch = rec["axes"]["hardware"]
        fp = rec.get("fingerprint") or {}
        cards = [g for g in (fp.get("hardware") or {}).get("gpus") or [] if isinstance(g, dict)]
        for card in cards:
            problem = self._card(str(card.get("name") or ""), card.get("compute_capability"), card.get("arch"))
            if problem:
                return problem
        if rec["outcome"] == "unsupported":
            return None
        if not any(g.get("arch") == arch or _arch(g.get("compute_capability")) == arch for g in cards):
            return f"a {arch} cell whose fingerprint names no {arch} card"
        if rec["outcome"] not in RAN:
            return None
        torch = fp.get("torch") or {}
        if not torch.get("cuda") or "+cpu" in str(torch.get("version") or ""):
            return f"a {arch} cell that ran on a torch without CUDA ({torch.get('version')})"
        if rec["outcome"] == "pass" and not any(
            str(m.get("device", "")).startswith("cuda:")
            and isinstance(m.get("torch_max_allocated_bytes"), (int, float))
            for m in rec.get("memory") or []
        ):
            return f"a {arch} pass with no CUDA memory figures per card"
        return None

    def _card(self, name: str, cc, arch) -> str | None:
        """Why a card of a fingerprint is not what it says, or None: its compute capability is not its
        arch, or not the one matrix/gpus.toml gives a card of its name (the longest name there that
        its own starts with: "NVIDIA H100 80GB HBM3" is an H100)."""
        key = ("card", name, str(cc), str(arch))
        if key not in self.memo:
            from harness.catalog.gpus import normalize

            said = _arch(cc)
            problem = None
            if arch is not None and said is not None and arch != said:
                problem = f"card {name[:60]!r} is compute capability {cc}, not {arch}"
            else:
                wanted = normalize(name)
                known = max((n for n in self.cards if wanted.startswith(n)), key=len, default=None)
                if known and (said or arch) and self.cards[known] != (said or arch):
                    problem = (
                        f"card {name[:60]!r} is {self.cards[known]} (matrix/gpus.toml), not {said or arch}: the "
                        "fingerprint is not of the card it names"
                    )
            if len(self.memo) >= 65536:  # a file of as many card names as lines: not all kept
                return problem
            self.memo[key] = problem
        return self.memo[key]


def _arch(cc) -> str | None:
    m = re.fullmatch(r"(\d+)\.(\d)", str(cc or ""))
    return f"sm_{m[1]}{m[2]}" if m else None


def _time(text: str) -> dt.datetime | None:
    try:
        t = dt.datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)
