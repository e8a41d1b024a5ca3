"""Every trainable tensor learns (issue 25): harness/workloads/learn.py's Watch on a small real torch
model trained for real with SGD: a LoRA-shaped adapter (A, and B starting at zero), a frozen base, a
module that never runs; then an adapter whose output is cut off for one step, a non-finite
gradient with and without fp16 loss scaling, and a frozen value."""

import sys

import pytest

from conftest import ROOT

torch = pytest.importorskip("torch")
sys.path.insert(0, str(ROOT / "harness" / "workloads"))
import learn  # noqa: E402


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.base = torch.nn.Linear(4, 4)
        self.base.requires_grad_(False)
        self.lora_A = torch.nn.Linear(4, 2, bias=False)
        self.lora_B = torch.nn.Linear(2, 4, bias=False)
        torch.nn.init.zeros_(self.lora_B.weight)
        self.norm = torch.nn.LayerNorm(4)
        self.vision = torch.nn.Linear(4, 4)  # never called: unused, not a failure
        self.cut_at: set[int] = set()  # forward passes whose adapter output is cut off
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        side = self.lora_B(self.lora_A(x))
        if self.calls in self.cut_at:
            side = side * 0  # a path whose backward gives nothing: an all-zero gradient
        return self.norm(self.base(x) + side)


def train(model, steps=4, scaled=False, grad_hook=None):
    if grad_hook:
        grad_hook(model)
    watch = learn.Watch(model, scaled=scaled)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        loss = (model(torch.randn(8, 4)) - 1).pow(2).mean()
        loss.backward()
        if all(
            p.grad is None or bool(torch.isfinite(p.grad).all()) for p in params
        ):  # as a loss scaler skips an overflow
            opt.step()
    return watch.verdict()


def test_every_tensor_learns_a_loras_first_zero_is_expected_and_an_unused_module_is_listed():
    got = train(Tiny())
    assert got["trainable_tensors"] == 6 and got["backward_passes"] == 4
    assert got["unused"] == ["vision.weight", "vision.bias"] and got["learned"] == 4
    assert got["no_gradient"] == [] and got["zero_gradient_passes"] == {} and got["did_not_move"] == []
    assert learn.failure(got) is None


def test_an_adapter_cut_off_for_one_step_is_named_with_the_pass():
    model = Tiny()
    model.cut_at = {1, 3}
    got = train(model)
    # A's zero at pass 1 is expected (B is still zero; and B, cut off, stays zero for pass 2); at pass 3 both are cut
    # off
    assert got["zero_gradient_passes"] == {"lora_A.weight": [3], "lora_B.weight": [1, 3]}
    assert learn.failure(got).startswith(f"{6 - 2 - got['learned']} of 6 trainable tensors did not learn on every step")
    assert (
        "an all-zero gradient on backward pass 3 of 4: lora_A.weight; an all-zero gradient on backward passes 1, 3 "
        "of 4: lora_B.weight" in learn.failure(got)
    )


def test_a_tensor_out_of_the_graph_gets_no_gradient_and_does_not_move():
    model = Tiny()
    model.cut_at = {1, 2, 3, 4}
    model.lora_B.register_forward_hook(lambda m, a, out: out.detach())  # the hooks never fire
    got = train(model)
    assert got["no_gradient"] == ["lora_A.weight", "lora_B.weight"]
    assert set(got["did_not_move"]) == {"lora_A.weight", "lora_B.weight"}
    assert (
        learn.failure(got)
        == "2 of 6 trainable tensors did not learn on every step (no gradient reached them: lora_A.weight, "
        "lora_B.weight)"
    )


def test_a_non_finite_gradient_fails_unless_fp16_loss_scaling_skips_it():
    def poison(model):  # the norm's bias gets an inf gradient on every pass
        model.norm.bias.register_hook(lambda g: g + float("inf"))

    got = train(Tiny(), grad_hook=poison)
    assert got["nonfinite_gradient"] == ["norm.bias"] and "a non-finite gradient: norm.bias" in learn.failure(got)
    scaled = train(Tiny(), scaled=True, grad_hook=poison)
    assert scaled["nonfinite_gradient"] == [] and scaled["nonfinite_passes_skipped_by_loss_scaling"] == 4


def test_layer_numbers_fold_into_one_pattern():
    names = [
        f"base_model.model.model.layers.{i}.self_attn.{m}_proj.lora_B.default.weight"
        for i in (0, 1)
        for m in ("q", "k")
    ]
    assert learn.groups(names + ["lm_head.weight"]) == (
        "base_model.model.model.layers.{0,1}.self_attn.q_proj.lora_B.default.weight, "
        "base_model.model.model.layers.{0,1}.self_attn.k_proj.lora_B.default.weight, "
        "lm_head.weight"
    )
