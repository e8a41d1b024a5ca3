"""The same initial weights on every stack (issue 25): harness/workloads/initial.py on tiny Llamas
built from a config with this checkout's transformers and peft. Two builds that drew from torch's
generator differently (as two transformers releases do) end with the same values and the same
hash; another seed gives others; constant tensors, tied embeddings and LoRA B keep what they are."""

import math
import sys

import pytest

from conftest import ROOT

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
sys.path.insert(0, str(ROOT / "harness" / "workloads"))
import initial  # noqa: E402


def tiny(rng_seed: int, **extra):
    """A freshly built tiny Llama, torch's generator seeded with `rng_seed` first."""
    torch.manual_seed(rng_seed)
    config = transformers.LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        **extra,
    )
    return transformers.AutoModelForCausalLM.from_config(config), config


def values(model) -> dict:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def test_two_builds_that_drew_differently_start_from_the_same_weights():
    a, config = tiny(1)
    b, _ = tiny(2)
    assert not torch.equal(a.model.embed_tokens.weight, b.model.embed_tokens.weight)  # the library's own init differs
    got_a, got_b = initial.reset_base(torch, a, config, seed=0), initial.reset_base(torch, b, config, seed=0)
    assert got_a == got_b and got_a["rule"] == initial.RULE and len(got_a["base_sha256"]) == 64
    va, vb = values(a), values(b)
    assert va.keys() == vb.keys() and all(torch.equal(va[n], vb[n]) for n in va)
    # norms (all ones) are kept; every weight matrix is drawn, normal(0, initializer_range)
    assert got_a["kept"] == sum(1 for n in va if "norm" in n) and got_a["drawn"] == len(va) - got_a["kept"]
    assert all(torch.equal(v, torch.ones_like(v)) for n, v in va.items() if "norm" in n)
    emb = va["model.embed_tokens.weight"]
    assert abs(emb.std().item() - config.initializer_range) < 0.002 and abs(emb.mean().item()) < 0.002


def test_the_seed_picks_the_values_and_the_hash_says_so():
    a, config = tiny(0)
    b, _ = tiny(0)
    assert (
        initial.reset_base(torch, a, config, seed=0)["base_sha256"]
        != initial.reset_base(torch, b, config, seed=1)["base_sha256"]
    )
    assert not torch.equal(a.lm_head.weight, b.lm_head.weight)


def test_tied_embeddings_are_set_once_and_stay_tied():
    model, config = tiny(3, tie_word_embeddings=True)
    model.tie_weights()
    assert model.lm_head.weight is model.model.embed_tokens.weight
    got = initial.reset_base(torch, model, config, seed=0)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert got["drawn"] + got["kept"] == len(list(model.parameters()))  # each tensor once


def test_lora_a_is_drawn_from_its_name_and_b_stays_zero():
    peft = pytest.importorskip("peft")
    hashes, adapters = [], []
    for rng_seed in (5, 6):
        model, config = tiny(rng_seed)
        initial.reset_base(torch, model, config, seed=0)
        torch.manual_seed(rng_seed)  # peft draws each A from torch's generator wherever the build left it
        lora = peft.get_peft_model(
            model,
            peft.LoraConfig(
                r=8, lora_alpha=16, lora_dropout=0.0, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"
            ),
        )
        hashes.append(initial.reset_adapters(torch, lora, seed=0))
        adapters.append({n: p.detach().clone() for n, p in lora.named_parameters() if "lora_" in n})
    assert hashes[0] == hashes[1] and len(hashes[0]) == 64
    assert adapters[0].keys() == adapters[1].keys() and all(
        torch.equal(adapters[0][n], adapters[1][n]) for n in adapters[0]
    )
    for name, value in adapters[0].items():
        if ".lora_B." in name:
            assert torch.count_nonzero(value) == 0
        else:  # kaiming_uniform_(a=sqrt(5))'s bound: 1/sqrt(fan_in)
            bound = 1 / math.sqrt(value.shape[1])
            assert value.abs().max().item() <= bound and value.abs().max().item() > 0.9 * bound


def test_a_model_without_adapters_has_no_adapter_hash():
    model, config = tiny(0)
    assert initial.reset_adapters(torch, model, seed=0) is None
