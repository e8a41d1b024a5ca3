"""Matrix data: load and validate matrix/*.toml, expand a product with excludes into cells.

A matrix file:

    description = "..."
    [product]                 # every axis from matrix/axes.toml, each a list of values
    hardware = ["cpu"]
    ...
    [[exclude]]               # drop the cells that match every key given (a value or a list)
    hardware = "cpu"
    precision = "fp16"
    [[first]]                 # run the cells that match first, in the order of these tables:
    quantization = "nf4"      # a run cut short by --stop-after has the most telling cells
    why = "QLoRA as users run it"   # (required) `compat list` shows it
    [settings]                # the per-cell time limit over matrix/defaults.toml's
    timeout_s = 300

What a cell measures is named by its id: the tiny model and its run come from defaults.toml, or
from the model of matrix/models.toml its `model` axis names (m_NAME in the id), never from a grid
file's [settings], so one id means one experiment in every grid (a test holds every shipped grid
to it).

Every problem in the file is collected and raised at once as a MatrixError naming the file, the
key and, where it can be found, the line; near misses get "did you mean".
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import functools
import itertools
import math
import re
from pathlib import Path
from typing import Any

from harness.catalog import strategies
from harness.catalog.cell import AXES, DEFAULT_MODEL, OPTIONS, TOKEN, Cell
from harness.catalog.stacks import Stack, parse_stacks
from harness.errors import MatrixError
from harness.tomldata import (
    TEXT,
    Key,
    Locator,
    Table,
    check,
    did_you_mean,
    kind,
    one_of,
    open_data,
    read_toml,
    toml_repr,
)

AXIS_KEYS = AXES + OPTIONS
MAX_FIRST = 100  # [[first]] rules in a grid
MAX_PRODUCT = 100_000  # cells a grid's product may expand to; the project's largest has under 1,000
# a cell's time limit, at most: a week, far past any cell (600 s by default), and short of what a
# wait can be given at all (a 20-digit limit overflowed the thread's wait, leaving the cell running)
MAX_TIMEOUT_S = 7 * 24 * 3600


@dataclasses.dataclass(frozen=True)
class Matrix:
    path: Path
    description: str
    cells: tuple[Cell, ...]
    settings: dict  # defaults.toml merged with the file's [settings]
    # matrix/models.toml: name -> {"model": {...}, "train": {...}}
    models: dict = dataclasses.field(default_factory=dict)
    # [[first]]: (axis -> the values it takes, why) in order; cells are in this order already
    first: tuple[tuple[dict, str], ...] = ()

    def early(self, cell: Cell) -> tuple[int, str]:
        """(the index of the first [[first]] rule the cell matches, that rule's `why`); (MAX_FIRST,
        "") where none does: after every rule of every grid."""
        if self.first:
            fields = cell.axes()
            for i, (rule, why) in enumerate(self.first):
                if _matches(rule, fields):
                    return i, why
        return MAX_FIRST, ""

    def rank(self, cell: Cell) -> int:
        return self.early(cell)[0]

    def why(self, cell: Cell) -> str:
        """Why the cell runs early, or ''."""
        return self.early(cell)[1]


def _matches(rule: dict[str, list], fields: dict) -> bool:
    """Whether every key of an [[exclude]] or [[first]] rule takes the cell's value."""
    return all(fields.get(k) in vs for k, vs in rule.items())


def cell_settings(settings: dict, models: dict, model: str) -> dict:
    """The settings a cell runs with: the matrix's, with its model's config and train overrides."""
    out = copy.deepcopy(settings)
    for part, values in (models.get(model) or {}).items():
        out[part].update(values)
    return out


@dataclasses.dataclass(frozen=True)
class MatrixData:
    """The declarations every matrix file is checked against (matrix/axes.toml, defaults.toml,
    stacks.toml)."""

    dir: Path
    axes: dict
    defaults: dict
    stacks: dict[str, Stack]
    models: dict = dataclasses.field(default_factory=dict)  # matrix/models.toml, checked

    @classmethod
    def load(cls, directory: Path) -> "MatrixData":
        problems: list[str] = []
        docs = {}
        for name in ("axes", "defaults", "stacks"):
            path = directory / f"{name}.toml"
            docs[name] = read_toml(path, problems)
        if problems:
            raise MatrixError(problems)
        _check_axes(docs["axes"], directory / "axes.toml", problems)
        path = directory / "stacks.toml"
        stacks = parse_stacks(docs["stacks"], path, Locator(path, path.read_text(encoding="utf-8")), problems)
        models = {}
        path = directory / "models.toml"
        if path.exists():
            models = parse_models(read_toml(path, problems), docs["defaults"], path, problems)
        if problems:
            raise MatrixError(problems)
        return cls(directory, docs["axes"], docs["defaults"], stacks, models)

    def allowed(self, axis: str) -> list | None:
        """The valid values of an axis, or None where it is checked by pattern instead."""
        decl = self.axes.get(axis, {"from": "models"} if axis == "model" else {})
        if decl.get("from") == "stacks":
            return sorted(self.stacks)
        if decl.get("from") == "models":
            return [DEFAULT_MODEL, *sorted(self.models)]
        if decl.get("from") == "strategies":
            return strategies.names()
        return decl.get("values")


def _regex(value) -> bool:
    return isinstance(value, str) and re.compile(value) is not None


# an axis of matrix/axes.toml: its description, and its values in one of three ways
AXIS = Table(
    {
        "description": Key.of(TEXT, required=True, missing="missing: every axis says what it is"),
        "values": Key.of(
            kind(
                lambda v: isinstance(v, list) and v and all(isinstance(x, (str, int, bool)) for x in v),
                "must be a non-empty list of values",
            )
        ),
        "pattern": Key.of(kind(_regex, "{v} is not a regular expression")),
        "from": Key.of(one_of("stacks", "models", "strategies")),
    }
)


def _check_axes(axes: dict, path: Path, problems: list[str]) -> None:
    """matrix/axes.toml: a table per axis, each with exactly one of values, pattern or from."""
    where = Locator(path, path.read_text(encoding="utf-8"))
    for axis in AXIS_KEYS:
        if axis not in axes and axis != "model":  # a compat home may have no models
            problems.append(f"{path}: [{axis}]: missing; every axis needs a table")
    for axis, decl in axes.items():
        at = functools.partial(where, table=axis)
        if axis not in AXIS_KEYS:
            problems.append(
                at(
                    axis,
                    f"[{axis}]",
                    f"unknown axis{did_you_mean(axis, AXIS_KEYS)}; compat's cells have {', '.join(AXIS_KEYS)}",
                )
            )
        elif not isinstance(decl, dict):
            problems.append(at(axis, f"[{axis}]", "must be a table"))
        elif (
            check(decl, AXIS, lambda key, msg: at(key, f"[{axis}].{key}", msg), problems)
            and sum(k in decl for k in ("values", "pattern", "from")) != 1
        ):
            problems.append(at(axis, f"[{axis}]", "needs exactly one of values, pattern or from"))


def is_grid(path: Path) -> bool:
    """Whether a file is a grid (it has a [product] table), not one of matrix/'s data files."""
    try:
        return (
            path.is_file()
            and re.search(r"^\s*\[\s*product\s*\]", path.read_text(encoding="utf-8", errors="replace"), re.MULTILINE)
            is not None
        )
    except OSError:
        return False


def grid_paths(directory: Path) -> list[Path]:
    """Every grid of a matrix folder, in name order."""
    return [p for p in sorted(directory.glob("*.toml")) if is_grid(p)]


# a grid file's top level
_NO_PRODUCT = "missing; a matrix needs a [product] table"
_EXCLUDES = kind(
    lambda v: isinstance(v, list) and all(isinstance(e, dict) for e in v), "must be an array of tables ([[exclude]])"
)
_FIRSTS = kind(
    lambda v: isinstance(v, list) and all(isinstance(e, dict) for e in v) and len(v) <= MAX_FIRST,
    f"must be an array of at most {MAX_FIRST} tables ([[first]])",
)
GRID = Table(
    {
        "description": Key.of(TEXT),
        "product": Key.of(kind(lambda v: isinstance(v, dict), _NO_PRODUCT), required=True, missing=_NO_PRODUCT),
        "exclude": Key.of(_EXCLUDES),
        "first": Key.of(_FIRSTS),
        "settings": Key.of(),  # laid over defaults.toml's, each key checked there (settings_over)
    }
)
_GRID_LABELS = {"product": "[product]", "exclude": "[[exclude]]", "first": "[[first]]"}


def load_matrix(path: Path, data: MatrixData) -> Matrix:
    """A grid file, checked against `data` and expanded into its cells; every problem is
    raised at once as a MatrixError."""
    doc, where = open_data(path)
    problems: list[str] = []
    check(doc, GRID, lambda key, msg: where(key, _GRID_LABELS.get(key, key), msg), problems)
    product = doc.get("product") if isinstance(doc.get("product"), dict) else {}
    axes_values = _product(product, data, where, problems)
    excludes = doc.get("exclude", [])
    excludes = _excludes(excludes if _EXCLUDES.problem(excludes) is None else [], data, where, problems)
    firsts = doc.get("first", [])
    first = _firsts(firsts if _FIRSTS.problem(firsts) is None else [], data, where, problems)
    given = doc.get("settings", {})
    settings = settings_over(data.defaults, given, "settings", where, problems)
    for part in ("model", "train") if isinstance(given, dict) else ():
        if part in given:
            problems.append(where(part, f"[settings.{part}]", MEASURED_IN_ID, table=f"settings.{part}"))
    if problems:
        raise MatrixError(problems)
    cells = _expand(axes_values, excludes, path, where)
    _check_ranks(cells, where, problems)
    grid = Matrix(path, doc.get("description", ""), tuple(cells), settings, data.models, tuple(first))
    rank = {c: grid.rank(c) for c in cells}
    _check_firsts(first, rank.values(), where, problems)
    if problems:
        raise MatrixError(problems)
    return dataclasses.replace(grid, cells=tuple(sorted(cells, key=rank.__getitem__)))


def _product(product: dict, data: MatrixData, where, problems: list[str]) -> dict[str, list]:
    """[product]: axis -> its values, each checked against matrix/axes.toml."""
    axes_values: dict[str, list] = {}
    at = functools.partial(where, table="product")
    for key, values in product.items():
        label = f"[product].{key}"
        if key not in AXIS_KEYS:
            problems.append(at(key, label, f"unknown axis{did_you_mean(key, AXIS_KEYS)}"))
            continue
        if not isinstance(values, list) or not values:
            problems.append(at(key, label, "must be a non-empty list of values"))
            continue
        good = [v for v in values if check_axis_value(data, key, v, at, label, problems)]
        dupes = sorted({repr(v) for v in good if good.count(v) > 1})
        if dupes:
            problems.append(at(key, label, f"repeated value {', '.join(dupes)}"))
        axes_values[key] = list(dict.fromkeys(good))
    for axis in AXES:
        if product and axis not in product:
            problems.append(where("product", f"[product].{axis}", "missing; every axis needs a list", table="product"))
    return axes_values


def _excludes(
    excludes: list[dict], data: MatrixData, where, problems: list[str], table: str = "exclude", start: int = 0
) -> list[dict[str, list]]:
    """[[exclude]]: each rule as axis -> the values it drops, checked like [product]'s."""
    rules: list[dict[str, list]] = []
    for i, entry in enumerate(excludes, start):
        rule: dict[str, list] = {}
        at = functools.partial(where, table=table, nth=i)
        if not entry and table == "exclude":
            problems.append(at("exclude", f"[[exclude]] #{i + 1}", "is empty (it would drop every cell)"))
        for key, value in entry.items():
            label = f"[[{table}]] #{i + 1}.{key}"
            if key not in AXIS_KEYS:
                problems.append(at(key, label, f"unknown axis{did_you_mean(key, AXIS_KEYS)}"))
                continue
            values = value if isinstance(value, list) else [value]
            rule[key] = [v for v in values if check_axis_value(data, key, v, at, label, problems)]
        rules.append(rule)
    return rules


def _firsts(entries: list[dict], data: MatrixData, where, problems: list[str]) -> list[tuple[dict, str]]:
    """[[first]]: each rule as (axis -> the values it takes, its `why`), checked like [[exclude]]'s."""
    out = []
    for i, entry in enumerate(entries):
        why = entry.get("why")
        if not isinstance(why, str) or not why.strip() or len(why) > 200:
            problems.append(
                where(
                    "why",
                    f"[[first]] #{i + 1}.why",
                    "missing or not text of 1 to 200 characters; say why these cells run early",
                    table="first",
                    nth=i,
                )
            )
            why = ""
        rule = {k: v for k, v in entry.items() if k != "why"}
        if not rule:
            problems.append(
                where("first", f"[[first]] #{i + 1}", "names no axis (it would match every cell)", table="first", nth=i)
            )
        out.append((_excludes([rule], data, where, problems, "first", i)[0], why))
    return out


def _check_firsts(first: list[tuple[dict, str]], ranks, where, problems: list[str]) -> None:
    """A [[first]] rule that no cell of the product matches (a typo in a value) is an error;
    `ranks`: each cell's Matrix.rank."""
    taken = collections.Counter(ranks)
    for i, (rule, _) in enumerate(first):
        if rule and not taken[i]:
            problems.append(
                where(
                    "first",
                    f"[[first]] #{i + 1}",
                    "matches no cell the product has left (or only cells an earlier [[first]] took)",
                    table="first",
                    nth=i,
                )
            )


def _expand(axes_values: dict[str, list], excludes: list[dict[str, list]], path: Path, where) -> list[Cell]:
    """The product's cells less those an exclude rule drops (every key of the rule matches)."""
    keys = [k for k in AXIS_KEYS if k in axes_values]
    size = math.prod(len(axes_values[k]) for k in keys)
    if size > MAX_PRODUCT:
        raise MatrixError(
            [
                where(
                    "product",
                    "[product]",
                    f"expands to {size:,} cells before excludes; a grid holds at most "
                    f"{MAX_PRODUCT:,} (split it into several grid files)",
                    table="product",
                )
            ]
        )
    cells = []
    for combo in itertools.product(*(axes_values[k] for k in keys)):
        fields = dict(zip(keys, combo))
        if any(_matches(rule, fields) for rule in excludes):
            continue
        cells.append(Cell(**fields))
    if not cells:
        raise MatrixError([f"{path}: [[exclude]]: the excludes drop every cell of the product"])
    return cells


def _check_ranks(cells: list[Cell], where, problems: list[str]) -> None:
    """Each strategy takes the ranks it can run with: name the cells and the exact fix."""
    for strategy in strategies.TABLE:
        bad = [c for c in cells if c.strategy == strategy.name and not strategy.takes(c.ranks)]
        if bad:
            ranks = sorted({c.ranks for c in bad})
            fix = f'strategy = "{strategy.name}", ranks = {ranks[0] if len(ranks) == 1 else ranks}'
            lo, hi = strategy.min_ranks, strategy.max_ranks
            allowed = f"exactly {lo}" if lo == hi else f"{lo} or more"
            problems.append(
                where(
                    "product",
                    "[product]",
                    f"{len(bad)} cell(s) such as {bad[0].id} pair strategy {strategy.name} with "
                    f"{bad[0].ranks} rank(s); {strategy.name} takes {allowed}: add [[exclude]] {fix}",
                    table="product",
                )
            )


# a grid's [settings] may not change what its cells measure: a cell's id names what it measures
MEASURED_IN_ID = (
    "a grid file does not change the tiny model or its run: its cells would record another run under the same "
    "ids as every other grid's. Put these keys in a model of matrix/models.toml ([NAME], and [NAME.train] for "
    "the run) and name it in [product].model: the cell ids then carry it (m_NAME)"
)


def parse_models(doc: dict, defaults: dict, path: Path, problems: list[str]) -> dict[str, dict]:
    """matrix/models.toml: [NAME] holds [settings.model] keys, [NAME.train] [settings.train] keys;
    each checked against defaults.toml like a matrix's [settings]."""
    where = Locator(path, path.read_text(encoding="utf-8"))
    models = {}
    for name, table in doc.items():
        at = functools.partial(where, table=name)
        if not TOKEN.match(name) or name == DEFAULT_MODEL:
            problems.append(
                at(
                    name,
                    f"[{name}]",
                    "a model name is lower-case letters, digits, '_' and '.' (it goes into cell ids), not \"default\"",
                )
            )
            continue
        if not isinstance(table, dict):
            problems.append(at(name, f"[{name}]", "must be a table"))
            continue
        train = table.get("train", {})
        config = {k: v for k, v in table.items() if k != "train"}
        checked = copy.deepcopy({"model": defaults["model"], "train": defaults["train"]})
        before = len(problems)
        _merge_settings(checked["model"], config, name, where, problems)
        if isinstance(train, dict):
            _merge_settings(checked["train"], train, f"{name}.train", where, problems)
        else:
            problems.append(at("train", f"[{name}].train", "must be a table"))
        if len(problems) == before:
            models[name] = {"model": config, "train": dict(train)}
    return models


# ------------------------------------------------------------------------------------------------


def check_axis_value(data: MatrixData, axis: str, value: Any, where, label: str, problems: list) -> bool:
    """Whether `value` is a value of `axis` (matrix/axes.toml); if not, the problem is appended."""
    decl = data.axes.get(axis, {})
    allowed = data.allowed(axis)
    if allowed is not None:
        # bool is an int in Python: compare type and value so `true` is not accepted for 1
        if any(type(value) is type(a) and value == a for a in allowed):
            return True
        hint = did_you_mean(str(value), [str(a) for a in allowed])
        shown = ", ".join(toml_repr(a) for a in allowed)
        problems.append(where(axis, label, f"{toml_repr(value)} is not one of {shown}{hint}"))
        return False
    pattern = decl.get("pattern")
    if isinstance(value, str) and pattern and re.match(pattern, value):
        return True
    problems.append(where(axis, label, f"{toml_repr(value)} is not valid: {decl.get('description', pattern)}"))
    return False


def settings_over(base: dict, overrides, prefix: str, where, problems: list) -> dict:
    """A copy of `base` (defaults.toml's settings, or settings already laid over them) with the
    table `overrides` laid over it, each key checked; problems are appended with file:line."""
    settings = copy.deepcopy(base)
    if not isinstance(overrides, dict):
        problems.append(where(prefix, f"[{prefix}]", "must be a table", table=prefix))
        return settings
    _merge_settings(settings, overrides, prefix, where, problems)
    train = settings.get("train", {})
    if train.get("seq_len_min", 1) > train.get("seq_len_max", 1):
        problems.append(
            where("seq_len_min", f"[{prefix}.train].seq_len_min", "is larger than seq_len_max", table=f"{prefix}.train")
        )
    return settings


def _merge_settings(into: dict, overrides: dict, prefix: str, where, problems: list) -> None:
    where = functools.partial(where, table=prefix)
    for key, value in overrides.items():
        label = f"[{prefix}].{key}"
        if key not in into:
            problems.append(where(key, label, f"unknown setting{did_you_mean(key, list(into))}"))
            continue
        default = into[key]
        if isinstance(default, dict) and not default:  # a free-form table: its keys are not compat's
            if isinstance(value, dict):
                into[key] = value
            else:
                problems.append(where(key, label, "must be a table"))
            continue
        if isinstance(default, dict):
            if isinstance(value, dict):
                _merge_settings(default, value, f"{prefix}.{key}", where, problems)
            else:
                problems.append(where(key, label, "must be a table"))
            continue
        ok = type(value) is type(default) or (type(default) is float and type(value) is int)
        if not ok:
            problems.append(
                where(
                    key,
                    label,
                    f"{toml_repr(value)} must be {_TYPE_NAMES[type(default)]} like the default {toml_repr(default)}",
                )
            )
            continue
        if key in _SETTING_CHOICES and value not in _SETTING_CHOICES[key]:
            shown = ", ".join(toml_repr(c) for c in _SETTING_CHOICES[key])
            problems.append(
                where(
                    key, label, f"{toml_repr(value)} is not one of {shown}{did_you_mean(value, _SETTING_CHOICES[key])}"
                )
            )
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value <= 0 and key != "seed":
            problems.append(where(key, label, f"{value} must be greater than 0"))
            continue
        if key == "timeout_s" and value > MAX_TIMEOUT_S:
            problems.append(where(key, label, f"{value} is more than a week ({MAX_TIMEOUT_S:,} s): not a cell's time"))
            continue
        into[key] = value


_SETTING_CHOICES = {
    "order": ("shuffled", "ascending"),
    "padding": ("longest", "max_length"),
    "base_dtype": ("float32", "compute"),
}
_TYPE_NAMES = {int: "an integer", float: "a number", bool: "true or false", str: "a string", list: "a list"}
