"""Where compat's data and records are: the matrix folder every command reads (grids, GPU
database, known issues, presets, model configs), the records that count as measurements, and
the results folder that `run`, `table`, `merge` and `review` use by default.

Found in this order:
1. $COMPAT_HOME: a folder with matrix/axes.toml (a checkout, or a copy of its matrix/ being
   edited); one without is an error, never silently passed over;
2. the current folder or one of its parents, when it is a compat checkout;
3. the checkout this package was imported from (an editable install);
4. the data installed with the package (harness/data: matrix/ and the published records as they
   were when the release was built). Then records are read from that snapshot and from
   ./results, and written to ./results in the current folder, never into the installation.

A checkout's results/ is the published table: a user's runs go to results/local/ (ignored by git,
so a clone stays clean and `git pull` never conflicts), whose table shows them beside the
published records; the maintainers' tox envs write to results/ with `--results results`.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from harness.errors import UsageError

PACKAGE = Path(__file__).resolve().parent
PACKAGED = PACKAGE / "data"  # pyproject.toml's package-dir: matrix/ and results/ of the release
LOCAL = "local"  # a checkout's results/local/: the user's own runs, apart from the published records


@dataclasses.dataclass(frozen=True)
class Home:
    matrix: Path  # matrix/: what every command reads
    results: Path  # the user's own: where run, table and merge write by default
    evidence: tuple[Path, ...]  # the folders whose records count as measurements by default
    checkout: Path | None  # the checkout or $COMPAT_HOME; None: the data installed with compat
    # the published records (a checkout's results/, or the snapshot installed with compat): read,
    # never written by default; compat review checks a pull request against it
    published: Path | None = None

    @classmethod
    def of(cls, folder: Path) -> "Home":
        mine = folder / "results" / LOCAL
        return cls(folder / "matrix", mine, (folder / "results", mine), folder, folder / "results")

    @classmethod
    def packaged(cls) -> "Home":
        here = Path.cwd() / "results"
        return cls(PACKAGED / "matrix", here, (PACKAGED / "results", here), None, PACKAGED / "results")


def _is_home(folder: Path) -> bool:
    return (folder / "matrix" / "axes.toml").is_file()


def find() -> Home:
    env = os.environ.get("COMPAT_HOME")
    if env:
        if not _is_home(Path(env)):
            raise UsageError(
                f"$COMPAT_HOME={env}: no matrix/axes.toml there; point it at a compat checkout (or a "
                "folder holding a copy of its matrix/), or unset it to use the data installed with compat"
            )
        return Home.of(Path(env))
    for folder in (Path.cwd(), *Path.cwd().parents, PACKAGE.parent):
        if _is_home(folder):
            return Home.of(folder)
    if _is_home(PACKAGED):
        return Home.packaged()
    raise UsageError(
        f"no compat data: {PACKAGED} has no matrix/axes.toml (a broken install: reinstall compat), and "
        f"neither {Path.cwd()} nor its parents is a compat checkout; or set COMPAT_HOME to one"
    )
