"""compat wheelhouse's target and its refusals, without the network (the wheels themselves:
tests/integration/test_wheelhouse_offline.py)."""

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
