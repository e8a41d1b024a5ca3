"""The GPU grids hold the version axis (issue 42): every architecture a runner may have gets each
era's stack and each bitsandbytes release, and a short window runs the most telling cells first."""

import json

from harness.catalog.matrix import MatrixData, grid_paths, load_matrix

from conftest import ROOT, call_compat

DATA = MatrixData.load(ROOT / "matrix")
GRIDS = {p.stem: load_matrix(p, DATA) for p in grid_paths(ROOT / "matrix") if p.stem.startswith("gpu")}
ARCHS = {c.hardware for g in GRIDS.values() for c in g.cells}


def stacks_per_arch(grid, **axes) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for c in grid.cells:
        if all(getattr(c, k) == v for k, v in axes.items()):
            out.setdefault(c.hardware, set()).add(c.stack)
    return out


def test_every_architecture_has_each_era_and_each_bitsandbytes_release_in_lora_and_qlora():
    assert len(ARCHS) == 10 and "cpu" not in ARCHS
    versions, bnb = GRIDS["gpu-versions"], GRIDS["gpu-bnb"]
    for quant in ("none", "nf4", "int8"):
        for gc in (True, False):
            assert stacks_per_arch(versions, quantization=quant, grad_ckpt=gc) == {
                a: {"hf2024", "hf2025", "hf2026", "canary"} for a in ARCHS
            }
    releases = {"bnb046", "bnb047", "bnb048", "bnb049", "hf2026", "canary"}
    for quant in ("nf4", "nf4dq", "int8"):
        assert stacks_per_arch(bnb, quantization=quant) == {a: releases for a in ARCHS}
    assert {DATA.stacks[s].pins().get("bitsandbytes") for s in releases - {"canary"}} == {
        "==0.46.1",
        "==0.47.0",
        "==0.48.2",
        "==0.49.2",
        "==0.50.2",
    }
    # the precision users run on each card: bf16 from Ampere (sm_80) on, fp16 before
    assert {(int(c.hardware[3:]) >= 80, c.precision) for c in bnb.cells} == {(True, "bf16"), (False, "fp16")}


def test_ids_are_unique_within_each_grid_and_parse_back():
    from harness.catalog.cell import Cell

    for name, grid in GRIDS.items():
        ids = [c.id for c in grid.cells]
        assert len(ids) == len(set(ids)), name
        assert all(Cell.parse(i) == c for i, c in zip(ids, grid.cells)), name


def test_list_numbers_the_plan_with_every_first_cell_before_the_rest():
    proc = call_compat("list", "--matrix", "matrix/gpu*.toml", "--select", "sm_90-*", "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert [c["position"] for c in plan] == list(range(1, len(plan) + 1))
    early = [c["first"] != "" for c in plan]
    assert early == sorted(early, reverse=True) and 20 < sum(early) < len(plan)
    first_eight = {(c["axes"]["stack"], c["axes"]["quantization"]) for c in plan[:8]}
    assert {("hf2024", "nf4"), ("hf2026", "nf4"), ("bnb046", "nf4")} <= first_eight
    # a cell two grids list (gpu-size-quant and gpu-versions) runs as early as either asks
    shared = next(c for c in plan if c["id"] == "sm_90-hf2024-bf16-nf4-lora-single-gc+m_qwen2_500m")
    assert shared["grid"].endswith("gpu-size-quant.toml") and shared["first"].startswith("QLoRA")
    text = call_compat("list", "--matrix", "matrix/gpu*.toml", "--select", "sm_90-*")
    assert text.returncode == 0 and text.stdout.startswith("cells run in the order numbered")
    assert "   1. sm_90-bnb046-bf16-nf4-lora-single-gc+m_qwen2_500m  " in text.stdout


def sm90_records() -> list[dict]:
    """The project's real sm_90 records (results/records.jsonl, from lent H100/H200s)."""
    with open(ROOT / "results" / "records.jsonl", encoding="utf-8") as f:
        return [r for r in map(json.loads, f) if r["axes"]["hardware"] == "sm_90"]


def test_a_gpu_card_says_per_stack_what_passed_what_did_not_and_what_was_not_run():
    """TEST INPUT built from a real sm_90 record (an H200's): the record as it is, and a copy
    moved to the hf2024 stack ending in oom (second_runner-style, never a result)."""
    from harness.render import support, table

    from conftest import second_runner

    real = next(r for r in sm90_records() if "H200" in str(r["fingerprint"]["hardware"]) and r["outcome"] == "pass")
    cell = real["cell"].replace("-local-", "-hf2024-", 1)
    oom = second_runner(real, real["runner"]["name"], axes=dict(real["axes"], stack="hf2024"), cell=cell, outcome="oom")
    layout = support.Layout.load(ROOT / "matrix")
    plan = layout.planned["sm_90"]
    assert len(plan["hf2024"]) == 12  # gpu-versions (gpu-size-quant's two are among them)
    md = table.render([real, oom], "test", layout=layout)
    lines = md.splitlines()
    head = lines.index("| stack | versions (newest record) | passed | did not pass | unsupported | not run |")
    rows = {line.split(" | ")[0].strip("| `"): line for line in lines[head + 2 :] if line.startswith("| `")}
    local_not_run = len(plan["local"] - {real["cell"]})
    assert rows["local"].endswith(f"| 1 | — | 0 | {local_not_run} of {len(plan['local'])} planned |")
    hf2024_not_run = len(plan["hf2024"] - {cell})
    assert rows["hf2024"].endswith(f"| 0 | 1 oom | 0 | {hf2024_not_run} of {len(plan['hf2024'])} planned |")
    assert rows["hf2024"].split(" | ")[1].startswith("torch 2.11.0, transformers 5.17.0")  # the record's own
    assert rows["hf2025"].startswith("| `hf2025` | no record | 0 | — | 0 | 12 of 12 planned")
    assert set(rows) >= {"bnb046", "bnb049", "canary", "hf2026"}
    # a card whose records are all measurement runs (real-size cells) still gets its section
    sized = next(r for r in sm90_records() if layout.is_measurement(r))
    md = table.render([sized], "test", layout=layout)
    assert "No feature check on this card yet: its records are measurement runs (counted above)." in md
    assert f"| `{sized['axes']['stack']}` | torch 2.11.0" in md
    # a CPU section has no such table: CPU grids are not planned per card
    cpu = real_records_cpu()
    assert "| stack | versions" not in table.render(cpu, "test", layout=layout)


def real_records_cpu() -> list[dict]:
    from conftest import real_records

    return real_records(3)
