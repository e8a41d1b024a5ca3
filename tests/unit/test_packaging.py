"""The installed package is the checkout's: every folder of Python modules under harness/ is a
package pyproject.toml installs (tox installs compat as a wheel, so a folder left out there is
missing from every command it runs)."""

import tomllib

from conftest import ROOT


def test_every_module_folder_of_harness_is_installed():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    folders = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "harness").rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert folders <= listed, sorted(folders - listed)
