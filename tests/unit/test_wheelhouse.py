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
