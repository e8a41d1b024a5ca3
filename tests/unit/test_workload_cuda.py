"""The workload's GPU checks, driven on this CPU by a stand-in for torch that answers as torch
does on the hosts described (no GPU here): a driver too old for torch's CUDA, a card of another
architecture than the cell's, fewer cards than ranks, an allocator that ignored (or was handed)
expandable segments. The stand-in is a test input: it only says what torch would say."""

import sys
from types import SimpleNamespace

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "harness" / "workloads"))
import finetune  # noqa: E402


def fake_torch(cuda="12.8", init_error=None, count=1, capability=(9, 0), segments=None, settings=None):
    def init():
        if init_error:
            raise RuntimeError(init_error)

    memory = SimpleNamespace(_snapshot=lambda: {"segments": segments or [], "allocator_settings": settings or {}})
    cuda_ns = SimpleNamespace(
        init=init,
        device_count=lambda: count,
        get_device_capability=lambda i: capability,
        get_device_name=lambda i: "NVIDIA A100-SXM4-80GB",
        set_device=lambda i: None,
        synchronize=lambda *a: None,
        memory_reserved=lambda i: 2 * 2**20,
        memory=memory,
    )
    return SimpleNamespace(
        __version__="2.11.0+cu128", version=SimpleNamespace(cuda=cuda), cuda=cuda_ns, zeros=lambda *a, **k: None
    )


SPEC = {"hardware": "sm_90", "host": {"driver": "535.54", "cuda_driver": "12.2"}, "expandable_segments": False}


def test_a_torch_that_cannot_use_the_card_is_the_runners_problem():
    torch = fake_torch(
        init_error="The NVIDIA driver on your system is too old (found version 12020). Please update your GPU driver"
    )
    with pytest.raises(finetune.RunnerProblem) as err:
        finetune.cuda_start(SPEC, torch)
    assert str(err.value) == (
        "torch 2.11.0+cu128 (built for CUDA 12.8) cannot use the card: The NVIDIA driver on your "
        "system is too old (found version 12020). Please update your GPU driver (the driver supports CUDA 12.2)"
    )


def test_a_card_of_another_architecture_is_the_runners_problem():
    with pytest.raises(finetune.RunnerProblem) as err:
        finetune.cuda_start(SPEC, fake_torch(capability=(8, 0)))
    assert str(err.value) == (
        "the cell is for sm_90, but its card is a NVIDIA A100-SXM4-80GB (sm_80): the harness and "
        "CUDA disagree on which card is which"
    )


def test_a_rank_without_its_card_is_the_runners_problem(monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-aaa")
    with pytest.raises(
        finetune.RunnerProblem, match=r"torch sees 1 card\(s\) in CUDA_VISIBLE_DEVICES=GPU-aaa; rank 0 needs card 1"
    ):
        finetune.cuda_start(SPEC, fake_torch(count=1))


def test_a_good_card_becomes_the_current_device_and_its_context_is_measured_where_nvml_can():
    cuda = finetune.cuda_start(SPEC, fake_torch())
    assert cuda["index"] == 0
    # no NVML on this host: the context is not guessed
    assert (cuda["cuda_context"], cuda["context_source"]) == (None, None)


@pytest.mark.parametrize(
    "asked, segments, settings, fails",
    [
        (True, [{"device": 0, "is_expandable": True}], {}, False),
        (True, [{"device": 0, "is_expandable": False}], {}, True),  # torch ignored the setting (pytorch#183387)
        (False, [{"device": 0, "is_expandable": True}], {}, True),  # a runner's setting leaked into a baseline cell
        (False, [{"device": 0, "is_expandable": False}], {}, False),
        (True, [], {"expandable_segments": True}, False),  # no segment yet: the allocator's effective setting
        (True, [{"device": 0}], {}, False),  # a torch that cannot say: recorded as unknown, not failed
    ],
)
def test_the_allocator_did_what_the_cell_asked_for(asked, segments, settings, fails):
    checks = {}

    def run():
        return finetune.check_allocator(
            fake_torch(segments=segments, settings=settings),
            {**SPEC, "expandable_segments": asked},
            {"index": 0},
            checks,
        )

    if fails:
        with pytest.raises(finetune.CheckFailed, match="allocator segments"):
            run()
    else:
        run()
    expected = (
        None
        if segments == [{"device": 0}]
        else (settings.get("expandable_segments") if not segments else segments[0]["is_expandable"])
    )
    assert checks["expandable_segments_used"] == expected


def test_the_trainers_fsdp_saves_whole_weights(monkeypatch):
    """accelerate's FSDP2 default is a sharded state dict, which from_pretrained cannot reload."""
    pytest.importorskip("transformers")
    monkeypatch.delenv("FSDP_STATE_DICT_TYPE", raising=False)
    from harness.catalog import strategies

    spec = {
        "hardware": "cpu",
        "strategy": "fsdp2",
        "strategy_facts": strategies.get("fsdp2").spec(),
        "grad_ckpt": False,
        "precision": "fp32",
        "train": {"steps": 1, "batch_size": 1, "lr": 0.1, "seed": 0},
    }
    args = finetune.training_arguments(spec, "/tmp/compat-test-out", ["LlamaDecoderLayer"])
    config = {k.removeprefix("fsdp_"): v for k, v in args.fsdp_config.items()}
    assert config["state_dict_type"] == "FULL_STATE_DICT" and str(config["version"]) == "2"
    import os

    assert os.environ["FSDP_STATE_DICT_TYPE"] == "FULL_STATE_DICT"  # for releases that read only that


def test_a_card_a_cuda_error_left_unusable_still_gets_its_result_written(monkeypatch):
    """After a device-side assert every CUDA call raises; the rank's memory entry says so and the
    result file is still written (it used to be the first thing lost)."""

    def broken(*args):
        raise RuntimeError("CUDA error: device-side assert triggered")

    torch = fake_torch()
    torch.cuda.max_memory_allocated = torch.cuda.max_memory_reserved = broken
    monkeypatch.setitem(sys.modules, "torch", torch)
    (entry,) = finetune.memory_report("cuda", {}, {"index": 0, "nvml": None, "train_max_allocated": 123})
    assert entry["device"] == "cuda:0" and entry["train_max_allocated_bytes"] == 123
    assert entry["cuda_memory_error"] == "RuntimeError: CUDA error: device-side assert triggered"
    with pytest.raises(RuntimeError):
        finetune.end_cuda_phase(torch, {"index": 0}, "train", ok=True)  # a good phase's reading must not fail silently
    torch.cuda.synchronize = broken
    finetune.end_cuda_phase(torch, {"index": 0}, "train", ok=False)  # a failed phase's error is the news


def test_a_cuda_step_records_allocated_memory_at_the_end_of_each_phase(monkeypatch):
    """The step callback on a stand-in CUDA torch (a test input: allocated memory that reads 10, 20,
    30 MiB at the three points, as a step's forward, backward and optimizer step would leave it): the
    timeline point and the rank's record carry each phase's reading (compat fit checks its phase
    count against them), and a step outside training records none."""
    import transformers  # noqa: F401  (imported with the real torch, before the stand-in)

    readings = [10 * 2**20, 20 * 2**20, 30 * 2**20]
    fake = SimpleNamespace(
        cuda=SimpleNamespace(
            memory_allocated=lambda *a: readings.pop(0) if readings else 0,
            memory_reserved=lambda *a: 40 * 2**20,
            max_memory_allocated=lambda *a: 35 * 2**20,
            max_memory_reserved=lambda *a: 45 * 2**20,
        )
    )
    timeline, cuda = [], {}
    phases: dict = {}
    cb = finetune.step_callback({"cell": "x"}, [], timeline, [512], "cuda", phases, cuda)
    monkeypatch.setitem(sys.modules, "torch", fake)
    state = SimpleNamespace(global_step=2)
    cb.on_step_begin(None, state, None)
    phases["after_forward"] = fake.cuda.memory_allocated()  # what the model's forward hook does
    cb.on_pre_optimizer_step(None, state, None)
    cb.on_optimizer_step(None, state, None)
    cb.on_step_end(None, state, None)
    point = timeline[-1]
    assert (point["cuda_after_forward_bytes"], point["cuda_after_backward_bytes"], point["cuda_after_step_bytes"]) == (
        10 * 2**20,
        20 * 2**20,
        30 * 2**20,
    )
    assert cuda == {"after_forward": 10 * 2**20, "after_backward": 20 * 2**20, "after_step": 30 * 2**20}
    entry = finetune.memory_report("cuda", None, {"index": 0, **cuda})
    assert entry[0]["after_step_bytes"] == 30 * 2**20
    cb.on_pre_optimizer_step(None, state, None)  # between steps: not training, nothing read
    assert phases["after_backward"] == 20 * 2**20
