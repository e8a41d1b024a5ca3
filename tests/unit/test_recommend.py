"""`compat recommend` and the GPU database: the answers the issue names, evidence on every part,
measured records before rules, and clean errors."""

import json
import subprocess
import sys

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from harness.answers.recommend import ResolverData, recommend
from harness.catalog.gpus import GpuDb
from harness.errors import MatrixError, UsageError

from conftest import ROOT, assert_clean_error, call_compat

DATA = ResolverData.load(ROOT / "matrix")


def cli_json(*args):
    proc = call_compat("recommend", *args, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def about(rec: dict) -> dict:
    out = {}
    for e in rec["evidence"]:
        out.setdefault(e["about"], []).append(e)
    return out


def build_archs(variant: str, version: str) -> tuple:
    (build,) = [b for b in DATA.torch if b.variant == variant and Version(version) in b.versions]
    return build.archs


def test_p4_gets_no_bf16_a_torch_with_sm6x_kernels_and_a_4bit_bitsandbytes():
    rec = cli_json("--gpu", "P4")
    assert rec["gpu"]["arch"] == "sm_61"
    assert rec["precision"] in ("fp16", "fp32")
    archs = build_archs(rec["torch_variant"], rec["packages"]["torch"].lstrip("="))
    assert any(a.startswith("6.") and a <= "6.1" for a in archs), archs  # sm_60 cubins run on sm_61
    assert rec["quantization"] == "nf4" and rec["packages"]["bitsandbytes"]
    ev = about(rec)
    for part in ("precision", "torch", "packages.bitsandbytes", "quantization", "strategy"):
        assert ev.get(part), f"no evidence for {part}"
    for items in ev.values():
        for e in items:
            assert e["kind"] in ("measured", "predicted")
            if e["kind"] == "predicted":
                assert e["rule"]
            else:
                assert e["records"] and e["hardware"] and e["date"]
    assert all(
        e["sources"] for e in ev["precision"] + ev["torch"] + ev["packages.bitsandbytes"] if e["kind"] == "predicted"
    )
    # compat bisect's boundary, measured on the CPU
    bisected = [e for e in ev["packages.bitsandbytes"] if e["kind"] == "measured"]
    assert bisected and all("not on sm_61: the pin is not moved" in e["says"] for e in bisected)


def test_a100_gets_bf16_and_t4_does_not_whatever_is_bf16_supported_says():
    assert cli_json("--gpu", "A100")["precision"] == "bf16"
    t4 = cli_json("--gpu", "Tesla T4")
    assert t4["precision"] == "fp16"
    assert "emulation" in about(t4)["precision"][0]["says"]


def test_b200_gets_torch_2_7_or_newer_with_a_cuda_12_8_or_newer_build():
    rec = cli_json("--gpu", "B200", "--method", "full", "--gpus", "8")
    assert Version(rec["packages"]["torch"].lstrip("=")) >= Version("2.7")
    assert int(rec["torch_variant"][2:]) >= 128
    assert rec["strategy"] == "zero3"
    assert rec["precision"] == "bf16"


def test_aliases_as_people_type_them():
    db = GpuDb.load(ROOT / "matrix")
    for name, key in [
        ("P4", "p4"),
        ("Tesla P4", "p4"),
        ("tesla-p4", "p4"),
        ("4090", "rtx4090"),
        ("RTX 4090", "rtx4090"),
        ("NVIDIA GeForce RTX 4090", "rtx4090"),
        ("h100", "h100"),
    ]:
        assert db.find(name).key == key
    assert len(db.gpus) >= 15


def test_an_unknown_gpu_gets_did_you_mean_and_exit_2():
    proc = call_compat("recommend", "--gpu", "P5")
    assert_clean_error(proc, 2)
    assert "unknown GPU 'P5'; did you mean: P4" in proc.stderr


def test_constraints_are_a_pip_constraints_file():
    proc = call_compat("recommend", "--gpu", "V100", "--format", "constraints")
    assert proc.returncode == 0
    reqs = [Requirement(line) for line in proc.stdout.splitlines() if line and not line.startswith("#")]
    names = {r.name for r in reqs}
    assert {"torch", "bitsandbytes", "transformers", "peft"} <= names
    (torch,) = [r for r in reqs if r.name == "torch"]
    assert str(torch.specifier).endswith("+cu126")  # V100 (sm_70): the cu126 builds keep Volta


def test_measured_records_of_the_card_come_before_rules():
    record = {
        "id": "r" * 32,
        "outcome": "pass",
        "finished_at": "2026-11-20T10:00:00Z",
        "axes": {"hardware": "sm_90", "precision": "bf16", "quantization": "none", "method": "lora"},
        "fingerprint": {
            "torch": {"version": "2.11.0+cu128"},
            "packages": {"transformers": "5.23.0", "peft": "0.21.2", "accelerate": "1.15.0"},
        },
    }
    rec = recommend(DATA.gpus.find("H100"), 1, "lora", DATA, [record])
    assert (rec.torch_version, rec.torch_variant) == ("2.11.0", "cu128")
    torch_ev = [e for e in rec.evidence if e.about == "torch"]
    assert torch_ev[0].kind == "measured" and torch_ev[0].records == ["r" * 32] and torch_ev[0].hardware == "sm_90"
    assert rec.packages["transformers"] == "==5.23.0"
    without = recommend(DATA.gpus.find("H100"), 1, "lora", DATA, [])
    assert [e.kind for e in without.evidence if e.about == "torch"] == ["predicted"]


def test_recommend_starts_without_torch():
    code = (
        "import sys; from harness.cli import main; main(['recommend', '--gpu', 'P4', '--format', 'json']); "
        "assert 'torch' not in sys.modules, 'torch was imported'"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_broken_gpu_database_names_file_and_line(tmp_path):
    (tmp_path / "gpus.toml").write_text(
        '[gpu.x1]\nname = "X1"\naliases = ["X1"]\narchitecture = "Test"\ncc = "8"\nmemory_gb = [8]\n'
        'bf16 = "yes"\nfp16_tensor_cores = true\ntf32 = true\nfp8 = false\nsources = ["https://example.org"]\n'
    )
    with pytest.raises(MatrixError) as err:
        GpuDb.load(tmp_path)
    # every problem of the table at once (before issue 19's one validator, a bad cc hid the rest)
    assert err.value.problems == [
        f"{tmp_path / 'gpus.toml'}:5: [gpu.x1].cc: '8' is not a compute capability like \"8.6\"",
        f"{tmp_path / 'gpus.toml'}:7: [gpu.x1].bf16: must be true or false, not 'yes'",
    ]
    with pytest.raises(UsageError):
        GpuDb.load(ROOT / "matrix").find("")


def test_did_you_mean_names_only_cards_of_the_architecture_the_name_says():
    import dataclasses

    from harness.catalog.gpus import GpuDb, architecture_of, normalize

    db = GpuDb.load(ROOT / "matrix")
    for gpu in db.gpus:  # the naming rules read every card's names as its own architecture
        for name in (gpu.name, *gpu.aliases):
            assert architecture_of(normalize(name)) == gpu.architecture.split()[0], (name, gpu.architecture)
    without_5090 = dataclasses.replace(db, gpus=[g for g in db.gpus if g.key != "rtx5090"])
    with pytest.raises(UsageError) as exc:
        without_5090.find("RTX 5090")  # a Blackwell name: no Ada RTX 4090, however close the spelling
    assert "RTX 4090" not in str(exc.value).split("(compat knows")[0]
    with pytest.raises(UsageError) as exc:
        db.find("RTX 4050")  # an Ada name: Ada cards only
    offered = str(exc.value).split("did you mean: ")[1].split("?")[0].split(", ")
    assert offered and all(db.find(name).architecture.startswith("Ada") for name in offered), offered
    with pytest.raises(UsageError, match=r"unknown GPU 'Radeon 7900'; did you mean: RX 7900 XTX\? \(compat knows"):
        db.find("Radeon 7900")  # an RDNA3 name (issue 43, item 6: compat knows AMD cards)
    with pytest.raises(UsageError, match=r"unknown GPU 'Vega 64' \(compat knows"):
        db.find("Vega 64")  # no architecture in the name: no guess


@pytest.mark.parametrize(
    "name, size",
    [
        ("A100 80GB", 80),
        ("A100-SXM4-80GB", 80),
        ("A100", 40),
        ("V100-PCIE-32GB", 32),
        ("Tesla V100", 16),
        ("RTX 4060 Ti 16GB", 16),
        ("4060 Ti", 8),
        ("H20-3e", 141),
        ("H20", 96),
    ],
)
def test_every_command_takes_the_memory_size_a_card_name_gives(name, size):
    """Issue 43, item 1: recommend took "A100 80GB" as 40 GB (QLoRA for a 32B model on two cards,
    where fit and an 80 GB H100 say LoRA). One reading of the name for every command; a name that
    gives no size is the card's smallest (the safe side)."""
    from harness.answers import fit

    gpu = DATA.gpus.find(name)
    assert gpu.memory_gb[gpu.variant(name)] == size if gpu.variant(name) is not None else min(gpu.memory_gb) == size
    rec = cli_json("--gpu", name)
    assert rec["gpu"]["memory"] == (f"{size} GB" if gpu.variant(name) is not None else gpu.memory_text())
    capacity, _ = fit.capacity_of(gpu, name, None)
    exposed = dict(zip(gpu.memory_gb, gpu.memory_mib)).get(size) if gpu.memory_mib else 0
    if exposed:
        assert capacity == exposed * fit.MIB


def test_recommend_chooses_by_the_named_size_or_the_memory_given():
    small = cli_json("--gpu", "A100", "--model-size", "32B", "--gpus", "2")
    large = cli_json("--gpu", "A100 80GB", "--model-size", "32B", "--gpus", "2")
    given = cli_json("--gpu", "A100", "--gpu-memory", "80", "--model-size", "32B", "--gpus", "2")
    h100 = cli_json("--gpu", "H100", "--model-size", "32B", "--gpus", "2")
    assert small["method"] == "qlora" and large["method"] == h100["method"] == given["method"] == "lora"
    (strategy,) = about(large)["strategy"]
    assert "per card of 80 " in strategy["says"]  # 81,920 MiB exposed: 80 GiB
    assert given["gpu"]["memory"] == "80 GiB (given)"


def test_an_alias_size_that_is_no_alias_or_no_size_of_the_card_is_refused(tmp_path):
    text = (ROOT / "matrix" / "gpus.toml").read_text()
    bad = text.replace('alias_memory_gb = { "H20-3e" = 141 }', 'alias_memory_gb = { "H20-3e" = 140 }')
    assert bad != text
    (tmp_path / "gpus.toml").write_text(bad)
    with pytest.raises(MatrixError) as err:
        GpuDb.load(tmp_path)
    assert any(
        "[gpu.h20].alias_memory_gb: 'h203e' = 140: an alias of this card and one of its memory_gb" in p
        for p in err.value.problems
    ), err.value.problems


def test_without_gpu_it_answers_for_this_hosts_cards_and_says_so(monkeypatch):
    """Issue 43, item 5. A stand-in host with two H100s as NVML names them (this machine has no
    GPU); with no GPU at all it asks for --gpu in one line."""
    from harness.run import hardware

    cards = tuple(hardware.Gpu(i, "NVIDIA H100 80GB HBM3", "9.0", 80 * 2**30) for i in range(2))
    monkeypatch.setattr(hardware, "detect", lambda: hardware.Host("cpu", cards, "580.1", "13.0", "NVML"))
    proc = call_compat("recommend", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)
    assert rec["gpu"]["name"] == "H100" and rec["gpu"]["count"] == 2 and rec["gpu"]["memory"] == "80 GB"
    assert "for this host's card, NVIDIA H100 80GB HBM3 x2 (NVML" in proc.stderr
    assert json.loads(call_compat("recommend", "--gpus", "1", "--format", "json").stdout)["gpu"]["count"] == 1

    monkeypatch.setattr(hardware, "detect", lambda: hardware.Host("cpu", (), None, None, "NVML: not found"))
    proc = call_compat("recommend")
    assert_clean_error(proc, 2)
    assert "--gpu NAME: which card? This host has no CUDA GPU compat can see (NVML: not found)" in proc.stderr


def test_qlora_evidence_is_records_of_the_bitsandbytes_recommended():
    """Issue 43, item 3: the QLoRA answer recommended bitsandbytes 0.50.2 and cited as measured the
    records of 0.48.2. TEST INPUT: the project's real passing CPU QLoRA records of bitsandbytes
    0.48.2 alone (results/records.jsonl), so no record has the 0.50.2 a T4 is recommended."""
    from harness.answers.recommend import of_method
    from harness.evidence.records import packages

    with open(ROOT / "results" / "records.jsonl", encoding="utf-8") as f:
        recs = [json.loads(line) for line in f]
    old = [
        r
        for r in recs
        if r["axes"]["hardware"] == "cpu"
        and r["outcome"] == "pass"
        and of_method(r, "qlora")
        and packages(r).get("bitsandbytes") == "0.48.2"
    ]
    assert old
    rec = recommend(DATA.gpus.find("T4"), 1, "qlora", DATA, old).as_json()
    assert rec["packages"]["bitsandbytes"] == "==0.50.2"
    cited = {i for e in rec["evidence"] for i in e.get("records") or []}
    assert not cited & {r["id"] for r in old}  # 0.48.2's records are no evidence for a 0.50.2 answer
    assert any(
        n.startswith("no QLoRA cell with bitsandbytes 0.50.2 passed on cpu (those of 0.48.2 did)")
        and "not the CUDA kernels a Tesla T4 runs" in n
        for n in rec["notes"]
    )
    # with them, a 0.50.2 record that passed is the evidence
    new = [
        r
        for r in recs
        if r["outcome"] == "pass" and of_method(r, "qlora") and packages(r).get("bitsandbytes") == "0.50.2"
    ]
    rec = recommend(DATA.gpus.find("T4"), 1, "qlora", DATA, old + new).as_json()
    cited = {i for e in rec["evidence"] if e["about"] == "packages.transformers" for i in e.get("records") or []}
    assert cited and cited <= {r["id"] for r in new}


def test_the_torch_build_says_its_driver_floor_and_one_for_older_drivers(monkeypatch):
    """Issue 43, item 2: T4, 4090, A100 and H100 got the cu130 build with no word that it needs
    NVIDIA driver >= 580 (CUDA 13.x's floor; 12.x's is 525: NVIDIA's minor version compatibility
    table, matrix/builds.toml [driver]); an older driver's host got a torch that cannot start CUDA."""
    from harness.run import hardware

    rec = cli_json("--gpu", "T4")
    assert rec["torch_variant"] == "cu130" and rec["torch_driver_min"] == 580
    (said,) = about(rec)["torch.driver"]
    assert said["kind"] == "predicted" and "needs NVIDIA driver >= 580" in said["says"]
    assert said["sources"] == ["https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html"]
    assert any("with an older driver: torch 2.12.0+cu126 (driver >= 525)" in n for n in rec["notes"])
    old = cli_json("--gpu", "T4", "--driver", "550.54.15")
    assert old["torch_variant"] == "cu126" and old["torch_driver_min"] == 525 and old["packages"]["bitsandbytes"]
    proc = call_compat("recommend", "--gpu", "T4", "--driver", "418.87")
    assert_clean_error(proc, 2)
    assert "--driver 418: no torch build compat knows with kernels for sm_75 runs on it" in proc.stderr
    assert_clean_error(call_compat("recommend", "--gpu", "T4", "--driver", "latest"), 2)
    # a host's own card and driver, as NVML gives them (a stand-in host: this one has no GPU)
    card = (hardware.Gpu(0, "Tesla T4", "7.5", 16 * 2**30),)
    monkeypatch.setattr(hardware, "detect", lambda: hardware.Host("cpu", card, "535.104.05", "12.2", "NVML"))
    assert cli_json()["torch_variant"] == "cu126"
    text = call_compat("recommend", "--gpu", "T4").stdout
    assert (
        "+cu130   (pip install torch==2.12.0 --index-url https://download.pytorch.org/whl/cu130); needs NVIDIA " in text
    )


def test_a_driver_table_that_is_not_one_is_named(tmp_path):
    import shutil

    shutil.copytree(ROOT / "matrix", tmp_path / "matrix")
    path = tmp_path / "matrix" / "builds.toml"
    path.write_text(path.read_text().replace('"13" = 580', '"13" = "five-eighty"'))
    with pytest.raises(MatrixError) as err:
        ResolverData.load(tmp_path / "matrix")
    assert any("[driver]: must map a CUDA major to a driver major" in p for p in err.value.problems)
    path.write_text(path.read_text().replace('"13" = "five-eighty"\n', ""))
    with pytest.raises(MatrixError) as err:
        ResolverData.load(tmp_path / "matrix")
    assert any("[driver]: has no driver for CUDA 13 (cu130)" in p for p in err.value.problems)
