"""The workload's pure helpers, called directly (before, only the integration runs reached them):
the data it trains on, how a batch is padded, which DeepSpeed sections count as offloaded, the
quantization config each axis value asks for, and the check that a cell ran as the strategy it
names. The trained models in the strategy check are stand-ins (classes named as the wrappers
torch and DeepSpeed make), a test input that only answers what those wrappers answer."""

import sys
from types import SimpleNamespace

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "harness" / "workloads"))
import finetune  # noqa: E402


def test_the_synthetic_data_is_the_same_on_every_run_and_follows_its_pattern():
    rows = finetune.synthetic_dataset(50, vocab=97, lo=5, hi=12, seed=3)
    assert rows == finetune.synthetic_dataset(50, vocab=97, lo=5, hi=12, seed=3)
    assert rows != finetune.synthetic_dataset(50, vocab=97, lo=5, hi=12, seed=4)
    assert len(rows) == 50 and {len(r["input_ids"]) for r in rows} <= set(range(5, 13))
    assert len({len(r["input_ids"]) for r in rows}) > 1  # lengths vary: the batches pad
    for r in rows:
        ids = r["input_ids"]
        step = (ids[1] - ids[0]) % 97
        assert step in (1, 2, 3) and all((b - a) % 97 == step for a, b in zip(ids, ids[1:]))
        assert all(0 <= t < 97 for t in ids)


def test_the_data_uses_the_first_data_vocab_ids_or_the_whole_vocabulary():
    assert finetune.data_vocab({"model": {"vocab_size": 8192}, "train": {}}) == 8192
    assert finetune.data_vocab({"model": {"vocab_size": 8192}, "train": {"data_vocab": 512}}) == 512
    assert finetune.data_vocab({"model": {"vocab_size": 256}, "train": {"data_vocab": 512}}) == 256


def test_a_batch_is_right_padded_and_its_padding_is_out_of_attention_and_loss():
    batch = finetune.collate([{"input_ids": [5, 6, 7]}, {"input_ids": [9]}])
    assert batch["input_ids"].tolist() == [[5, 6, 7], [9, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert batch["labels"].tolist() == [[5, 6, 7], [9, -100, -100]]
    assert finetune.collate([{"input_ids": [1, 2]}], pad_to=4)["labels"].tolist() == [[1, 2, -100, -100]]
    assert finetune.collate([{"input_ids": [1, 2, 3]}], pad_to=2)["input_ids"].shape == (1, 3)  # never cut


def test_an_offload_section_counts_when_it_sends_tensors_off_the_device():
    assert finetune.offloaded(None) is False
    assert finetune.offloaded(SimpleNamespace(device="none")) is False
    assert finetune.offloaded(SimpleNamespace(device=SimpleNamespace(value="cpu"))) is True  # DeepSpeed's enum
    assert finetune.offloaded(SimpleNamespace(device="nvme")) is True


def test_each_quantization_value_asks_for_its_bitsandbytes_config():
    assert finetune.quantization_config("none", "bf16") is None
    nf4dq = finetune.quantization_config("nf4dq", "bf16")
    assert nf4dq.load_in_4bit and nf4dq.bnb_4bit_quant_type == "nf4" and nf4dq.bnb_4bit_use_double_quant
    assert str(nf4dq.bnb_4bit_compute_dtype) == "torch.bfloat16"
    fp4 = finetune.quantization_config("fp4", "fp32")
    assert (
        fp4.bnb_4bit_quant_type == "fp4"
        and not fp4.bnb_4bit_use_double_quant
        and str(fp4.bnb_4bit_compute_dtype) == "torch.float32"
    )
    assert finetune.quantization_config("int8", "fp16").load_in_8bit
    with pytest.raises(ValueError, match="unknown quantization 'nf3'"):
        finetune.quantization_config("nf3", "bf16")


def wrapped(name: str, parameter_type: str = "Parameter", **methods):
    """A stand-in for a trained model: an object of a class called `name` with parameters of a
    class called `parameter_type`, and the given methods."""
    param = type(parameter_type, (), {})()
    return type(
        name, (), {"parameters": lambda self: [param], **{k: (lambda self, v=v: v) for k, v in methods.items()}}
    )()


NO_ZERO = {"zero_stage": None, "offload": False}


def test_a_cell_passes_only_as_the_strategy_it_names():
    result = {"checks": {}}
    finetune.check_strategy("ddp", NO_ZERO, wrapped("DistributedDataParallel"), result)
    assert result["checks"] == {"wrapped_as": "DistributedDataParallel", "parameter_types": ["Parameter"]}
    finetune.check_strategy("fsdp2", NO_ZERO, wrapped("Model", "DTensor"), {"checks": {}})
    with pytest.raises(
        finetune.CheckFailed, match="strategy ddp asked for, but the trained model is a Model with Parameter"
    ):
        finetune.check_strategy("ddp", NO_ZERO, wrapped("Model"), {"checks": {}})
    with pytest.raises(finetune.CheckFailed, match="strategy fsdp2 asked for"):
        finetune.check_strategy("fsdp2", NO_ZERO, wrapped("Model"), {"checks": {}})


def test_a_zero_cell_passes_only_with_the_stage_and_offload_it_names():
    zero3_offload = {"zero_stage": 3, "offload": True}
    cpu = SimpleNamespace(device="cpu")
    engine = wrapped("DeepSpeedEngine", zero_optimization_stage=3, zero_offload_optimizer=cpu, zero_offload_param=cpu)
    result = {"checks": {}}
    finetune.check_strategy("zero3_offload", zero3_offload, engine, result)
    assert result["checks"]["zero"] == {"stage": 3, "offload_optimizer": True, "offload_param": True}
    no_offload = wrapped(
        "DeepSpeedEngine", zero_optimization_stage=3, zero_offload_optimizer=None, zero_offload_param=None
    )
    with pytest.raises(
        finetune.CheckFailed,
        match=r"ZeRO stage 3 with CPU offload, but DeepSpeed ran stage 3 \(offload optimizer False",
    ):
        finetune.check_strategy("zero3_offload", zero3_offload, no_offload, {"checks": {}})
    with pytest.raises(finetune.CheckFailed, match="strategy zero2 asked for, but the trained model is a Model"):
        finetune.check_strategy("zero2", {"zero_stage": 2, "offload": False}, wrapped("Model"), {"checks": {}})


def test_fault_injection_is_out_of_the_training_path_until_its_variable_is_set(monkeypatch):
    """faults.py is imported by the workloads only inside after_first_step, and only when
    COMPAT_INJECT_FAULT is set; then it misbehaves only for the cell (and rank) it names."""
    import ast

    for name in ("finetune.py", "native.py"):
        tree = ast.parse((ROOT / "harness" / "workloads" / name).read_text(encoding="utf-8"))
        top = [a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names]
        top += [n.module for n in tree.body if isinstance(n, ast.ImportFrom)]
        assert "faults" not in top, name
    monkeypatch.delitem(sys.modules, "faults", raising=False)
    monkeypatch.delenv("COMPAT_INJECT_FAULT", raising=False)
    finetune.after_first_step("cpu-local-fp32-none-full-single")
    assert "faults" not in sys.modules
    monkeypatch.setenv("COMPAT_INJECT_FAULT", "raise:rank1@*-lora-*")
    monkeypatch.setenv("RANK", "1")
    finetune.after_first_step("cpu-local-fp32-none-full-single")  # another cell: nothing happens
    assert "faults" in sys.modules
    with pytest.raises(RuntimeError, match="injected fault: the workload raised on purpose"):
        finetune.after_first_step("cpu-local-fp32-none-lora-single")
    monkeypatch.setenv("RANK", "0")
    finetune.after_first_step("cpu-local-fp32-none-lora-single")  # another rank: nothing happens
