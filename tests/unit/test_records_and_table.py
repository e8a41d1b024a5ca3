import json
import subprocess
import sys

from harness.catalog import outcome
from harness.catalog.cell import Cell
from harness.evidence import records
from harness.render import table
from harness.run import classify

from conftest import ROOT, assert_clean_error, fast_view, slow_view


def make_record(cell="cpu-local-fp32-none-full-single", outcome="pass", finished="2026-11-22T04:00:00+00:00", **extra):
    rec = {
        "schema_version": records.SCHEMA_VERSION,
        "id": "0123456789abcdef",
        "cell": cell,
        "axes": Cell.parse(cell).axes(),
        "outcome": outcome,
        "error": None,
        "losses": {"first": 4.8, "last": 4.1},
        "memory": [{"rank": 0, "device": "cpu", "peak_rss_bytes": 400 * 2**20}],
        "finished_at": finished,
        "fingerprint": {
            "hardware": {"cpu": "Test CPU", "gpus": []},
            "python": "3.11.7",
            "packages": {"torch": "2.13.0", "transformers": "5.23.0", "peft": "0.21.2", "accelerate": "1.15.0"},
        },
        "evidence": "measured",
    }
    rec.update(extra)
    return rec


def test_signature_drops_numbers_paths_and_addresses():
    a = outcome.signature(
        "torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 79.10 GiB total)\nmore"
    )
    b = outcome.signature(
        "torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 1.50 GiB (GPU 3; 15.7 GiB total)"
    )
    assert a == "OutOfMemoryError: CUDA out of memory. Tried to allocate <n> MiB (GPU <n>; <n> GiB total)"
    assert b == "OutOfMemoryError: CUDA out of memory. Tried to allocate <n> GiB (GPU <n>; <n> GiB total)"
    assert (
        outcome.signature("builtins.KeyError", "at 0x7f3a1b2c in /opt/env/lib/x.py") == "KeyError: at <hex> in <path>"
    )
    assert (
        outcome.signature("CheckFailed", "strategy fsdp2 on sm_90 in bf16, 2 ranks")
        == "CheckFailed: strategy fsdp2 on sm_90 in bf16, <n> ranks"
    )


def test_oom_is_told_apart_from_other_failures():
    assert outcome.is_oom("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 2 GiB")
    assert outcome.is_oom(
        "builtins.RuntimeError",
        "[enforce fail at alloc_cpu.cpp:117] . DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 "
        "bytes",
    )
    assert outcome.is_oom("builtins.MemoryError", "")
    assert not outcome.is_oom("builtins.RuntimeError", "\"triu_tril_cuda_template\" not implemented for 'BFloat16'")
    assert not outcome.is_oom(
        "builtins.ValueError",
        "You can't pass `load_in_4bit`or `load_in_8bit` as a kwarg when passing `quantization_config`",
    )


def test_append_keeps_existing_lines_and_survives_a_cut_line(tmp_path):
    path = tmp_path / "records.jsonl"
    records.append(path, make_record(cell="cpu-local-fp32-none-full-single"))
    with open(path, "ab") as f:  # a writer killed half-way through a line
        f.write(b'{"schema_version": 1, "cell": "cut sh')
    records.append(path, make_record(cell="cpu-local-bf16-none-full-single"))
    recs, bad = records.read_records([path])
    assert [r["cell"] for r in recs] == ["cpu-local-fp32-none-full-single", "cpu-local-bf16-none-full-single"]
    assert [(b.line, b.reason.split(" (")[0]) for b in bad] == [(2, "not a JSON record")]


def test_invalid_records_are_named_by_file_and_line(tmp_path):
    path = tmp_path / "x.jsonl"
    good = make_record()
    path.write_text(
        "\n".join(
            [
                json.dumps(good),
                "[1, 2]",
                json.dumps({k: v for k, v in good.items() if k != "outcome"}),
                json.dumps(dict(good, outcome="maybe")),
                json.dumps(dict(good, schema_version=99)),
                json.dumps(dict(good, axes=dict(good["axes"], ranks="two"))),
                json.dumps(dict(good, memory=[{"rank": 0, "device": "cpu", "peak_rss_bytes": "lots"}])),
                json.dumps(dict(good, cell="<script>alert(1)</script>")),
                json.dumps({"level": "info", "msg": "a line of some other tool's JSON log"}),
                '{"schema_version": 1, "id": "0123',
            ]
        )
        + "\n"
    )
    recs, bad = records.read_records([path])
    assert len(recs) == 1
    assert [str(b) for b in bad] == [
        f"{path}:2: not a JSON object but a JSON list",
        f"{path}:3: the record must contain ['outcome'] properties",
        f"{path}:4: outcome must be one of ['pass', 'fail', 'oom', 'unsupported', 'timeout', 'crash', "
        "'install-error', 'infra'], not 'maybe'",
        f"{path}:5: schema_version 99; this compat reads 1",
        f"{path}:6: axes.ranks must be integer, not 'two'",
        f"{path}:7: memory[0].peak_rss_bytes must be integer or number or null, not 'lots'",
        f"{path}:8: cell must match pattern ^[a-z0-9][a-z0-9_.+-]{{0,199}}$, not '<script>alert(1)</script>'",
        f"{path}:9: the record must contain ['axes', 'cell', 'evidence', 'fingerprint', 'finished_at', 'id', "
        "'outcome', 'schema_version'] properties",
        f"{path}:10: not a JSON record (DecodeError: JSON is malformed: invalid character (byte 33))",
    ]


def test_table_keeps_latest_per_cell_and_versions_and_escapes_error_text():
    old = make_record(outcome="fail", finished="2026-11-01T00:00:00+00:00")
    new = make_record(finished="2026-11-22T00:00:00+00:00")
    other_version = make_record(
        outcome="fail",
        finished="2026-11-02T00:00:00+00:00",
        error={"signature": "ValueError: a|b <script>x</script> `c`"},
    )
    other_version["fingerprint"] = dict(
        other_version["fingerprint"], packages={"torch": "2.13.0", "transformers": "4.33.0"}
    )
    text = table.render([old, new, other_version], "compat table")
    assert "Generated by `compat table`" in text
    assert "Do not edit by hand" in text
    rows = [line for line in text.splitlines() if line.startswith("| `cpu-")]
    assert len(rows) == 2
    by_version = {("4.33.0" in r): r for r in rows}
    assert "✅ pass" in by_version[False] and "2026-11-22" in by_version[False]
    assert "rank 0: 400 MiB RSS" in by_version[False] and "4.800 → 4.100" in by_version[False]
    assert "ValueError: a\\|b &lt;script&gt;x&lt;/script&gt; \\`c\\`" in by_version[True]
    assert "<script>" not in text
    assert "## cpu — Test CPU" in text
    # in each table, header, separator and every row have the same number of columns (escaped
    # pipes aside): the support summary and the by-stack grid (a first column + 1 stack) and the
    # table of every record
    tables = [block.splitlines() for block in text.split("\n\n") if block.startswith("|")]
    assert [{len(line.replace("\\|", "").split("|")) for line in t} for t in tables] == [{4}, {4}, {16}]
    grid = tables[1]
    assert grid[0] == "| configuration | `local` |" and grid[2] == "| `fp32-none-full-single` | ✅ 400 MiB |"


def test_table_shows_the_known_issues_a_failed_record_matched():
    rec = make_record(outcome="fail", error={"signature": "ImportError: cannot import name 'log'"})
    rec["known_issues"] = ["deepspeed-old-vs-torch24-elastic-import"]
    (row,) = [line for line in table.render([rec], "compat table").splitlines() if line.startswith("| `cpu-")]
    assert row.endswith(
        "| ImportError: cannot import name 'log' (known issue: deepspeed-old-vs-torch24-elastic-import) |"
    )


def test_list_json_does_not_import_torch():
    code = (
        "import sys, json, io, contextlib\n"
        "from harness.cli import main\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf):\n"
        "    rc = main(['list', '--json', '--matrix', 'cpu', '--select', 'cpu-hf2023-bf16-*', '--skip', '*-gc'])\n"
        "cells = json.loads(buf.getvalue())\n"
        "heavy = [m for m in ('torch', 'transformers', 'peft', 'accelerate') if m in sys.modules]\n"
        "print(json.dumps({'rc': rc, 'ids': [c['id'] for c in cells], 'heavy': heavy}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    result = json.loads(out.stdout)
    assert result == {
        "rc": 0,
        "ids": ["cpu-hf2023-bf16-none-full-single", "cpu-hf2023-bf16-none-lora-single"],
        "heavy": [],
    }


def test_list_text_and_no_match(compat):
    proc = compat("list", "--matrix", "matrix/local.toml", "--select", "cpu-*-lora-*-gc")
    assert proc.returncode == 0
    assert proc.stdout.splitlines() == [
        "matrix/local.toml: 2 cells, 2 run on this host",
        "  cpu-local-fp32-none-lora-single-gc  runs here",
        "  cpu-local-bf16-none-lora-single-gc  runs here",
    ]
    proc = compat("list", "--select", "nothing-*")
    assert_clean_error(proc, 2)


def test_gpu_matrix_without_gpu_says_so_in_one_line(compat):
    from harness.run import hardware

    if hardware.detect().gpus:
        import pytest

        pytest.skip("this host has a GPU")
    proc = compat("run", "--require-gpu", "--matrix", str(ROOT / "matrix" / "gpu.toml"))
    assert_clean_error(proc, 3)
    assert len(proc.stderr.strip().splitlines()) == 1
    assert proc.stderr.startswith("compat: error: no CUDA GPU found on this host (")
    assert proc.stdout == ""  # nothing was planned or run


def test_a_run_answers_in_json_what_it_recorded(compat, tmp_path):
    """Issue 43, item 11: `compat run --format json` says the run, each record's cell and outcome
    and the counts as one JSON object on stdout; what it says as it runs goes to stderr. A real
    cell: one that asks a CPU for a CUDA allocator setting, recorded unsupported without training."""
    grid = tmp_path / "es.toml"
    grid.write_text(
        'description = "one CPU cell asking for a CUDA allocator setting"\n[product]\nhardware = ["cpu"]\n'
        'stack = ["local"]\nprecision = ["fp32"]\nquantization = ["none"]\nmethod = ["lora"]\nstrategy = ["single"]\n'
        "expandable_segments = [true]\n"
    )
    results = tmp_path / "results"
    proc = compat("run", "--matrix", str(grid), "--results", str(results), "--no-table", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    said = json.loads(proc.stdout)
    (rec,) = [json.loads(line) for line in (results / "records.jsonl").read_text().splitlines()]
    assert said["records"] == [
        {"id": rec["id"], "cell": "cpu-local-fp32-none-lora-single-es", "outcome": "unsupported"}
    ]
    assert (said["run_id"], said["counts"], said["not_started"]) == (rec["run_id"], {"unsupported": 1}, [])
    assert said["records_file"] == str(results / "records.jsonl") and "done: 1 unsupported" in proc.stderr


def test_a_launcher_that_raised_is_read_from_its_log():
    from harness.catalog.outcome import raised_in_log

    deepspeed_import = (
        "[INFO] cmd = python -u -m deepspeed.launcher.launch ...\n"
        "Traceback (most recent call last):\n"
        '  File "/env/lib/python3.11/site-packages/deepspeed/elasticity/elastic_agent.py", line 9, in <module>\n'
        "    from torch.distributed.elastic.agent.server.api import log, _get_socket_with_port\n"
        "ImportError: cannot import name 'log' from 'torch.distributed.elastic.agent.server.api' (/x/api.py)\n"
    )
    assert raised_in_log(deepspeed_import) == (
        "ImportError",
        "cannot import name 'log' from 'torch.distributed.elastic.agent.server.api' (/x/api.py)",
    )
    torchrun_child = (
        'Traceback (most recent call last):\n  File "run.py", line 1\n'
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n=====\nfinetune.py FAILED\n"
    )
    assert raised_in_log(torchrun_child) is None  # a rank died: the rank's result says how
    assert raised_in_log("Segmentation fault (core dumped)\n") is None


def test_a_record_from_before_the_known_issue_base_is_tagged_when_rendered():
    rec = make_record(
        outcome="fail", error={"signature": "RuntimeError: There are currently no available devices found"}
    )
    assert "known issue" not in table.render([rec], "compat table")
    row = table.render([rec], "compat table", tag=lambda r: ["accelerate-fsdp-no-accelerator"]).splitlines()[-1]
    assert row.endswith("(known issue: accelerate-fsdp-no-accelerator) |")
    passed = make_record()
    assert "known issue" not in table.render([passed], "compat table", tag=lambda r: ["never-for-a-pass"])


def test_a_crash_excerpt_starts_at_faulthandlers_report():
    log = "\n".join(
        ["step 1"] * 40
        + ["Fatal Python error: Segmentation fault", "", "Thread 0x7f (most recent call first):"]
        + [f'  File "threading.py", line {i} in run' for i in range(40)]
        + ["Extension modules: numpy (total: 27)"]
    )
    excerpt = classify.crash_excerpt(log)
    assert excerpt.startswith("Fatal Python error: Segmentation fault")
    assert classify.crash_excerpt("no report\nKilled") == "no report\nKilled"


def _leaves(obj, path=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield path + (k,), v
            yield from _leaves(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield path + (i,), v
            yield from _leaves(v, path + (i,))


def _replaced(rec, path, value):
    rec = json.loads(json.dumps(rec))
    node = rec
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return rec


def test_reader_view_is_the_whole_record_cut_and_validated():
    """reader_view decodes a line straight into a reader's view with types made from the schema;
    it must give what parsing the line whole, cutting it (slim) and validating it give: the same
    view for every real record in results/, and for every value of every real record replaced by
    a hostile one, the same view or the same reason to refuse it. The fast types taking a value
    the schema refuses would publish it."""
    lines = [
        raw for path in records.record_files(ROOT / "results") for raw in path.read_bytes().splitlines() if raw.strip()
    ]
    assert len(lines) > 100  # the project's real records
    for raw in lines:
        assert fast_view(raw) == slow_view(raw) and fast_view(raw)[0] is not None
    # a real record with two memory items, settings and a runner: every value of it replaced
    rec = next(
        r for r in map(json.loads, lines) if len(r.get("memory") or []) == 2 and "settings" in r and r.get("runner")
    )
    rec["memory"][0]["timeline"] = [[0.0, 1]]
    rec["losses"] = {**(rec.get("losses") or {}), "steps": [1.0, 0.5]}
    rec["a_later_key"] = {"x": 1}
    hostile = [None, True, 0, -1, 2.0, 1.5, 10**19, 1e300, "", "x", "a\n", "<b>", "ä" * 300, [], [1], {}, {"x": 1}]
    tried = 0
    for path, original in list(_leaves(rec)):
        near = [original + "\n", original + "<", original * 40] if isinstance(original, str) else []  # a pattern's end
        for value in hostile + near:
            raw = json.dumps(_replaced(rec, path, value)).encode()
            assert fast_view(raw) == slow_view(raw), (path, value)
            tried += 1
    assert tried > 1000
    rec["axes"]["an_axis_not_in_the_schema"] = "x"  # the fast types refuse it, the schema takes it
    view, _ = fast_view(json.dumps(rec).encode())
    assert "timeline" not in view["memory"][0] and "steps" not in view["losses"] and "a_later_key" not in view
    assert view["axes"]["an_axis_not_in_the_schema"] == "x"
    assert set(view["fingerprint"]["packages"]) <= {
        "torch",
        "transformers",
        "peft",
        "accelerate",
        "bitsandbytes",
        "deepspeed",
    }
    for raw in (b"[1, 2]", b'"text"', b"{}", b'{"id": NaN}', b"\xff", b"[" * 100000):
        assert fast_view(raw) == slow_view(raw)
    assert fast_view(b'{"id": NaN}')[1] == "not JSON"


def test_list_and_envs_take_format_json_and_json_stays_an_alias(compat, tmp_path):
    """Issue 43, item 11: `--format json` as recommend, explain and fit take it; `list --json` and
    `envs --json` keep working."""
    import json as json_

    args = ("--matrix", "matrix/local.toml")
    assert compat("list", *args, "--format", "json").stdout == compat("list", *args, "--json").stdout
    cells = json_.loads(compat("list", *args, "--format", "json").stdout)
    assert len(cells) == 8 and cells[0]["position"] == 1
    grids = json_.loads(compat("list", "--grids", "--format", "json").stdout)
    assert {"cpu", "gpu-versions", "gpu-bnb"} <= {g["name"] for g in grids}
    assert all(isinstance(g["cells"], int) and g["description"] for g in grids)
    env = {"COMPAT_ENV_DIR": str(tmp_path)}
    assert json_.loads(compat("envs", "--format", "json", env=env).stdout) == []
    assert compat("envs", "--json", env=env).stdout == compat("envs", "--format", "json", env=env).stdout
