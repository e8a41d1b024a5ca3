"""Stack environments over a runner's own torch, made for real with uv (or venv + pip) from local
wheels only: no network. What a GPU runner looks like is rebuilt on this CPU: a venv made with
--system-site-packages whose torch comes from somewhere else, packages that require another torch
than the runner's, a stack pinned to older Pythons."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.catalog.stacks import Stack
from harness.run.envs import INHERIT_PTH, EnvManager, StackUnsupported

from conftest import make_wheel

torch = pytest.importorskip("torch")
TORCH_SITE = Path(torch.__file__).resolve().parents[1]  # the site-packages that holds this torch
TORCH_VERSION = torch.__version__


def stack(name="bare", packages=(), python="", python_why=""):
    return Stack(
        name=name,
        description="",
        current=False,
        canary=False,
        torch="inherit",
        packages=tuple(packages),
        python=python,
        python_why=python_why,
    )


def python_of(venv: Path) -> str:
    return str(venv / "bin" / "python")


def run(python: str, code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    return subprocess.run(
        [python, "-c", code], capture_output=True, text=True, timeout=120, env={**clean, **(env or {})}
    )


def test_a_stack_env_over_a_system_site_packages_venv_sees_the_torch_that_venv_sees(tmp_path, monkeypatch):
    """tox's gpu-matrix env is a venv made with --system-site-packages over a runner whose torch is
    the system's. A venv resolves --system-site-packages to the real base interpreter, so the
    "system" torch is put where that interpreter reads it: its user site, through a .pth file
    naming another venv's site-packages (this test's torch). The stack env made over that venv
    must import that torch, as the venv itself does; it used to get only the venv's own
    site-packages, and every stack but `local` failed with "No module named torch"."""
    userbase = tmp_path / "userbase"
    base_venv = tmp_path / "runner-venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(base_venv)], check=True
    )
    user_site = Path(
        run(
            python_of(base_venv), "import site; print(site.getusersitepackages())", {"PYTHONUSERBASE": str(userbase)}
        ).stdout.strip()
    )
    user_site.mkdir(parents=True)
    (user_site / "system-torch.pth").write_text(f"{TORCH_SITE}\n")
    seen = run(python_of(base_venv), "import torch; print(torch.__file__)", {"PYTHONUSERBASE": str(userbase)})
    assert seen.returncode == 0 and seen.stdout.startswith(str(TORCH_SITE)), seen.stderr  # the runner sees it

    monkeypatch.setenv("PYTHONUSERBASE", str(userbase))  # the environment compat runs in on that runner
    manager = EnvManager(root=tmp_path / "envs", base_python=python_of(base_venv), log=lambda line: None)
    env = manager.ensure(stack())
    assert manager.base()["torch"] == TORCH_VERSION
    got = run(env.python, "import sys, torch; print(torch.__file__); print(sys.path)")  # no PYTHONUSERBASE in cells
    assert got.returncode == 0, got.stderr
    where, path = got.stdout.splitlines()
    assert where.startswith(str(TORCH_SITE))
    own = str(Path(env.path, "lib", f"python{sys.version_info.major}.{sys.version_info.minor}", "site-packages"))
    order = eval(path)
    assert order.index(own) < order.index(str(user_site)) < order.index(str(TORCH_SITE))  # the stack's packages first
    assert "site.addsitedir" in next(Path(own).glob(INHERIT_PTH)).read_text()


def test_a_stack_env_never_replaces_the_inherited_torch(tmp_path):
    """A package that asks for torch gets the runner's: uv leaves torch out of the resolution, so
    the env has no torch of its own."""
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "needs-any-torch", "1.0", ["torch"])
    manager = EnvManager(root=tmp_path / "envs", offline=True, find_links=(str(wheels),), log=lambda line: None)
    env = manager.ensure(stack(packages=[("needs-any-torch", "==1.0")]))
    got = run(env.python, "import needs_any_torch, torch; print(torch.__file__)")
    assert got.returncode == 0 and got.stdout.startswith(str(TORCH_SITE)), got.stderr
    assert not list(Path(env.path).glob("lib/python*/site-packages/torch"))


def test_pip_where_uv_is_missing_is_held_to_the_runners_torch(tmp_path, monkeypatch):
    """pip has no way to leave torch out; a constraint on the runner's exact version keeps it from
    installing another torch into the env for a package that asks for one."""
    manager = EnvManager(root=tmp_path / "envs", log=lambda line: None)
    manager._uv = None
    commands = []
    monkeypatch.setattr(manager, "_run", lambda cmd, what: commands.append(cmd))
    venv = tmp_path / "env"
    (venv / "bin").mkdir(parents=True)
    manager._install(venv / "bin" / "python", ["peft==0.21.2"], manager.base())
    (cmd,) = commands
    held = Path(cmd[cmd.index("--constraint") + 1])
    assert held.read_text() == f"torch=={TORCH_VERSION}\n"
    assert cmd[-1] == "peft==0.21.2"


def test_a_package_that_requires_a_newer_torch_than_the_runners_makes_the_stack_unsupported(tmp_path):
    """bitsandbytes >= 0.48 requires torch >= 2.4: on a runner with an older torch, uv (torch
    excluded) installs it anyway and the cells would fail at run time for a reason that is the
    runner's. The stack is unsupported, the requirement named, and no env is left behind."""
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "needs-future-torch", "0.48.2", ["torch>=999.0", "torch<2; python_version < '3'"])
    manager = EnvManager(root=tmp_path / "envs", offline=True, find_links=(str(wheels),), log=lambda line: None)
    with pytest.raises(StackUnsupported) as err:
        manager.ensure(stack("bnbnew", [("needs-future-torch", "==0.48.2")]))
    assert str(err.value) == (
        f"stack bnbnew needs another torch than this runner's: needs-future-torch 0.48.2 requires torch>=999.0. "
        f"The runner's torch is {TORCH_VERSION} ({manager.base()['executable']}), and a stack env never replaces it"
    )
    assert list((tmp_path / "envs").glob("bnbnew-*")) == []


def test_a_stack_outside_its_pythons_is_unsupported_before_anything_is_installed(tmp_path):
    manager = EnvManager(root=tmp_path / "envs", offline=True, find_links=(str(tmp_path),), log=lambda line: None)
    version = manager.base()["version"]
    with pytest.raises(StackUnsupported) as err:
        manager.ensure(stack("old", [("transformers", "==4.33.0")], python="<3.0", python_why="no wheels for it"))
    assert str(err.value) == (
        f"stack old installs on Python <3.0 (no wheels for it); this runner's Python is {version} "
        f"({manager.base()['executable']})"
    )
    assert not (tmp_path / "envs").exists()


def test_a_base_without_torch_is_said_before_anything_is_installed(tmp_path):
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    manager = EnvManager(root=tmp_path / "envs", base_python=python_of(bare), log=lambda line: None)
    with pytest.raises(Exception) as err:
        manager.ensure(stack())
    assert "which has none: install the runner's torch there" in str(err.value)
    assert not isinstance(err.value, StackUnsupported)


def test_the_cells_of_a_stack_this_runner_cannot_run_are_unsupported_with_the_reason(tmp_path):
    from conftest import compat_home, run_compat

    home = compat_home(
        tmp_path / "home",
        """
        [old]
        python = "<3.0"
        python_why = "its tokenizers has no wheel for newer Pythons"
        transformers = "==4.33.0"
    """,
        """
        [product]
        hardware = ["cpu"]
        stack = ["old"]
        precision = ["fp32"]
        quantization = ["none"]
        method = ["full", "lora"]
        strategy = ["single"]
    """,
    )
    proc = run_compat(
        "run",
        "--matrix",
        str(home / "grid.toml"),
        "--results",
        str(tmp_path / "r"),
        "--no-table",
        "--env-dir",
        str(tmp_path / "envs"),
        env={"COMPAT_HOME": str(home)},
    )
    assert proc.returncode == 0, proc.stderr
    import json

    recs = [json.loads(line) for line in (tmp_path / "r" / "records.jsonl").read_text().splitlines()]
    assert [r["outcome"] for r in recs] == ["unsupported", "unsupported"]
    assert recs[0]["reason"].startswith(
        "stack old installs on Python <3.0 (its tokenizers has no wheel for newer Pythons); this runner's Python is 3."
    )
