"""matrix/stacks.toml: the named library stacks a cell runs on, each a table of pins.

[transformers_4_46]
description = "..."
torch = "inherit"              # the runner's own torch, or a specifier to install
transformers = "==4.46.3"      # each package of harness/catalog/packages.py's STACK: a specifier, "" = newest
python = "<3.13"               # the Pythons it installs on, and why not on the others
python_why = "..."
canary = true                  # takes the newest releases (ranges, not exact pins)
provider = "current"           # no env: the interpreter compat runs under (takes no pins)
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from harness.catalog.cell import TOKEN
from harness.catalog.packages import STACK as STACK_PACKAGES
from harness.tomldata import BOOL, TEXT, Key, Kind, Table, check, one_of, toml_repr


@dataclasses.dataclass(frozen=True)
class Stack:
    name: str
    description: str
    current: bool  # provider = "current": no env, the interpreter compat runs under
    canary: bool
    torch: str  # "inherit" or a specifier to install, e.g. "==2.13.0"
    packages: tuple[tuple[str, str], ...]  # (name, specifier); "" = newest
    python: str = ""  # the Pythons it installs on, a specifier ("<3.12"); "" = any
    python_why: str = ""  # why not on the others, said in the unsupported records

    def requirements(self, resolved: dict[str, str] | None = None) -> list[str]:
        reqs = [f"{n}=={resolved[n]}" if resolved and n in resolved else f"{n}{s}" for n, s in self.packages]
        if self.torch != "inherit":
            reqs.insert(0, f"torch{self.torch}")
        return reqs

    def pins(self) -> dict[str, str]:
        out = {"torch": self.torch}
        out.update({n: s or "newest" for n, s in self.packages})
        return out


def _specifier(like: str, also: str = "") -> Kind:
    def problem(value) -> str | None:
        if also and value == also:
            return None
        try:
            SpecifierSet(value)
        except InvalidSpecifier:
            return f"{toml_repr(value)} is not a version specifier like {like}" + (f' (or "{also}")' if also else "")
        return None

    return Kind(problem)


PACKAGE_SPEC = _specifier('"==4.33.0" or ">=4.40,<4.41"')
# a [NAME] table of matrix/stacks.toml
STACK_TABLE = Table(
    {
        "description": Key.of(TEXT),
        "provider": Key.of(TEXT, one_of("env", "current")),
        "canary": Key.of(BOOL),
        "torch": Key.of(TEXT, _specifier('"==4.33.0" or ">=4.40,<4.41"', also="inherit")),
        "python": Key.of(TEXT, _specifier('"<3.12"')),
        "python_why": Key.of(TEXT),
        **{package: Key.of(TEXT, PACKAGE_SPEC) for package in STACK_PACKAGES},
    }
)


def _exact_pin(key: str, value: str) -> str | None:
    if (
        key in ("torch", *STACK_PACKAGES)
        and value != "inherit"
        and any(s.operator in ("==", "===") for s in SpecifierSet(value))
    ):
        return 'a canary takes the newest release: give a range or "", not an exact pin'
    return None


def parse_stacks(doc: dict, path: Path, where, problems: list[str]) -> dict[str, Stack]:
    """The stacks of matrix/stacks.toml, each checked; problems are appended with file:line."""
    stacks = {}
    for name, table in doc.items():
        at_table = functools.partial(where, table=name)
        if not TOKEN.match(name):
            problems.append(
                at_table(
                    name, f"[{name}]", "a stack name is lower-case letters, digits, '_' and '.' (it goes into cell ids)"
                )
            )
            continue
        if not isinstance(table, dict):
            problems.append(at_table(name, f"[{name}]", "must be a table"))
            continue
        canary = table.get("canary") is True
        ok = check(
            table,
            STACK_TABLE,
            lambda key, msg: at_table(key, f"[{name}].{key}", msg),
            problems,
            also=lambda key, value: _exact_pin(key, value) if canary else None,
        )
        current = table.get("provider") == "current"
        if current and any(k in table for k in ("torch", "canary", "python", *STACK_PACKAGES)):
            problems.append(
                at_table(
                    name,
                    f"[{name}]",
                    'provider = "current" runs the interpreter as it is: it takes no packages, torch or canary',
                )
            )
            ok = False
        if ok:
            stacks[name] = Stack(
                name=name,
                description=table.get("description", ""),
                current=current,
                canary=bool(table.get("canary", False)),
                torch=table.get("torch", "inherit"),
                packages=tuple((p, table[p]) for p in STACK_PACKAGES if p in table),
                python=table.get("python", ""),
                python_why=table.get("python_why", ""),
            )
    return stacks
