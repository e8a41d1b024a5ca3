"""A damaged data file gets a clear error naming the place, never compat's own crash: every data
file of matrix/ damaged one line at a time (tests/data_errors.py: a key misspelt or deleted, a
value of another type or out of range), and what its loader says about each."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import data_errors  # noqa: E402

pytestmark = pytest.mark.slow  # every data file damaged line by line: 3,000 loads, half a minute


def test_every_damaged_data_file_is_answered_with_its_place(tmp_path):
    count = data_errors.write(tmp_path)
    assert count > 3000  # every loader was asked, many times
    answers = {p.name: p.read_text(encoding="utf-8") for p in tmp_path.glob("errors-*.txt")}
    assert len(answers) == len(data_errors.loaders())
    for name, text in answers.items():
        assert "CRASH" not in text, f"{name}: " + text[text.index("CRASH") - 300 : text.index("CRASH") + 200]
        problems = [line.strip() for line in text.splitlines() if line.startswith("  ")]
        assert problems, name  # some damage is refused in every file
        for problem in problems:  # each names its file, and a line wherever one can be found
            assert re.match(r"^MATRIX/[\w./-]+\.toml(:\d+)?: ", problem), f"{name}: {problem}"
