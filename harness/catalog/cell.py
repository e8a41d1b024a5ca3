"""A cell: one point of the grid, an immutable value with a canonical id that parses back.

Grammar (every field is lower-case letters, digits, '_' or '.'; fields are joined by '-'):

    cell-id  := hardware "-" stack "-" precision "-" quantization "-" method "-" strategy
                [ "-" options ]
    options  := option ( "+" option )*        in this order, each at most once:
    option   := "gc"                          gradient checkpointing on
              | "es"                          PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
              | "r" N                         N ranks (processes), when N > 1
              | "m_" NAME                     the tiny model NAME of matrix/models.toml, when
                                              not the matrix's default model

    cpu-local-bf16-none-lora-single-gc        parses to Cell(hardware="cpu", stack="local", ...)

`str(Cell.parse(s)) == s` for every canonical id; a non-canonical spelling (options out of
order, "r1") is rejected rather than silently normalised, so an id names exactly one cell.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import re

from harness.errors import UsageError

TOKEN = re.compile(r"^[a-z0-9_.]+$")
AXES = ("hardware", "stack", "precision", "quantization", "method", "strategy")
OPTIONS = ("grad_ckpt", "expandable_segments", "ranks", "model")
DEFAULT_MODEL = "default"


@dataclasses.dataclass(frozen=True, order=True)
class Cell:
    hardware: str
    stack: str
    precision: str
    quantization: str
    method: str
    strategy: str
    grad_ckpt: bool = False
    ranks: int = 1
    expandable_segments: bool = False
    model: str = DEFAULT_MODEL

    def __post_init__(self) -> None:
        for axis in AXES:
            value = getattr(self, axis)
            if not isinstance(value, str) or not TOKEN.match(value):
                raise ValueError(f"{axis} {value!r} is not a valid id field (lower-case letters, digits, '_' and '.')")
        for option in ("grad_ckpt", "expandable_segments"):
            if not isinstance(getattr(self, option), bool):
                raise ValueError(f"{option} must be true or false, not {getattr(self, option)!r}")
        if not isinstance(self.ranks, int) or isinstance(self.ranks, bool) or self.ranks < 1:
            raise ValueError(f"ranks must be a whole number >= 1, not {self.ranks!r}")
        if not isinstance(self.model, str) or not TOKEN.match(self.model):
            raise ValueError(f"model {self.model!r} is not a valid id field (lower-case letters, digits, '_' and '.')")

    @property
    def id(self) -> str:
        fields = [getattr(self, axis) for axis in AXES]
        options = (
            (["gc"] if self.grad_ckpt else [])
            + (["es"] if self.expandable_segments else [])
            + ([f"r{self.ranks}"] if self.ranks > 1 else [])
            + ([f"m_{self.model}"] if self.model != DEFAULT_MODEL else [])
        )
        if options:
            fields.append("+".join(options))
        return "-".join(fields)

    def __str__(self) -> str:
        return self.id

    def axes(self) -> dict:
        """The cell as a plain mapping, as stored in a record's `axes`."""
        return dataclasses.asdict(self)

    @classmethod
    def parse(cls, text: str) -> "Cell":
        parts = text.split("-")
        if len(parts) not in (len(AXES), len(AXES) + 1):
            raise UsageError(
                f"cell id {text!r} has {len(parts)} '-'-separated fields; expected "
                f"{len(AXES)} ({'-'.join(AXES)}) plus optional options"
            )
        grad_ckpt, expandable, ranks, model = False, False, 1, DEFAULT_MODEL
        if len(parts) > len(AXES):
            options = parts[-1].split("+")
            bad: list[str] = []
            for opt in options:
                # each option at most once, in grammar order (a repeat or a reordering is caught
                # by the canonical check below)
                if opt == "gc":
                    grad_ckpt = True
                elif opt == "es":
                    expandable = True
                elif re.fullmatch(r"r[1-9][0-9]*", opt) and opt != "r1":
                    ranks = int(opt[1:])
                elif opt.startswith("m_") and TOKEN.match(opt[2:]) and opt[2:] != DEFAULT_MODEL:
                    model = opt[2:]
                else:
                    bad.append(opt)
            if bad or not options:
                raise UsageError(
                    f"cell id {text!r}: bad options field {parts[-1]!r}; options are 'gc', 'es', "
                    "'rN' (N > 1) and 'm_NAME' (a model of matrix/models.toml), joined by '+' in that order"
                )
        try:
            cell = cls(
                *parts[: len(AXES)], grad_ckpt=grad_ckpt, ranks=ranks, expandable_segments=expandable, model=model
            )
        except ValueError as exc:
            raise UsageError(f"cell id {text!r}: {exc}") from None
        if cell.id != text:
            raise UsageError(f"cell id {text!r} is not canonical; write it as {cell.id!r}")
        return cell


MAX_ALTERNATIVES = 1024  # globs one --select may expand to


def expand_braces(pattern: str, limit: int = MAX_ALTERNATIVES) -> list[str]:
    """'cpu-*-{fp32,bf16}-*' -> ['cpu-*-fp32-*', 'cpu-*-bf16-*']; nested braces work. An
    unbalanced brace is taken literally. A pattern expanding to more than `limit` globs is a
    UsageError ('{a,b}' twenty times is a million)."""
    out = _expand(pattern)
    if len(out) > limit:
        raise UsageError(f"--select/--skip {pattern[:80]!r}: its braces expand to more than {limit} patterns")
    return out


def _expand(pattern: str) -> list[str]:
    start = pattern.find("{")
    if start < 0:
        return [pattern]
    depth, alts, begin = 0, [], start + 1
    for i in range(start, len(pattern)):
        ch = pattern[i]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                alts.append(pattern[begin:i])
                head, tail = pattern[:start], pattern[i + 1 :]
                out: list[str] = []
                for alt in alts:
                    out += _expand(head + alt + tail)
                    if len(out) > MAX_ALTERNATIVES:  # stop early: the caller refuses it
                        return out
                return out
        elif ch == "," and depth == 1:
            alts.append(pattern[begin:i])
            begin = i + 1
    return [pattern]


@dataclasses.dataclass(frozen=True)
class Selector:
    """Which cell ids to take: those matching any `select` glob and no `skip` glob (fnmatch,
    case-sensitive, with {a,b} alternatives). No select globs means every cell."""

    select: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()

    @functools.cached_property
    def _globs(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The select and skip globs with their braces expanded, once (UsageError past the bound)."""
        return tuple(p for pat in self.select for p in expand_braces(pat)), tuple(
            p for pat in self.skip for p in expand_braces(pat)
        )

    def __call__(self, cell_id: str) -> bool:
        select, skip = self._globs
        return (not select or any(fnmatch.fnmatchcase(cell_id, p) for p in select)) and not any(
            fnmatch.fnmatchcase(cell_id, p) for p in skip
        )
