"""Inputs that are not what they claim to be, or far larger, end at once in a clear error (issue 18,
finding 8): a device or a FIFO named as a matrix or a config, a grid whose product is millions of
cells, a --select whose braces expand to a million patterns. The subprocess time limits are guards
against the hang or the unbounded growth the finding saw (22 GB for /dev/zero, a FIFO waited on
for ever, MemoryError after 83 s), not speed targets: each answer comes in about a second.
How fast and how small `compat table` is on 200k records is measured in bench/table.py."""

import json
import os

import pytest

from harness.evidence import records, summary
from harness.render import table

from conftest import assert_clean_error, real_records


@pytest.fixture
def fifo(tmp_path):
    def make(name):
        path = tmp_path / name
        os.mkfifo(path)
        return path

    return make


def test_a_device_named_as_a_matrix_is_refused_not_read(compat):
    proc = compat("list", "--matrix", "/dev/zero", timeout=60)
    assert_clean_error(proc, 2)
    assert "/dev/zero: is a device, not a regular file" in proc.stderr


def test_a_fifo_named_as_a_matrix_or_a_config_is_refused_not_waited_on(compat, fifo):
    proc = compat("list", "--matrix", str(fifo("grid.toml")), timeout=60)
    assert_clean_error(proc, 2)
    assert "grid.toml: is a FIFO, not a regular file" in proc.stderr
    proc = compat("preflight", str(fifo("train.yaml")), timeout=60)
    assert_clean_error(proc, 2)
    assert "train.yaml: is a FIFO, not a regular file" in proc.stderr
    proc = compat("fit", "--model", str(fifo("config.json")), timeout=60)
    assert_clean_error(proc, 2)
    assert "config.json: is a FIFO, not a regular file" in proc.stderr


def test_explain_refuses_a_device_or_a_fifo_as_its_log_or_env_report(compat, fifo, tmp_path):
    """Issue 41, finding 7: `compat explain /dev/zero`, /dev/urandom or a FIFO, as the log or as --env,
    waited or read for ever; now each is refused at once (a pipe is given as -)."""
    log = tmp_path / "train.log"
    log.write_text("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB\n")
    for args, named in (
        (("/dev/zero",), "/dev/zero: is a device"),
        (("/dev/urandom",), "/dev/urandom: is a device"),
        ((str(fifo("piped.log")),), "piped.log: is a FIFO"),
        ((str(log), "--env", "/dev/zero"), "--env /dev/zero: is a device"),
        ((str(log), "--env", str(fifo("env.txt"))), "env.txt: is a FIFO"),
    ):
        proc = compat("explain", *args, timeout=60)
        assert_clean_error(proc, 2)
        assert named in proc.stderr and "not a regular file" in proc.stderr


def test_a_file_larger_than_any_matrix_is_refused(compat, tmp_path):
    big = tmp_path / "big.toml"
    big.write_text("# padding\n" * (1_000_000))  # 10 MB of valid TOML
    proc = compat("list", "--matrix", str(big), timeout=60)
    assert_clean_error(proc, 2)
    assert "big.toml: is larger than 8 MiB" in proc.stderr


def test_a_grid_of_millions_of_cells_is_refused_with_its_count(compat, tmp_path):
    # 900 architectures x every stack, precision, quantization, method, strategy, ... (the finding: 13.7M)
    grid = tmp_path / "huge.toml"
    hardware = ", ".join(f'"sm_{n}"' for n in range(100, 1000))
    grid.write_text(
        f'description = "too many cells"\n[product]\nhardware = [{hardware}]\n'
        'stack = ["hf2026"]\nprecision = ["fp32", "fp16", "bf16"]\n'
        'quantization = ["none", "int8", "nf4", "nf4dq", "fp4", "fp4dq"]\nmethod = ["full", "lora"]\n'
        'strategy = ["single", "ddp", "zero2", "zero3"]\nranks = [1, 2, 4, 8]\n'
    )
    proc = compat("list", "--matrix", str(grid), timeout=60)
    assert_clean_error(proc, 2)
    assert f"expands to {900 * 3 * 6 * 2 * 4 * 4:,} cells" in proc.stderr
    assert "huge.toml" in proc.stderr


def test_braces_that_expand_to_a_million_patterns_are_refused(compat):
    proc = compat("list", "--select", "{a,b}" * 20, timeout=60)
    assert_clean_error(proc, 2)
    assert "its braces expand to more than 1024 patterns" in proc.stderr
    # the patterns users write still work: nested braces, a few alternatives
    proc = compat("list", "--select", "cpu-{hf2026,canary}-{fp32,bf16}-*", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()


def test_records_read_in_parallel_parts_are_the_records_read_one_by_one(tmp_path, monkeypatch):
    # test input built from real records: the project's own, each written 40 times with a fresh id,
    # with bad lines at known places (the first line, one in the middle, the last)
    recs = real_records(50)
    path = tmp_path / "records.jsonl"
    lines = ["not json"]
    for i in range(40):
        for n, rec in enumerate(recs):
            lines.append(json.dumps(dict(rec, id=f"{i:04d}{n:04d}" + rec["id"][8:])))
        if i == 20:
            lines.append('{"schema_version": 1}')
    lines.append("[1, 2")
    path.write_text("\n".join(lines) + "\n")

    one, bad_one = records.reduce_records([path], summary.Summary, None, records.reader_view)  # small: one process
    monkeypatch.setattr(records, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(os, "cpu_count", lambda: 4)  # four parts even on a 2-core host
    many, bad_many = records.reduce_records([path], summary.Summary, None, records.reader_view)

    assert one.count == many.count == 40 * len(recs)
    assert [str(b) for b in bad_one] == [str(b) for b in bad_many]
    assert [b.line for b in bad_many] == [1, 2 + 21 * len(recs), len(lines)]
    assert [r["id"] for r in one.rows()] == [r["id"] for r in many.rows()]
    assert one.conflicts().keys() == many.conflicts().keys()
    assert table.render(one, "t") == table.render(many, "t")


def test_merge_tells_a_stored_records_id_even_written_with_escapes(tmp_path):
    # test input built from a real record: the project's first, stored by hand with its id's first
    # character as a JSON escape (the fast look-up reads ids as written; the full pass finds it)
    from harness.evidence import merge

    rec = real_records(1)[0]
    into = tmp_path / "results"
    into.mkdir()
    line = json.dumps(rec).replace(f'"id": "{rec["id"]}"', '"id": "\\u%04x%s"' % (ord(rec["id"][0]), rec["id"][1:]))
    assert line != json.dumps(rec)
    (into / "records.jsonl").write_text(line + "\n")
    same, changed = tmp_path / "same.jsonl", tmp_path / "changed.jsonl"
    same.write_text(json.dumps(rec) + "\n")
    changed.write_text(json.dumps(dict(rec, outcome="fail" if rec["outcome"] != "fail" else "pass")) + "\n")
    [report] = merge.merge([same], into)
    assert (report.added, report.duplicates, report.bad) == (0, 1, [])
    [report] = merge.merge([changed], into)
    assert (report.added, report.duplicates) == (0, 0)
    assert [b.line for b in report.bad] == [1] and "already merged with different content" in report.bad[0].reason
    assert (into / "records.jsonl").read_text() == line + "\n"
