"""`compat wheelhouse DIR`: every wheel a GPU host needs to run compat's grids with no network.

    compat wheelhouse wheels/ --python 3.12 --platform x86_64-manylinux_2_28

fills wheels/ with, for the target interpreter and platform:
  - the pins of the chosen stacks (default: every stack the GPU grids use), resolved now by uv for
    that target with torch left out (a stack inherits the runner's torch);
  - the requirements files given (default: requirements/gpu-stack.txt, what tox's gpu-matrix env
    and the `local` stack install beside the runner's torch);
  - compat itself, built from this checkout, and what it needs to run (packaging, nvidia-ml-py,
    uv, ...);
each downloaded as a binary wheel for the target, or, for a package published only as a source
distribution (DeepSpeed), built here into a wheel that must be pure Python (DS_BUILD_OPS=0: its
ops are compiled on the GPU host at first use, as always). Then on the air-gapped host:

    pip install --no-index --find-links wheels/ compat -r requirements/gpu-stack.txt
    compat run --offline --find-links wheels/ --matrix 'matrix/gpu*.toml'

A manifest, compat-wheelhouse.json, lists the target, what each stack resolved to, and every file
with its size and sha256. A stack that cannot install on the target Python (its `python`
specifier), or that installs its own torch, is left out and said so.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import os
import platform as host_platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from harness.catalog.stacks import Stack
from harness.errors import CompatError, UsageError
from harness.run.envs import find_uv, parse_pins

MANIFEST = "compat-wheelhouse.json"
PLATFORM = re.compile(r"(x86_64|aarch64)-manylinux_([0-9]{1,2})_([0-9]{1,3})")  # glibc 2.5 to 2.40 and more


@dataclasses.dataclass(frozen=True)
class Target:
    python: str  # "3.12"
    platform: str  # uv's spelling: "x86_64-manylinux_2_28"

    @property
    def pip_platforms(self) -> list[str]:
        """pip's platform tags for the target: manylinux_2_28_x86_64 and every older glibc's, with
        their legacy names (manylinux2014 is 2_17, manylinux2010 2_12, manylinux1 2_5): a 2.28 host
        runs them all, and pip does not add them itself (pip 23.2 takes each tag as given)."""
        arch, major, minor = PLATFORM.fullmatch(self.platform).groups()
        legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
        tags = []
        for m in range(int(minor), 4, -1):
            tags.append(f"manylinux_{major}_{m}_{arch}")
            if major == "2" and m in legacy:
                tags.append(f"{legacy[m]}_{arch}")
        return tags

    @classmethod
    def parse(cls, python: str | None, platform: str | None) -> "Target":
        python = python or ".".join(host_platform.python_version_tuple()[:2])
        if not re.fullmatch(r"3\.[0-9]{1,2}", python):
            raise UsageError(f"--python {python!r}: give the target's Python as MAJOR.MINOR, e.g. 3.12")
        platform = platform or f"{host_platform.machine()}-manylinux_2_28"
        if not PLATFORM.fullmatch(platform):
            raise UsageError(
                f"--platform {platform!r}: give a Linux target as ARCH-manylinux_X_Y, e.g. "
                "x86_64-manylinux_2_28 or aarch64-manylinux_2_28 (GPU runners are Linux)"
            )
        return cls(python, platform)


@dataclasses.dataclass
class Made:
    directory: Path
    target: Target
    resolved: dict[str, dict[str, str]]  # stack (or requirements file) -> name -> version
    skipped: dict[str, str]  # stack -> why it is not in the wheelhouse
    files: list[dict]  # name, size_bytes, sha256, how ("downloaded" | "built" | "compat")
    have: dict[str, str] = dataclasses.field(default_factory=dict)  # left out: the host has name==version
    parts: list[dict] = dataclasses.field(default_factory=list)  # --max-part: name, stacks, cells, files, size_bytes
    manifest: dict = dataclasses.field(default_factory=dict)  # what compat-wheelhouse.json says, once written

    @property
    def total_bytes(self) -> int:
        return sum(f["size_bytes"] for f in self.files)


def make(
    directory: Path,
    stacks: list[Stack],
    requirement_files: list[Path],
    project: Path | None,
    target: Target,
    log=print,
    have: dict[str, str] | None = None,
    max_part: int | None = None,
    cells: dict[str, list[str]] | None = None,
) -> Made:
    """Fill `directory` (made if missing; wheels already there are kept) for `target`. `have`: name ->
    version of what the target host has installed (its `pip freeze`): each stack is resolved with
    those versions where it can take them, and a wheel the host already has is left out. With
    `max_part` (bytes), the wheels are also laid out in folders part-1, part-2... of at most that
    size, each holding every wheel its stacks (and requirements files, and compat) need, so each
    makes its own envs when carried alone; `cells`: stack -> the grid cells it runs, listed with
    the part that unlocks them."""
    have = have or {}
    uv = find_uv()
    if uv is None:
        raise CompatError("compat wheelhouse needs uv to resolve for another interpreter (pip install uv)")
    directory.mkdir(parents=True, exist_ok=True)
    resolved, skipped = _resolve_stacks(uv, stacks, target, have)
    for path in requirement_files:
        lines = _requirement_lines(path)
        reqs = [line.split("#", 1)[0].strip() for line in lines]
        resolved[str(path)] = _compile(uv, [r for r in reqs if r and not r.startswith("-")], target, str(path), have)
    files: list[dict] = []
    if project is not None:
        files.append(_build_compat(project, directory, log))
        resolved["compat"] = _compile(uv, _compat_requirements(project), target, "compat's own requirements", have)
    # every version any stack resolved to goes in (hf2024's transformers and hf2026's, both), but
    # what the host has, at that version
    kept = {}
    for name, version in sorted({pin for pins in resolved.values() for pin in pins.items()}):
        if have.get(name) == version:
            kept[name] = version
        else:
            files.append({**_fetch(name, version, target, directory, log), "pin": f"{name}=={version}"})
    if kept:
        log(f"  left out, the host has them: {', '.join(f'{n}=={v}' for n, v in kept.items())}")
    made = Made(directory, target, resolved, skipped, files, kept)
    if max_part is not None:
        made.parts = _parts(made, max_part, cells or {})
        _lay_out(directory, made.parts)
    _write_manifest(made)
    return made


def _resolve_stacks(uv: str, stacks: list[Stack], target: Target, have: dict) -> tuple[dict, dict]:
    """(stack -> name -> version, stack -> why it is left out) for the target."""
    resolved: dict[str, dict[str, str]] = {}
    skipped: dict[str, str] = {}
    for stack in stacks:
        if stack.torch != "inherit":
            skipped[stack.name] = f"it installs its own torch ({stack.torch}); a wheelhouse leaves torch to the runner"
            continue
        if stack.python and not SpecifierSet(stack.python).contains(f"{target.python}.0", prereleases=True):
            skipped[stack.name] = f"it installs on Python {stack.python}" + (
                f" ({stack.python_why})" if stack.python_why else ""
            )
            continue
        # the stack's own packages follow its specifiers: a canary's newest, never the host's older one
        own = {canonicalize_name(n) for n, _ in stack.packages}
        prefer = {n: v for n, v in have.items() if canonicalize_name(n) not in own}
        resolved[stack.name] = _compile(uv, stack.requirements(), target, f"stack {stack.name}", prefer)
    return resolved, skipped


def _parts(made: Made, max_part: int, cells: dict[str, list[str]]) -> list[dict]:
    """The parts of a wheelhouse (packed), each with the grid cells its stacks unlock."""
    by_pin = {f["pin"]: f for f in made.files if "pin" in f}
    units = {
        unit: [by_pin[f"{n}=={v}"] for n, v in pins.items() if f"{n}=={v}" in by_pin]
        + [f for f in made.files if unit == "compat" and f["how"] == "compat"]
        for unit, pins in made.resolved.items()
    }
    return [
        {**part, "cells": sorted(c for u in part["stacks"] for c in cells.get(u, []))}
        for part in packed(units, max_part)
    ]


def packed(units: dict[str, list[dict]], most: int) -> list[dict]:
    """Parts of at most `most` bytes for `units` (a stack, a requirements file or compat -> the
    wheel entries it needs): each part holds every wheel of its units, a wheel two parts need in
    both; the largest unit first, into the first part it fits (first fit decreasing). UsageError
    for a unit larger than a part alone."""
    parts: list[tuple[list[str], dict[str, dict]]] = []
    for unit, entries in sorted(units.items(), key=lambda kv: (-sum(e["size_bytes"] for e in kv[1]), kv[0])):
        need = {e["name"]: e for e in entries}
        size = sum(e["size_bytes"] for e in need.values())
        if size > most:
            raise UsageError(
                f"--max-part: {unit} needs {size / 2**20:,.1f} MiB of wheels, more than a part of "
                f"{most / 2**20:,.1f} MiB; give a larger --max-part, or --have with what the host has"
            )
        for names, held in parts:
            if sum(e["size_bytes"] for e in (held | need).values()) <= most:
                names.append(unit)
                held.update(need)
                break
        else:
            parts.append(([unit], dict(need)))
    return [
        {
            "name": f"part-{i}",
            "stacks": sorted(names),
            "files": sorted(held),
            "size_bytes": sum(e["size_bytes"] for e in held.values()),
        }
        for i, (names, held) in enumerate(parts, 1)
    ]


def _lay_out(directory: Path, parts: list[dict]) -> None:
    """Each part's wheels in its own folder, linked to the wheelhouse's (copied where links fail)."""
    for part in parts:
        folder = directory / part["name"]
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        for name in part["files"]:
            try:
                os.link(directory / name, folder / name)
            except OSError:
                shutil.copy2(directory / name, folder / name)


def read_have(path: Path) -> dict[str, str]:
    """name -> version of a host's `pip freeze` (lines `name==version`; editable and direct-URL
    lines, which no index serves, left out); UsageError naming --have for a file that is not one."""
    pins = parse_pins("\n".join(_lines(path, "--have")))
    if not pins:
        raise UsageError(f"--have {path}: no `name==version` line: not a pip freeze")
    return pins


def _requirement_lines(path: Path) -> list[str]:
    return _lines(path, "--requirement")


def _lines(path: Path, flag: str) -> list[str]:
    """A text file's lines (a requirements file, a pip freeze): a regular file of UTF-8 text
    (tomldata.read_regular: a device or a FIFO is not read for ever), else UsageError naming it."""
    from harness.tomldata import NotAFile, read_regular

    try:
        return read_regular(path).decode("utf-8").splitlines()
    except NotAFile as exc:
        raise UsageError(f"{flag} {path}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{flag} {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot be read: {exc.strerror}") from None


def _compile(uv: str, requirements: list[str], target: Target, what: str, have: dict | None = None) -> dict[str, str]:
    """name -> version of everything `requirements` needs on `target`, torch left out; each package
    at the host's version (`have`) where the requirements can take it, whatever the others do (the
    host's versions are the resolver's preferences, as a lock file's are: uv pip compile reads them
    from the output file it is given). As constraints, one host version a stack could not take
    (huggingface-hub 1.33 under transformers 5.23) dropped every other: the lent H200's numpy was
    carried again, and hf2026 needed 86 MiB where 58 do."""
    if not requirements:
        return {}
    with tempfile.TemporaryDirectory(prefix="compat-wheelhouse-") as tmp:
        excludes = Path(tmp, "excludes.txt")
        excludes.write_text("torch\n", encoding="utf-8")
        preferred = Path(tmp, "preferred.txt")
        preferred.write_text("".join(f"{n}=={v}\n" for n, v in sorted((have or {}).items()) if n != "torch"), "utf-8")
        cmd = [
            uv,
            "pip",
            "compile",
            "--quiet",
            "--no-header",
            "--no-annotate",
            "--python-version",
            target.python,
            "--python-platform",
            target.platform,
            "--excludes",
            str(excludes),
            "--output-file",
            str(preferred),
            "-",
        ]
        try:
            out = subprocess.run(cmd, input="\n".join(requirements) + "\n", capture_output=True, text=True, timeout=600)
            resolved = preferred.read_text(encoding="utf-8") if out.returncode == 0 else ""
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise CompatError(f"resolving {what} for Python {target.python} on {target.platform}: {exc}") from None
    if out.returncode != 0:
        raise CompatError(
            f"resolving {what} for Python {target.python} on {target.platform} failed: {out.stderr.strip()[-2000:]}"
        )
    return parse_pins(resolved)


def _has_pip() -> bool:
    import importlib.util

    return importlib.util.find_spec("pip") is not None


def pip_command() -> list[str]:
    """pip as this interpreter has it, else pip run by uv (`uv tool run --from pip pip`): an
    interpreter uv made (a uv venv, what uvx gives) has no pip, and a wheelhouse made under one
    failed with "No module named pip" for every package (issue 42). pip, not uv, downloads: uv
    has no download command; where neither is found, compat's own dependency on uv is missing."""
    if _has_pip():
        return [sys.executable, "-m", "pip"]
    uv = find_uv()
    if uv is None:
        raise CompatError("compat wheelhouse needs pip or uv to download wheels (pip install uv)")
    return [uv, "tool", "run", "--from", "pip", "pip"]


def _pip(*args: str, env: dict | None = None, timeout: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*pip_command(), *args, "--disable-pip-version-check", "--no-input"],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def _fetch(name: str, version: str, target: Target, directory: Path, log) -> dict:
    """The wheel of name==version for the target: downloaded, or built here where PyPI has only
    a source distribution (a build that is not pure Python cannot serve another target)."""
    before = set(directory.glob("*.whl"))
    platforms = [arg for tag in target.pip_platforms for arg in ("--platform", tag)]
    got = _pip(
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        target.python,
        "--implementation",
        "cp",
        *platforms,
        "--dest",
        str(directory),
        f"{name}=={version}",
    )
    how = "downloaded"
    if got.returncode != 0:
        # DeepSpeed publishes only a source distribution; with DS_BUILD_OPS=0 it builds a pure wheel
        got = _pip("wheel", "--no-deps", "--wheel-dir", str(directory), f"{name}=={version}", env={"DS_BUILD_OPS": "0"})
        how = "built"
        if got.returncode != 0:
            raise CompatError(
                f"{name}=={version}: no wheel for Python {target.python} on {target.platform}, and it does "
                f"not build here: {got.stderr.strip()[-1500:]}"
            )
    wheel = _wheel_of(directory, name, version, before)
    if how == "built" and not wheel.name.endswith("-none-any.whl"):
        wheel.unlink()
        raise CompatError(
            f"{name}=={version}: PyPI has no wheel for Python {target.python} on {target.platform}, and its "
            f"source builds into {wheel.name}, for this machine only"
        )
    log(f"  {wheel.name}  {wheel.stat().st_size / 2**20:,.1f} MiB  ({how})")
    return _entry(wheel, how)


def _wheel_of(directory: Path, name: str, version: str, before: set) -> Path:
    norm = canonicalize_name(name).replace("-", "_")
    for wheel in sorted(directory.glob("*.whl")):
        dist, ver = wheel.name.split("-")[:2]
        if canonicalize_name(dist).replace("-", "_") == norm and ver == version:
            return wheel
    new = sorted(set(directory.glob("*.whl")) - before)
    raise CompatError(f"{name}=={version}: pip left {', '.join(w.name for w in new) or 'no wheel'} in {directory}")


def _build_compat(project: Path, directory: Path, log) -> dict:
    with tempfile.TemporaryDirectory(prefix="compat-wheel-") as tmp:
        got = _pip("wheel", "--no-deps", "--wheel-dir", tmp, str(project))
        if got.returncode != 0:
            raise CompatError(f"building compat's own wheel from {project} failed: {got.stderr.strip()[-1500:]}")
        (built,) = Path(tmp).glob("*.whl")
        wheel = directory / built.name
        shutil.copy2(built, wheel)
    log(f"  {wheel.name}  {wheel.stat().st_size / 2**20:,.1f} MiB  (compat, built from {project})")
    return _entry(wheel, "compat")


def _compat_requirements(project: Path) -> list[str]:
    import tomllib

    with open(project / "pyproject.toml", "rb") as f:
        return list(tomllib.load(f)["project"]["dependencies"])


def _entry(wheel: Path, how: str) -> dict:
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    return {"name": wheel.name, "size_bytes": wheel.stat().st_size, "sha256": digest, "how": how}


def _write_manifest(made: Made) -> None:
    doc = {
        "made_by": "compat wheelhouse",
        "made_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "target": dataclasses.asdict(made.target),
        "resolved": made.resolved,
        "skipped": made.skipped,
        "files": made.files,
        "total_bytes": made.total_bytes,
        "left_out_the_host_has": made.have,
        "parts": made.parts,
    }
    from harness.evidence.records import write_atomic

    write_atomic(made.directory / MANIFEST, json.dumps(doc, indent=1) + "\n")
    made.manifest = doc


MANIFEST_MAX_BYTES = 16 * 2**20  # a manifest lists a few hundred files; anything larger is not one


def stacks_held(folders: list[Path]) -> set[str] | None:
    """The stacks the wheelhouse folders given to `compat run --find-links` hold: a folder compat
    wheelhouse filled (its compat-wheelhouse.json) holds every stack it resolved, a part of one
    (part-N beside the manifest) the stacks the manifest gives that part. None where a folder has
    no manifest compat can read (wheels gathered some other way: nothing can be told)."""
    held: set[str] = set()
    for folder in folders:
        stacks = _stacks_of(Path(folder))
        if stacks is None:
            return None
        held |= stacks
    return held


def _stacks_of(folder: Path) -> set[str] | None:
    for path, part in ((folder / MANIFEST, None), (folder.parent / MANIFEST, folder.name)):
        try:
            if path.stat().st_size > MANIFEST_MAX_BYTES:
                return None
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        if not isinstance(doc, dict):
            return None
        if part is None:
            resolved = doc.get("resolved")
            return {str(s) for s in resolved} if isinstance(resolved, dict) else None
        parts = doc.get("parts") if isinstance(doc.get("parts"), list) else []
        mine = next((p for p in parts if isinstance(p, dict) and p.get("name") == part), None)
        stacks = mine.get("stacks") if mine else None
        return {str(s) for s in stacks} if isinstance(stacks, list) else None
    return None
