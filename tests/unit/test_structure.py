"""The code's shape, checked: the package's wings (issue 38), arguments parsed in one place
(issue 19), and functions short enough to read.

The wings, from the door down; an import only points down, and never between run and render:

    cli, __main__                        the door
    commands/                            one module per command
    answers/                             what compat tells a user
    run/ | render/                       a cell from plan to record | the table and the page
    evidence/                            records and what may be read from them
    catalog/                             the names compat uses, from matrix/*.toml
    home, tomldata                       finding and loading the data
    errors                               compat's errors and their exit codes

workloads/ stand apart: they run inside a stack's env, so no harness module imports them and
they import nothing of the harness. `harness` itself (its __init__: the version) may be imported
from anywhere."""

import ast
import re

from conftest import ROOT

HARNESS = ROOT / "harness"
MAX_LINES = 60
MAX_ROOT_MODULES = 6

# wing -> its floor; two wings on one floor may not import each other
FLOORS = {
    "errors": 0,
    "data": 1,
    "catalog": 2,
    "evidence": 3,
    "run": 4,
    "render": 4,
    "answers": 5,
    "commands": 6,
    "door": 7,
}
ROOT_MODULES = {"errors": "errors", "home": "data", "tomldata": "data", "cli": "door", "__main__": "door"}


def module_name(path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, object]:
    return {module_name(p): p for p in sorted(HARNESS.rglob("*.py")) if "__pycache__" not in p.parts}


def imports(path, known: set[str]) -> set[str]:
    """The harness modules a file imports: at module level, in a function or under TYPE_CHECKING
    alike (a loop hidden in a function is still a loop)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "harness"}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            if base.split(".")[0] != "harness":
                continue
            subs = {f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known}
            out |= subs or {base}
    return out - {name}


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(path, set(found)) for name, path in found.items()}


def wing(name: str) -> str | None:
    """A module's wing; None for `harness` itself (the version, importable from anywhere)."""
    parts = name.split(".")
    if len(parts) == 1:
        return None
    if len(parts) == 2 and parts[1] in ROOT_MODULES:
        return ROOT_MODULES[parts[1]]
    return parts[1]


def upward(edges: dict[str, set[str]]) -> list[str]:
    """Imports that run up a wing, or sideways between two wings of one floor."""
    bad = []
    for a, targets in sorted(edges.items()):
        for b in sorted(targets):
            wa, wb = wing(a), wing(b)
            if wb is None or wa == wb or "workloads" in (wa, wb):
                continue
            if FLOORS[wb] >= FLOORS[wa]:
                bad.append(f"{a} ({wa}) -> {b} ({wb})")
    return bad


def loops(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import loops: each strongly connected set of two or more modules (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while not group or group[-1] != v:
                group.append(stack.pop())
                on.discard(group[-1])
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_package_root_holds_the_door_and_the_data_loading_only():
    root = sorted(p.stem for p in HARNESS.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root
    assert set(root) <= {*ROOT_MODULES, "__init__"}, root


def test_every_module_is_in_a_wing():
    names = [n for n in modules() if wing(n) is not None]
    assert len(names) > 50  # the walk found the package
    assert sorted(n for n in names if wing(n) not in {*FLOORS, "workloads"}) == []


def test_no_import_runs_up_a_wing_or_across_a_floor():
    edges = graph()
    assert "harness.answers.recommend" in edges["harness.commands.recommend"]  # a function-level import is seen
    assert upward(edges) == []


def test_no_import_loops():
    edges = graph()
    assert "harness.run.context" in edges["harness.run.cellrecord"]
    assert loops(edges) == []


def test_the_workloads_stand_apart():
    edges = graph()
    into = sorted(
        a
        for a, targets in edges.items()
        for b in targets
        if (wing(a) == "workloads") != (wing(b) == "workloads") and wing(b) is not None
    )
    assert into == []


def test_the_checks_see_an_upward_import_a_sideways_one_and_a_loop():
    # a loop
    edges = {
        "harness.catalog.cell": {"harness.evidence.records"},  # up
        "harness.run.runner": {"harness.render.table"},  # sideways, one floor
        "harness.evidence.records": {"harness.evidence.summary", "harness.errors", "harness"},
        "harness.evidence.summary": {"harness.evidence.records"},
    }
    assert upward(edges) == [
        "harness.catalog.cell (catalog) -> harness.evidence.records (evidence)",
        "harness.run.runner (run) -> harness.render.table (render)",
    ]
    assert loops(edges) == [["harness.evidence.records", "harness.evidence.summary"]]


def functions():
    for path in sorted(HARNESS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield f"{path.relative_to(HARNESS)}:{node.name}", node.end_lineno - node.lineno + 1


def test_no_function_is_longer_than_sixty_lines():
    names = [name for name, _ in functions()]
    assert "workloads/finetune.py:run" in names and "cli.py:main" in names  # the walk reads every module, workloads too
    assert {name: n for name, n in functions() if n > MAX_LINES} == {}


def test_only_the_cli_and_its_commands_parse_arguments():
    parsing = sorted(
        str(p.relative_to(HARNESS))
        for p in HARNESS.rglob("*.py")
        if re.search(r"^\s*(import argparse|from argparse import)", p.read_text(encoding="utf-8"), re.MULTILINE)
    )
    assert parsing and all(p == "cli.py" or p.startswith("commands/") for p in parsing), parsing
