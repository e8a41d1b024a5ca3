"""One virtual environment per stack, keyed by its resolved pins, reused across runs.

How a stack env is made (uv; pip where uv is missing):

    base interpreter  ── the one compat runs under, or `compat run --python PATH`: it provides torch
        │
        └─ <envs>/<stack>-<key>/   a venv of the same Python, with
               compat-inherit.pth  (torch = "inherit") every site folder the base has, in the
                                   base's order, added with site.addsitedir AFTER the env's own
                                   site-packages: its own, a system one it sees through
                                   --system-site-packages (tox's gpu-matrix env, a venv over an
                                   NGC container's torch), its user site, and whatever their .pth
                                   files add. The stack's transformers / peft / accelerate shadow
                                   the base's; torch comes from it
               site-packages/      the stack's packages, resolved with torch excluded
                                   (uv --excludes; pip gets a torch==<the base's> constraint), so
                                   a stack env never replaces the runner's torch; or installed
                                   (torch = "==2.13.0")
               compat-env.json     written last: what was asked, what was installed; its
                                   presence is what makes the env reusable

A stack that cannot run on this runner is `StackUnsupported`, said before anything is installed
where it can be: one whose `python` specifier this base interpreter is outside of (hf2023's
tokenizers has no wheel for Python 3.12), one whose packages require another torch than the one
it would inherit (bitsandbytes >= 0.48 requires torch >= 2.4), read from the installed packages'
own metadata.

uv's shared cache means a second env with the same wheels hardlinks instead of copying. The key
hashes everything that decides the env's contents, so a changed pin or base interpreter makes a
new env and never mutates an old one. A canary stack resolves the newest releases first (`uv pip
compile`) and is keyed by what that resolved to: unchanged releases reuse the env.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from harness.catalog.stacks import Stack
from harness.errors import CompatError
from harness.run import classify, guard

ENV_FORMAT = 2  # 2: the base's site folders and torch version are part of the key
INHERIT_PTH = "compat-inherit.pth"
MARKER = "compat-env.json"
INSTALL_TIMEOUT_S = 1800


class InstallError(CompatError):
    """A stack's environment could not be made; the message is the installer's own."""


class StackUnsupported(InstallError):
    """The stack cannot run on this runner (its Python, the torch it would inherit): its cells are
    `unsupported` with this reason, not an install error."""


@dataclasses.dataclass(frozen=True)
class StackEnv:
    stack: str
    python: str  # the interpreter cells of this stack run in
    path: Path | None  # the env folder (None for provider = "current")
    key: str
    info: dict  # what goes into each record's `stack`


def _check_base(stack: Stack, base: dict) -> None:
    """The base interpreter can carry `stack`: a Python it installs on, and torch where the stack
    takes torch from it."""
    if stack.python and not SpecifierSet(stack.python).contains(base["version"], prereleases=True):
        raise StackUnsupported(
            f"stack {stack.name} installs on Python {stack.python}"
            + (f" ({stack.python_why})" if stack.python_why else "")
            + f"; this runner's Python is {base['version']} ({base['executable']})"
        )
    if stack.torch == "inherit" and not base.get("torch"):
        raise InstallError(
            f"stack {stack.name} takes torch from the base interpreter {base['executable']}, which has "
            "none: install the runner's torch there, or name an interpreter that has it (compat run --python)"
        )


@dataclasses.dataclass
class EnvManager:
    root: Path  # where envs live
    base_python: str = sys.executable  # provides torch for torch = "inherit"
    offline: bool = False
    find_links: tuple[str, ...] = ()
    log: callable = print

    def __post_init__(self) -> None:
        self._base: dict | None = None
        self._uv = find_uv()
        self._held: dict[Path, int] = {}  # env -> the shared lock this process holds on it until it ends

    # -- public ------------------------------------------------------------------------------

    def ensure(self, stack: Stack) -> StackEnv:
        if stack.current:
            return StackEnv(
                stack.name,
                self.base_python,
                None,
                "current",
                {"name": stack.name, "provider": "current", "python": self.base_python, "canary": False},
            )
        t0 = time.perf_counter()
        base = self.base()
        _check_base(stack, base)
        resolved = self._resolve_canary(stack, base) if stack.canary else None
        key_src = {
            "format": ENV_FORMAT,
            "base_python": base["executable"],
            "base_version": base["version"],
            "torch": stack.torch,
            "requirements": stack.requirements(resolved),
        }
        if stack.torch == "inherit":  # a new torch or site layout on the runner makes a new env
            key_src.update(base_torch=base["torch"], base_site=base["site_dirs"])
        key = hashlib.sha256(json.dumps(key_src, sort_keys=True).encode()).hexdigest()[:12]
        path = self.root / f"{stack.name}-{key}"
        reused = self._make_or_reuse(stack, path, base, resolved, key_src)
        info = {
            "name": stack.name,
            "provider": "env",
            "canary": stack.canary,
            "torch": "inherit" if stack.torch == "inherit" else "installed",
            "torch_from": base["executable"] if stack.torch == "inherit" else None,
            "requested": stack.pins(),
            "resolved": resolved,
            "env": str(path),
            "key": key,
            "reused": reused,
            "installer": "uv" if self._uv else "pip",
            "setup_s": round(time.perf_counter() - t0, 3),
        }
        return StackEnv(stack.name, str(path / "bin" / "python"), path, key, info)

    def _make_or_reuse(self, stack: Stack, path: Path, base: dict, resolved, key_src: dict) -> bool:
        """The env at `path`, made if it is not there; held shared from then on. True: reused."""
        if path in self._held:  # this process holds it already (a preflight's second variant)
            os.utime(path / MARKER)
            return True
        # Every compat that uses an env holds its lock shared until it ends, so any number of runs
        # (several compat processes, Ray workers on one node) use one env at once, and prune, which
        # takes it exclusive without waiting, never removes an env in use. A run that finds the env
        # missing or half-made takes the make lock (one maker at a time), then the env's lock
        # exclusive to make it, then shared; the others wait for the maker and reuse what it made.
        lock = env_lock(path, self.log)
        try:
            if _complete(path):
                os.utime(path / MARKER)  # last used
                self._held[path] = lock
                return True
            fcntl.flock(lock, fcntl.LOCK_UN)
            with _make_lock(path, log=self.log):
                fcntl.flock(lock, fcntl.LOCK_EX)  # the users of a complete env never wait on this: there is none
                reused = _complete(path)  # another compat made it while this one waited
                if not reused:
                    try:
                        self._create(stack, path, base, stack.requirements(resolved), key_src)
                    except BaseException:
                        shutil.rmtree(path, ignore_errors=True)  # a failed env leaves nothing behind
                        raise
                os.utime(path / MARKER)
                # made: from now on only in use. flock's conversion is not atomic, but prune takes
                # the make lock first, and it is held until this one is shared
                fcntl.flock(lock, fcntl.LOCK_SH)
        except BaseException:
            os.close(lock)
            raise
        self._held[path] = lock
        return reused

    def base(self) -> dict:
        """The base interpreter: its real executable, version, torch version (from its metadata:
        nothing is imported) and site folders, in its sys.path order."""
        if self._base is None:
            self._base = probe_base(self.base_python)
        return self._base

    # -- making an env -------------------------------------------------------------------------

    def _create(self, stack: Stack, path: Path, base: dict, requirements: list[str], key_src: dict) -> None:
        """Build the env in place; the marker is written last, so a half-made env (a failed or
        killed install) has none and is wiped and made again next time."""
        self.log(f"  env {path.name}: creating ({', '.join(requirements) or 'no packages'})")
        shutil.rmtree(path, ignore_errors=True)
        self.root.mkdir(parents=True, exist_ok=True)
        if self._uv:
            self._run([self._uv, "venv", "--quiet", "--python", base["executable"], str(path)], "venv")
        else:
            self._run([base["executable"], "-m", "venv", str(path)], "venv")
        python = path / "bin" / "python"
        site = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if stack.torch == "inherit":
            Path(site, INHERIT_PTH).write_text(inherit_pth(base["site_dirs"]), encoding="utf-8")
        if requirements:
            self._install(python, requirements, base if stack.torch == "inherit" else None)
        if stack.torch == "inherit":
            self._check_torch_requirements(stack, python, site, base)
        (path / MARKER).write_text(
            json.dumps(
                {
                    "stack": stack.name,
                    "key_source": key_src,
                    "requirements": requirements,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                },
                indent=1,
            ),
            encoding="utf-8",
        )

    def _install(self, python: Path, requirements: list[str], inherit: dict | None) -> None:
        """Install `requirements`; with `inherit` (the base), torch is never installed."""
        if self._uv:
            cmd = [self._uv, "pip", "install", "--quiet", "--python", str(python)]
            if inherit:
                cmd += ["--excludes", str(self._excludes())]
        else:
            # pip sees the inherited torch through the .pth file; the constraint keeps it there
            # (without it pip would install another torch into the env for a package that asks)
            cmd = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
            if inherit:
                held = python.parent.parent / "compat-torch-held.txt"
                held.write_text(f"torch=={inherit['torch']}\n", encoding="utf-8")
                cmd += ["--constraint", str(held)]
        if self.offline:
            cmd += ["--offline", "--no-index"] if self._uv else ["--no-index"]
        for folder in self.find_links:
            cmd += ["--find-links", folder]
        self._run(cmd + requirements, "install")

    def _check_torch_requirements(self, stack: Stack, python: Path, site: str, base: dict) -> None:
        """StackUnsupported when a package installed into the env requires another torch than the
        one it inherits (read from the packages' own Requires-Dist, markers evaluated by the env's
        interpreter): uv, with torch excluded, installs them anyway, and they fail at run time."""
        from packaging.requirements import InvalidRequirement, Requirement

        try:
            out = subprocess.run(
                [str(python), "-c", _REQUIRES_PROBE, site], capture_output=True, text=True, timeout=120, check=True
            )
            found = json.loads(out.stdout)
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            raise InstallError(f"reading the installed packages' requirements in {python}: {exc}") from None
        have = base["torch"]
        unmet = []
        for name, version, text in found["requires"]:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue  # not ours to judge; the installer accepted the package
            if req.name.lower() != "torch" or (req.marker and not req.marker.evaluate({**found["env"], "extra": ""})):
                continue
            if not req.specifier.contains(have, prereleases=True):
                unmet.append(f"{name} {version} requires torch{req.specifier}")
        if unmet:
            raise StackUnsupported(
                f"stack {stack.name} needs another torch than this runner's: {'; '.join(sorted(set(unmet)))}. "
                f"The runner's torch is {have} ({base['executable']}), and a stack env never replaces it"
            )

    def _excludes(self) -> Path:
        """uv's --excludes file: torch stays out of the resolution; the base provides it."""
        path = self.root / "compat-excludes.txt"
        self.root.mkdir(parents=True, exist_ok=True)
        path.write_text("torch\n", encoding="utf-8")
        return path

    def _run(self, cmd: list[str], what: str) -> None:
        """Run an installer step under a guard (harness/run/guard.py): if compat is killed meanwhile,
        the installer goes with it and leaves no half-made env behind being written to."""
        # DeepSpeed is built from its sdist: with DS_BUILD_OPS=0 it compiles no ops now (they are
        # built on first use, cached per env by the runner), so it installs in seconds
        env = {**os.environ, "UV_COMPILE_BYTECODE": "1", "PIP_NO_INPUT": "1", "DS_BUILD_OPS": "0"}
        with tempfile.TemporaryDirectory(prefix="compat-install-") as tmp:
            start_error = Path(tmp) / "start-error"
            proc = subprocess.Popen(
                guard.command(cmd, start_error),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                start_new_session=True,
            )
            try:
                out, err = proc.communicate(timeout=INSTALL_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                guard.stop(proc.pid, hard=True)
                proc.communicate()
                raise InstallError(f"{what} did not finish within {INSTALL_TIMEOUT_S} s: {' '.join(cmd)}") from None
            except BaseException:  # interrupted: the installer stops with us
                guard.stop(proc.pid, hard=True)
                raise
            why = guard.start_error(start_error) if proc.returncode == guard.START_FAILED else None
        if why:
            raise InstallError(f"{what}: {why}")
        if proc.returncode != 0:
            message = (err.strip() or out.strip())[-3000:]
            how = (
                f"was killed by {classify.signal_name(proc.returncode)}"
                if proc.returncode < 0
                else f"failed (exit {proc.returncode})"
            )
            raise InstallError(f"{what} {how}" + (f": {message}" if message else f": {' '.join(cmd)}"))

    def _resolve_canary(self, stack: Stack, base: dict) -> dict[str, str]:
        """The newest releases of the canary's packages, as the resolver picks them today."""
        names = [n for n, _ in stack.packages]
        if not self._uv:
            raise InstallError("a canary stack needs uv to resolve the newest releases (pip install uv)")
        cmd = [
            self._uv,
            "pip",
            "compile",
            "--quiet",
            "--no-header",
            "--no-annotate",
            "--python",
            base["executable"],
            "-",
        ]
        if stack.torch == "inherit":
            cmd += ["--excludes", str(self._excludes())]
        if self.offline:
            cmd += ["--offline", "--no-index"]
        for folder in self.find_links:
            cmd += ["--find-links", folder]
        try:
            out = subprocess.run(
                cmd, input="\n".join(stack.requirements()) + "\n", capture_output=True, text=True, timeout=600
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InstallError(f"resolving canary {stack.name}: {exc}") from None
        if out.returncode != 0:
            raise InstallError(f"resolving canary {stack.name} failed: {out.stderr.strip()[-3000:]}")
        pinned = parse_pins(out.stdout)
        return {n: pinned[canonicalize_name(n)] for n in names if canonicalize_name(n) in pinned}


def parse_pins(text: str) -> dict[str, str]:
    """name -> version of each `name==version` line of `uv pip compile`'s output (names
    canonical: lower case, '-' for '_' and '.'); comments, hashes and markers left out."""
    pins = {}
    for line in text.splitlines():
        name, sep, version = line.split("#", 1)[0].split(";", 1)[0].strip().partition("==")
        if sep and name.strip() and version.strip():
            pins[canonicalize_name(name.strip().split("[")[0])] = version.strip()
    return pins


def inherit_pth(site_dirs: list[str]) -> str:
    """compat-inherit.pth: one `import` line (a .pth file runs those) that adds each of the
    base's site folders with site.addsitedir, so their own .pth files (an editable install, a
    path to a system torch) are read as the base reads them."""
    return "import site; " + "; ".join(f"site.addsitedir({d!r})" for d in site_dirs) + "\n"


# Run by the base interpreter: what a stack env inherits from it. Its site folders are those of
# site.getsitepackages() (a venv's own, and the system's under --system-site-packages) and the
# user site where the base reads it, in sys.path order; torch's version comes from its metadata.
_BASE_PROBE = """
import importlib.metadata as md, json, os, site, sys
wanted = set(site.getsitepackages()) | ({site.getusersitepackages()} if site.ENABLE_USER_SITE else set())
dirs = [p for p in dict.fromkeys(sys.path) if p in wanted and os.path.isdir(p)]
try:
    torch = md.version("torch")
except md.PackageNotFoundError:
    torch = None
print(json.dumps({"executable": sys.executable, "version": sys.version.split()[0], "torch": torch, "site_dirs": dirs}))
"""

BASE_PYTHON_MIN = Version("3.8")  # the probe's importlib.metadata; stacks say what they need beyond
PROBE_TIMEOUT_S = 60


def probe_base(python: str, label: str = "") -> dict:
    """What the base interpreter `python` says of itself (_BASE_PROBE): its real executable,
    version, torch version and site folders. InstallError, naming it as `label` (default "base
    interpreter PATH"), where it cannot be started, fails, does not answer, or answers with
    anything but a Python of BASE_PYTHON_MIN or later (/bin/true, /bin/echo, a Python 2)."""
    label = label or f"base interpreter {python}"
    try:
        out = subprocess.run(
            [python, "-c", _BASE_PROBE],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=PROBE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except OSError as exc:
        raise InstallError(f"{label}: {exc.strerror}") from None
    except subprocess.TimeoutExpired:
        raise InstallError(f"{label}: no answer within {PROBE_TIMEOUT_S} s") from None
    if out.returncode != 0:
        said = out.stderr.strip()[-500:]
        raise InstallError(f"{label} failed (exit code {out.returncode})" + (f": {said}" if said else ""))
    try:
        base = json.loads(out.stdout)
        usable = Version(base["version"]) >= BASE_PYTHON_MIN and isinstance(base["executable"], str)
        usable = usable and isinstance(base["site_dirs"], list) and isinstance(base["torch"], str | None)
    except (ValueError, TypeError, KeyError):  # not JSON, not a dict of these, not a version
        usable = False
    if not usable:
        said = (out.stdout.strip().splitlines() or ["nothing"])[0][:200]
        raise InstallError(f"{label} is not a Python {BASE_PYTHON_MIN} or later: asked what it is, it said {said!r}")
    return base


# Run by a stack env's interpreter: the requirements of the packages installed in its own
# site-packages (argv[1]), and the values environment markers are evaluated against (as
# packaging.markers.default_environment computes them, with the standard library only).
_REQUIRES_PROBE = """
import importlib.metadata as md, json, os, platform, sys
def fmt(v):
    return f"{v.major}.{v.minor}.{v.micro}" + ("" if v.releaselevel == "final" else v.releaselevel[0] + str(v.serial))
env = {"implementation_name": sys.implementation.name, "implementation_version": fmt(sys.implementation.version),
       "os_name": os.name, "platform_machine": platform.machine(), "platform_release": platform.release(),
       "platform_system": platform.system(), "platform_version": platform.version(),
       "python_full_version": platform.python_version(),
       "platform_python_implementation": platform.python_implementation(),
       "python_version": ".".join(platform.python_version_tuple()[:2]), "sys_platform": sys.platform}
own = os.path.realpath(sys.argv[1])
requires = [[d.metadata["Name"], d.version, r] for d in md.distributions(path=[own]) for r in (d.requires or [])]
print(json.dumps({"env": env, "requires": requires}))
"""


def env_lock(path: Path, log=print) -> int:
    """An open descriptor holding the lock of the env `path` shared (flock on a lock file beside
    it: released when the process ends, however it ends), waiting for it where another compat is
    making the env or removing it (they hold it exclusive)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.parent / f".{path.name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        log(f"  env {path.name}: another compat is making it; waiting, then using it")
        fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


@contextlib.contextmanager
def _make_lock(path: Path, wait: bool = True, log=print):
    """The env's make lock, exclusive: one compat at a time makes (or removes) the env `path`.
    With wait=False, BlockingIOError where another holds it."""
    fd = os.open(path.parent / f".{path.name}.make", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                raise
            log(f"  env {path.name}: another compat is making it; waiting, then using it")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _complete(path: Path) -> bool:
    """Whether the env was made to the end: its marker is written last."""
    return (path / MARKER).is_file() and (path / "bin" / "python").exists()


def find_uv() -> str | None:
    exe = shutil.which("uv")
    if exe:
        return exe
    try:
        import uv  # the PyPI package ships the binary

        return uv.find_uv_bin()
    except (ImportError, FileNotFoundError):
        return None


def default_root() -> Path:
    if os.environ.get("COMPAT_ENV_DIR"):
        return Path(os.environ["COMPAT_ENV_DIR"])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "compat" / "envs"


def list_envs(root: Path) -> list[dict]:
    """Every env folder under `root`: the made ones (a marker), and the half-made ones a killed
    run left (no marker; `complete` false, last used when the folder last changed), which prune
    removes like any old env unless a compat is making them right now."""
    out = []
    if not root.is_dir():
        return out
    for path in sorted(root.iterdir()):
        if not path.is_dir() or path.name.startswith("."):
            continue
        marker = path / MARKER
        try:
            meta = json.loads(marker.read_text(encoding="utf-8")) if marker.is_file() else {}
        except (OSError, ValueError):
            meta = {}
        out.append(
            {
                "path": str(path),
                "complete": marker.is_file(),
                "stack": meta.get("stack", path.name.rsplit("-", 1)[0]),
                "requirements": meta.get("requirements", []),
                "torch": meta.get("key_source", {}).get("torch", "?"),
                **tree_size(path),
                "last_used": (marker if marker.is_file() else path).stat().st_mtime,
            }
        )
    return out


def remove_env(path: Path) -> bool:
    """Delete an env unless a compat is making it or running cells in it now (its make lock or
    its lock is held); True when it was removed."""
    try:
        with _make_lock(path, wait=False):
            fd = os.open(path.parent / f".{path.name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            try:
                shutil.rmtree(path, ignore_errors=True)
                return True
            finally:
                os.close(fd)
    except BlockingIOError:
        return False


def tree_size(path: Path) -> dict:
    """size_bytes: what the folder occupies; own_bytes: the part no other link shares (files uv
    hardlinked from its cache, or into other envs, are not in it): what deleting it frees."""
    seen, total, own = set(), 0, 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                st = os.lstat(os.path.join(dirpath, f))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
            if st.st_nlink == 1:
                own += st.st_blocks * 512
    return {"size_bytes": total, "own_bytes": own}
