"""Issue 43, item 6: cards users ask about that are not NVIDIA's (AMD Instinct and Radeon with ROCm,
Apple M-series with MPS, Intel Arc and Data Center GPU Max with XPU, Ascend 910B with an NPU) are
in the GPU database, and `compat recommend` answers for them: which torch build, precision, QLoRA,
several devices and DeepSpeed, what is known to break, every part predicted with its sources
(matrix/backends.toml), never measured on hardware compat has no record of."""

from __future__ import annotations

import json
import shutil

import pytest

from harness.answers.recommend import ResolverData, recommend
from harness.catalog.backends import Backends
from harness.catalog.gpus import GpuDb
from harness.errors import MatrixError

from conftest import ROOT, assert_clean_error, call_compat

DATA = ResolverData.load(ROOT / "matrix")
OTHERS = [g for g in DATA.gpus.gpus if not g.cuda]
INDEX = {
    "rocm": "https://download.pytorch.org/whl/rocm",
    "xpu": "https://download.pytorch.org/whl/xpu",
    "npu": "https://download.pytorch.org/whl/cpu",
}


def answer(name: str, gpus: int = 1, method: str = "qlora"):
    return recommend(DATA.gpus.find(name), gpus, method, DATA, [])


def test_the_cards_users_ask_about_are_known_by_the_names_they_type():
    names = {
        "MI250": "gfx90a",
        "MI250X": "gfx90a",
        "Instinct MI300X": "gfx942",
        "RX 7900 XTX": "gfx1100",
        "M1": "mps",
        "Apple M4 Max": "mps",
        "M3 Ultra": "mps",
        "Arc A770": "xpu-dg2",
        "B580": "xpu-bmg",
        "Intel Data Center GPU Max 1550": "xpu-pvc",
        "Ascend 910B": "npu-910b",
    }
    for name, arch in names.items():
        gpu = DATA.gpus.find(name)
        assert (gpu.arch, gpu.cuda, gpu.cc, gpu.cc_text) == (arch, False, None, ""), name
    assert {g.backend for g in OTHERS} == {"rocm", "mps", "xpu", "npu"}
    # a CUDA card is as it was: its architecture from its compute capability
    assert DATA.gpus.find("H100").arch == "sm_90" and DATA.gpus.find("H100").backend == "cuda"


@pytest.mark.parametrize("gpu", OTHERS, ids=lambda g: g.key)
def test_every_part_of_the_answer_is_predicted_with_sources_or_labelled_cpu(gpu):
    rec = recommend(gpu, 1, "qlora", DATA, [])
    assert rec.backend is DATA.backends.get(gpu.backend) and rec.driver_min is None
    for e in rec.evidence:
        if e.kind == "measured":  # library versions that train together, from the CPU's records
            assert e.hardware == "cpu" and f"no record of {gpu.arch} yet" in e.says, e
        else:
            assert e.kind == "predicted" and e.rule, e
            if e.about in ("precision", "torch", "torch.host", "packages.bitsandbytes", "known"):
                assert e.sources and all(s.startswith("http") for s in e.sources), e
    got = rec.as_json()
    assert got["gpu"]["compute_capability"] is None and got["gpu"]["backend"] == gpu.backend
    assert got["device"] == DATA.backends.get(gpu.backend).device
    if gpu.backend == "mps":  # from PyPI's own index, no local version tag
        assert got["torch_index_url"] is None and got["torch_install"] == f"pip install torch=={rec.torch_version}"
    else:
        assert got["torch_index_url"].startswith(INDEX[gpu.backend]), got["torch_index_url"]
    assert "compute capability" not in json.dumps(got["evidence"])  # no CUDA rule answered for it


def test_qlora_where_no_bitsandbytes_runs_is_lora_and_says_why():
    rec = answer("910B")
    assert (rec.method, rec.quantization) == ("lora", "none") and "bitsandbytes" not in rec.packages
    assert rec.packages["torch-npu"] == "==2.10.0.*" and rec.torch_pin == "torch==2.10.0+cpu"
    assert any("QLoRA on Huawei Ascend 910B: no bitsandbytes release has an Ascend backend" in n for n in rec.notes)
    rocm = answer("MI300X")
    assert rocm.quantization == "nf4" and rocm.packages["bitsandbytes"] == ">=0.50.0"
    assert rocm.torch_pin == "torch==2.13.0+rocm7.2"


def test_devices_count_where_a_card_is_two_and_mps_trains_on_one():
    mi250 = answer("MI250", 1, "full")  # one MI250 is two devices to torch: a full fine-tune shards over them
    assert mi250.strategy == "zero3" and any("--nproc_per_node 2" in n for n in mi250.notes)
    assert any(e.says.startswith("2 devices, full fine-tune") for e in mi250.evidence)
    mac = answer("M1", 2)
    assert (mac.gpus, mac.strategy) == (1, "single")
    assert any("MPS has no distributed training" in n for n in mac.notes)


def test_deepspeed_only_where_it_says_it_is_validated_else_fsdp():
    assert answer("MI250X", 4, "full").strategy == "zero3"  # MI200 is DeepSpeed's tested AMD card
    radeon = answer("7900 XTX", 2, "full")
    assert radeon.strategy == "fsdp" and "deepspeed" not in radeon.packages
    assert any(e.rule == "rocm-deepspeed" and "not validated on gfx1100" in e.says for e in radeon.evidence)
    assert answer("Max 1550", 2, "full").strategy == "zero3"
    assert answer("Arc A770", 2, "full").strategy == "fsdp"


def test_known_breakage_is_said_for_the_chips_it_holds_for():
    def known(name):
        return " ".join(e.says for e in answer(name).evidence if e.about == "known")

    assert "FNUZ" in known("MI300X") and "FNUZ" not in known("MI250")
    assert "flash-attn's ROCm build supports MI200 and MI300 only" in known("7900 XTX")
    assert "flash-attn" not in known("MI300X")
    assert "no fp64" in known("A770") and "no fp64" not in known("B580")
    assert "PYTORCH_ENABLE_MPS_FALLBACK=1" in known("M2 Ultra")


def test_the_cli_answers_text_json_and_constraints_for_them():
    text = call_compat("recommend", "--gpu", "MI300X")
    assert text.returncode == 0, text.stderr
    assert "predicted only: compat has not run on gfx942 yet; torch's device here is 'cuda'" in text.stdout
    assert "(pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/rocm7.2)" in text.stdout
    mac = call_compat("recommend", "--gpu", "M4 Max", "--format", "constraints")
    assert mac.returncode == 0, mac.stderr
    lines = mac.stdout.splitlines()
    assert "torch==2.13.0" in lines and "bitsandbytes>=0.50.0" in lines and "# torch from PyPI" in mac.stdout
    npu = json.loads(call_compat("recommend", "--gpu", "910B", "--format", "json").stdout)
    assert npu["torch_install"].endswith("&& pip install 'torch-npu==2.10.0.*'") and npu["device"] == "npu"
    proc = call_compat("recommend", "--gpu", "910B", "--driver", "550.54.15")
    assert_clean_error(proc, 2)
    assert "--driver is the NVIDIA driver's version; Huawei Ascend 910B is a npu card" in proc.stderr


def test_fit_takes_a_device_of_a_two_device_card_and_asks_a_mac_for_its_memory():
    from harness.answers import fit

    mi250, one = DATA.gpus.find("MI250"), DATA.gpus.find("MI300X")
    assert fit.card_capacity(mi250, "MI250", None) == pytest.approx(64 * 2**30 * mi250.unknown_share)
    assert fit.card_capacity(one, "MI300X", None) == pytest.approx(192 * 2**30 * one.unknown_share)
    proc = call_compat("fit", "--gpu", "M4 Max", "--model-size", "7B", "--method", "lora")
    assert_clean_error(proc, 2)
    assert "Apple M4 Max shares its memory with the system (up to 128 GB" in proc.stderr
    given = call_compat("fit", "--gpu", "M4 Max", "--gpu-memory", "96", "--model-size", "7B", "--method", "lora")
    assert given.returncode == 0, given.stderr
    assert "Apple M4 Max is a mps card (mps): compat has no record of it" in given.stdout


def test_a_card_of_another_backend_is_checked_against_its_backend(tmp_path):
    shutil.copytree(ROOT / "matrix", tmp_path / "m")
    gpus = tmp_path / "m" / "gpus.toml"
    text = gpus.read_text()
    gpus.write_text(text.replace('target = "gfx942"\n', 'target = "sm_90"\ncc = "9.0"\n'))
    with pytest.raises(MatrixError) as err:
        GpuDb.load(tmp_path / "m")
    (problem,) = err.value.problems
    assert problem.startswith(f"{gpus}:") and "[gpu.mi300x].cc: a rocm card has no CUDA compute capability" in problem
    gpus.write_text(text.replace('target = "gfx942"\n', ""))
    with pytest.raises(MatrixError) as err:
        GpuDb.load(tmp_path / "m")
    assert "[gpu.mi300x].target: a rocm card needs a target: an LLVM target like gfx942" in err.value.problems[0]
    gpus.write_text(text.replace('backend = "npu"', 'backend = "cann"'))
    with pytest.raises(MatrixError) as err:
        GpuDb.load(tmp_path / "m")
    assert "[gpu.ascend910b].backend: must be one of cuda, rocm, mps, xpu, npu, not 'cann'" in err.value.problems[0]
    gpus.write_text(text)
    backends = tmp_path / "m" / "backends.toml"
    shipped = backends.read_text()
    backends.write_text(shipped[: shipped.index("[backend.npu]")])
    with pytest.raises(MatrixError) as err:
        ResolverData.load(tmp_path / "m")
    assert err.value.problems == [f"{gpus}: [gpu.ascend910b].backend: no [backend.npu] in {backends}"]
    backends.write_text(shipped.replace('bitsandbytes = ">=0.50.0"', 'bitsandbytes = "newest"', 1))
    with pytest.raises(MatrixError) as err:
        Backends.load(tmp_path / "m")
    (problem,) = err.value.problems
    assert problem.startswith(f"{backends}:") and "[backend.rocm].bitsandbytes: 'newest' is not a version" in problem
    backends.write_text(shipped.replace("[backend.mps]", "[backend.metal]", 1))
    with pytest.raises(MatrixError) as err:
        Backends.load(tmp_path / "m")
    assert any("[backend.metal]: not a backend of a card: rocm, mps, xpu or npu" in p for p in err.value.problems)
