"""The GPU path end to end, one cell per card the host lets this job use: `compat run` of a tiny
full fine-tune on that card alone (CUDA_VISIBLE_DEVICES naming it by UUID), through the CLI as a
user runs it. Runs inside `tox -e py` wherever a CUDA GPU is present; skipped, with the reason,
where none is."""

import json

import pytest

from harness.run import hardware

from conftest import run_compat

pytestmark = pytest.mark.gpu
HOST = hardware.detect()
if not HOST.gpus:
    pytest.skip(f"no CUDA GPU on this host ({HOST.gpu_probe})", allow_module_level=True)
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip(
        f"NVML sees {len(HOST.gpus)} GPU(s), but this interpreter's torch {torch.__version__} cannot use them "
        f"(CUDA build: {torch.version.cuda})",
        allow_module_level=True,
    )


def precision_for(cc: str) -> str:
    major = int(cc.split(".")[0])
    return "bf16" if major >= 8 else "fp16" if major >= 7 else "fp32"


@pytest.mark.parametrize("card", HOST.gpus, ids=[f"gpu{g.index}-{g.arch}" for g in HOST.gpus])
def test_one_cell_on_each_card(card, tmp_path):
    grid = tmp_path / "smoke.toml"
    grid.write_text(f"""
[product]
hardware = ["{card.arch}"]
stack = ["local"]
precision = ["{precision_for(card.compute_capability)}"]
quantization = ["none"]
method = ["full"]
strategy = ["single"]
""")
    proc = run_compat(
        "run",
        "--require-gpu",
        "--matrix",
        str(grid),
        "--results",
        str(tmp_path),
        "--no-table",
        env={"CUDA_VISIBLE_DEVICES": card.cuda_id},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (rec,) = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert rec["outcome"] == "pass", rec["error"]
    assert rec["losses"]["eval_after"] < rec["losses"]["eval_before"]
    (mem,) = rec["memory"]
    assert mem["device"] == "cuda:0" and mem["physical_index"] == card.index
    assert mem["train_max_allocated_bytes"] > 0
    assert mem["torch_max_reserved_bytes"] >= mem["train_max_allocated_bytes"]
    assert mem["nvml_peak_used_bytes"] >= mem["torch_max_reserved_bytes"]  # NVML sees the context besides
    assert mem.get("cuda_context_bytes") is None or mem["cuda_context_bytes"] > 0
    (seen,) = rec["fingerprint"]["hardware"]["gpus_seen_by_torch"]
    assert seen["compute_capability"] == card.compute_capability and rec["axes"]["hardware"] == card.arch
    assert rec["checks"]["expandable_segments_used"] in (False, None)  # the runner's allocator setting did not leak
