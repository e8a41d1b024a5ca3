"""What compat says about every damaged data file: each of matrix/'s data files (the axes, settings,
stacks and models, the loss agreement, a grid, the GPU database, the builds, the known issues, the model configs, a
preset) damaged one line at a time, in the ways people damage them (a key misspelt, a value of
the wrong type or out of range, a line deleted), and what its loader says about each, one output
file per data file. tests/outputs.py writes these beside the commands' answers, so a change to how
data files are checked shows in its diff.

    python tests/data_errors.py /tmp/errors     # the same, on its own
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KEY_LINE = re.compile(r"^(\s*)([A-Za-z_][\w-]*)(\s*=\s*)(.+)$")
MAX_LINES = 45  # key lines damaged per file, spread over it
VALUES = ("true", "7", "-1", '"zzz"', "[]", '["zzz"]', "{}")


def damaged(text: str):
    """(what was done, the damaged text) for each damage of each sampled key line."""
    lines = text.split("\n")
    keyed = [i for i, line in enumerate(lines) if KEY_LINE.match(line)]
    step = max(1, len(keyed) // MAX_LINES)
    for i in keyed[::step][:MAX_LINES]:
        indent, key, eq, value = KEY_LINE.match(lines[i]).groups()
        if value.rstrip().endswith(("[", "{", '"""', "'''")):
            continue  # a value over several lines: a line's damage would only make it bad TOML

        def edit(new_line, i=i):
            return "\n".join(lines[:i] + ([new_line] if new_line is not None else []) + lines[i + 1 :])

        yield f"line {i + 1}: {key} misspelt", edit(f"{indent}{key[:-1] or key + 'x'}{eq}{value}")
        yield f"line {i + 1}: {key} deleted", edit(None)
        for v in VALUES:
            yield f"line {i + 1}: {key} = {v}", edit(f"{indent}{key}{eq}{v}")


def loaders():
    """file in matrix/ -> how compat loads it from a folder (a copy of matrix/)."""
    from harness.answers import preflight
    from harness.answers.model_configs import ModelConfigs
    from harness.answers.recommend import ResolverData
    from harness.catalog.backends import Backends
    from harness.catalog.gpus import GpuDb
    from harness.catalog.known_issues import KnownIssues
    from harness.catalog.matrix import MatrixData, load_matrix
    from harness.evidence import agreement

    return {
        "axes.toml": MatrixData.load,
        "defaults.toml": MatrixData.load,
        "stacks.toml": MatrixData.load,
        "agreement.toml": lambda d: agreement.Config.load(d / "agreement.toml", MatrixData.load(d).stacks),
        "models.toml": MatrixData.load,
        "cpu.toml": lambda d: load_matrix(d / "cpu.toml", MatrixData.load(d)),
        "gpu-size-dist.toml": lambda d: load_matrix(d / "gpu-size-dist.toml", MatrixData.load(d)),
        "gpus.toml": GpuDb.load,
        "backends.toml": Backends.load,
        "builds.toml": ResolverData.load,
        "known_issues.toml": KnownIssues.load,
        "model_configs.toml": ModelConfigs.load,
        "presets/glm4-lora-zero3-offload/preset.toml": lambda d: preflight.load_preset(
            d, "glm4-lora-zero3-offload", MatrixData.load(d)
        ),
        "presets/llamafactory-fsdp-qlora-fp16/preset.toml": lambda d: preflight.load_preset(
            d, "llamafactory-fsdp-qlora-fp16", MatrixData.load(d)
        ),
    }


def answer(load, directory: Path) -> str:
    from harness.errors import CompatError, MatrixError

    try:
        load(directory)
    except MatrixError as exc:
        return "MatrixError:\n" + "\n".join(f"  {p}" for p in exc.problems)
    except CompatError as exc:
        return f"{type(exc).__name__}: {exc}"
    except Exception:  # compat's own error: kept whole, so a change that mends one shows
        return "CRASH " + traceback.format_exc(limit=1).strip().splitlines()[-1]
    return "accepted"


def write(out: Path) -> int:
    sys.path.insert(0, str(ROOT))
    out.mkdir(parents=True, exist_ok=True)
    saved = os.environ.get("COMPAT_CACHE_DIR")
    os.environ["COMPAT_CACHE_DIR"] = ""  # thousands of files read once each: nothing worth keeping
    try:
        return _write(out)
    finally:
        if saved is None:
            os.environ.pop("COMPAT_CACHE_DIR")
        else:
            os.environ["COMPAT_CACHE_DIR"] = saved


def _write(out: Path) -> int:
    count = 0
    with tempfile.TemporaryDirectory(prefix="compat-data-errors-") as name:
        directory = Path(name) / "matrix"
        shutil.copytree(ROOT / "matrix", directory)
        for rel, load in loaders().items():
            path = directory / rel
            original = path.read_text(encoding="utf-8")
            lines = []
            for what, text in damaged(original):
                path.write_text(text, encoding="utf-8")
                lines.append(f"== {what}\n{answer(load, directory).replace(str(directory), 'MATRIX')}\n")
                count += 1
            path.write_text(original, encoding="utf-8")
            (out / ("errors-" + rel.replace("/", "-").removesuffix(".toml") + ".txt")).write_text(
                "".join(lines), encoding="utf-8"
            )
    return count


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    print(f"{write(Path(sys.argv[1]))} damaged files answered in {sys.argv[1]}")
