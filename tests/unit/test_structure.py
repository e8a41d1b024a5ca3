"""The code's shape that issue 19 asks for, checked: arguments are parsed in one place, and
functions stay short enough to read."""

import ast
import re

from conftest import ROOT

HARNESS = ROOT / "harness"
MAX_LINES = 60


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
    parsing = sorted(str(p.relative_to(HARNESS)) for p in HARNESS.rglob("*.py")
                     if re.search(r"^\s*(import argparse|from argparse import)", p.read_text(encoding="utf-8"), re.MULTILINE))
    assert parsing and all(p == "cli.py" or p.startswith("commands/") for p in parsing), parsing
