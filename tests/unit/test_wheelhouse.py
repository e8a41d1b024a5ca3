"""compat wheelhouse's target and its refusals, without the network (the wheels themselves:
tests/integration/test_wheelhouse_offline.py)."""

import json

import pytest

from harness.errors import UsageError
from harness.run.wheelhouse import Target

from conftest import assert_clean_error, call_compat


def test_a_target_names_every_manylinux_its_glibc_runs():
    target = Target.parse("3.12", "x86_64-manylinux_2_28")
    tags = target.pip_platforms
    assert tags[0] == "manylinux_2_28_x86_64" and tags[-2:] == ["manylinux_2_5_x86_64", "manylinux1_x86_64"]
    assert {"manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "manylinux_2_17_x86_64"} <= set(tags)
    assert Target.parse("3.11", "aarch64-manylinux_2_17").pip_platforms[:2] == [
        "manylinux_2_17_aarch64",
        "manylinux2014_aarch64",
    ]


@pytest.mark.parametrize(
    "python, platform, says",
    [
        ("312", None, "--python '312': give the target's Python as MAJOR.MINOR, e.g. 3.12"),
        ("3.12", "win_amd64", "--platform 'win_amd64': give a Linux target as ARCH-manylinux_X_Y"),
    ],
)
def test_a_target_that_is_not_one_is_refused(python, platform, says):
    with pytest.raises(UsageError) as err:
        Target.parse(python, platform)
    assert str(err.value).startswith(says)


def test_an_unknown_stack_is_bad_input_before_anything_is_fetched(tmp_path):
    proc = call_compat("wheelhouse", str(tmp_path / "w"), "--stacks", "hf2025,hf2062")
    assert_clean_error(proc, 2)
    assert "--stacks: unknown stack 'hf2062' (did you mean 'hf2026'?)" in proc.stderr
    assert not (tmp_path / "w").exists()


def test_have_reads_a_pip_freeze_and_refuses_what_is_not_one(tmp_path):
    """Issue 42: --have FILE, the host's `pip freeze`: its name==version lines, names canonical;
    editable and direct-URL lines (no index serves them) left out; a file that is not one named."""
    from harness.errors import UsageError
    from harness.run.wheelhouse import read_have

    freeze = tmp_path / "freeze.txt"
    freeze.write_text(
        "PyYAML==6.0.2\n-e git+https://example.invalid/x.git#egg=x\nfoo @ file:///tmp/foo.whl\nhf_xet==1.1.0\n"
    )
    assert read_have(freeze) == {"pyyaml": "6.0.2", "hf-xet": "1.1.0"}
    (tmp_path / "junk.txt").write_bytes(b"\xff\xfe")
    for path, why in ((tmp_path / "junk.txt", "not UTF-8 text"), (tmp_path / "missing", "cannot be read")):
        with pytest.raises(UsageError, match=f"--have {path}: {why}"):
            read_have(path)
    (tmp_path / "empty.txt").write_text("# nothing\n")
    with pytest.raises(UsageError, match="no `name==version` line"):
        read_have(tmp_path / "empty.txt")


def test_parts_hold_every_wheel_of_their_stacks_within_the_size():
    """Issue 42: --max-part packs stacks (and requirements files, compat) into parts of at most N
    bytes, each able to make its stacks' envs alone: a wheel two parts need is in both. The wheel
    entries are made-up sizes (a test of the packing, not of a real wheelhouse)."""
    from harness.errors import UsageError
    from harness.run.wheelhouse import packed

    def wheel(name, mib):
        return {"name": name, "size_bytes": int(mib * 2**20)}

    shared = wheel("numpy.whl", 15)
    units = {
        "hf2024": [wheel("transformers-4.40.whl", 9), shared],
        "hf2026": [wheel("transformers-5.23.whl", 13), shared],
        "requirements/gpu-stack.txt": [wheel("bitsandbytes.whl", 41)],
        "compat": [wheel("compat.whl", 1), wheel("msgspec.whl", 0.5)],
    }
    parts = packed(units, 60 * 2**20)
    assert all(p["size_bytes"] <= 60 * 2**20 for p in parts)
    for unit, entries in units.items():
        (part,) = [p for p in parts if unit in p["stacks"]]
        assert {e["name"] for e in entries} <= set(part["files"])
    assert sorted(u for p in parts for u in p["stacks"]) == sorted(units)
    assert [p["name"] for p in parts] == [f"part-{i}" for i in range(1, len(parts) + 1)] and len(parts) == 2
    with pytest.raises(UsageError, match="requirements/gpu-stack.txt needs 41.0 MiB of wheels, more than a part"):
        packed(units, 40 * 2**20)


def test_the_stacks_a_wheelhouse_folder_or_part_holds_are_read_from_its_manifest(tmp_path):
    from harness.run.wheelhouse import MANIFEST, stacks_held

    whole = tmp_path / "wheels"
    (whole / "part-1").mkdir(parents=True)
    (whole / "part-2").mkdir()
    doc = {
        "resolved": {"hf2024": {}, "hf2026": {}, "requirements/gpu-stack.txt": {}},
        "parts": [{"name": "part-1", "stacks": ["hf2024"]}, {"name": "part-2", "stacks": ["hf2026"]}],
    }
    (whole / MANIFEST).write_text(json.dumps(doc))
    assert stacks_held([whole / "part-1"]) == {"hf2024"}
    assert stacks_held([whole / "part-1", whole / "part-2"]) == {"hf2024", "hf2026"}
    assert stacks_held([whole]) >= {"hf2024", "hf2026"}
    assert stacks_held([tmp_path / "elsewhere"]) is None  # wheels gathered some other way: nothing known
    assert stacks_held([whole / "part-1", tmp_path]) is None
    for hostile in ("[1, 2]", '{"parts": 5}', "{not json", '{"resolved": "x"}'):
        (whole / MANIFEST).write_text(hostile)
        assert stacks_held([whole / "part-1"]) is None and stacks_held([whole]) is None


def test_offline_cells_of_a_stack_the_wheelhouse_does_not_hold_are_left_for_its_part(tmp_path, capsys):
    """A part of a wheelhouse carried alone: `compat run --offline` runs its stacks' cells and the
    `local` stack's, and leaves the rest (they could only fail to install, and an install-error
    record would say the stack cannot be installed)."""
    from argparse import Namespace

    from harness.catalog.cell import Cell
    from harness.catalog.matrix import MatrixData
    from harness.commands import run
    from harness.run import runner
    from harness.run.hardware import Host
    from harness.run.wheelhouse import MANIFEST

    from conftest import ROOT

    data = MatrixData.load(ROOT / "matrix")
    cells = [Cell.parse(f"cpu-{s}-fp32-none-full-single") for s in ("local", "hf2024", "hf2026")]
    planned = runner.plan(cells, Host("cpu", (), None, None, ""))
    (tmp_path / MANIFEST).write_text(json.dumps({"resolved": {"hf2024": {}}}))
    given = Namespace(offline=True, find_links=[str(tmp_path)])
    keep = run._in_wheelhouse(given, planned, data)
    assert [p.cell.stack for p in keep] == ["local", "hf2024"]
    assert (
        capsys.readouterr().out
        == "1 cells of stacks the wheelhouse given does not hold (hf2026) are left for a run with their part\n"
    )
    # online, or wheels that no manifest describes: nothing is left out
    assert run._in_wheelhouse(Namespace(offline=False, find_links=[str(tmp_path)]), planned, data) == planned
    (tmp_path / MANIFEST).unlink()
    assert run._in_wheelhouse(given, planned, data) == planned


@pytest.mark.parametrize(
    "given, files",
    [
        ([], ["requirements/gpu-stack.txt"]),
        (["--stacks", "hf2024"], []),
        (["--stacks", "hf2024", "-r", "x.txt"], ["x.txt"]),
    ],
    ids=["nothing-chosen", "stacks-alone", "stacks-and-a-file"],
)
def test_the_local_stacks_requirements_come_along_only_when_nothing_is_chosen(tmp_path, monkeypatch, given, files):
    """`--stacks hf2024` alone is that stack: the local stack's 59 MiB (bitsandbytes, transformers)
    came along too, and had to be turned away with an empty requirements file."""
    from harness.run import wheelhouse

    from conftest import ROOT

    (tmp_path / "x.txt").write_text("")
    asked = {}

    def stop(directory, stacks, requirement_files, *rest, **kw):
        asked["files"] = [str(p).replace(str(ROOT) + "/", "") for p in requirement_files]
        raise UsageError("stopped before any download")

    monkeypatch.setattr(wheelhouse, "make", stop)
    monkeypatch.chdir(tmp_path)
    proc = call_compat("wheelhouse", str(tmp_path / "w"), "--no-compat", *given)
    assert proc.returncode == 2 and "stopped before any download" in proc.stderr
    assert asked["files"] == files
