"""`compat fit --trace`: count memory by running the model's own code, at full size, with no memory.

The model is built from its config by transformers (on the meta device, then each parameter and
buffer made a fake tensor: torch's FakeTensorMode, which runs every op on shapes alone), wrapped as
compat's workload wraps it (peft's LoRA), and trained for two steps the way the Trainer trains:
forward under autocast, backward, clip_grad_norm_, the optimizer's step, zero_grad(set_to_none).
A dispatch mode watches every tensor the ops create and every storage that dies, so it knows the
bytes live after each op: the peak of each phase of the second step (the first has no optimizer
state yet), what they were (weights, gradients, optimizer states, activations, the backward's and
the optimizer's temporaries) and the largest tensors at the peak.

What runs is what a CUDA card would run, with the choices a CPU would make differently made
explicitly, because the fake tensors live on the CPU (torch built without CUDA cannot make CUDA fake
tensors): the optimizer takes the implementation it takes on CUDA (torch.optim.AdamW defaults to
foreach there, to its for-loop on a CPU: torch/optim/optimizer.py, _default_to_fused_or_foreach);
autocast is the CPU's, whose lower-precision ops (matmul, linear) are the CUDA's; a batch of one
runs SDPA causal on grouped key/value heads as CUDA does (transformers cannot read fake position
ids, so it is told the batch is not packed: _unpacked), a padded batch with its mask; queries wider
than values (DeepSeek's MLA) take CUDA's memory-efficient kernel (_cuda_attention), fp32 experts
transformers' own grouped_mm fallback (_experts_in_their_dtype).

Checked against CUDA records of compat's own (the Qwen2-0.5B shape on an H200/H100, 2026-11-26):
the trace came within 1.2% of the measured training peak in every one (tests/integration/test_trace.py).

Private names are used here only: torch's FakeTensorMode, TorchDispatchMode and the memory-efficient
attention op; transformers' masking_utils.find_packed_sequence_indices and
integrations.moe._can_use_grouped_mm, each patched for the trace alone where the release has it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import warnings
import weakref

from harness.answers.phases import masked
from harness.errors import UsageError

# the categories a live storage is counted under
WEIGHTS, GRADIENTS, STATES = "weights", "gradients", "optimizer states"
CREATED_IN = {"forward": "activations", "backward": "backward temporaries", "step": "optimizer temporaries"}
PHASES = ("forward", "backward", "optimizer step")  # of the second training step, as reported
# Shape.linears names -> the module names transformers gives them (peft's target_modules)
MODULE_NAMES = {
    "q": "q_proj",
    "k": "k_proj",
    "v": "v_proj",
    "o": "o_proj",
    "gate": "gate_proj",
    "up": "up_proj",
    "down": "down_proj",
    "q_a": "q_a_proj",
    "q_b": "q_b_proj",
    "kv_a": "kv_a_proj_with_mqa",
    "kv_b": "kv_b_proj",
    "qkv": ("q_proj", "k_proj", "v_proj"),  # GLM-4's fused query_key_value: transformers' glm splits it
    "gate_up": "gate_up_proj",
}
# families whose transformers modules fuse projections: Shape.linears names -> theirs
FUSED = {"phi3": {"q": "qkv_proj", "k": "qkv_proj", "v": "qkv_proj", "gate": "gate_up_proj", "up": "gate_up_proj"}}
SAVED_MODULES = {"embed": "embed_tokens", "lm_head": "lm_head", "norms": "norm"}
# TrainingArguments' optim names the trace runs -> (torch.optim class name, its keyword arguments)
OPTIMIZERS = {
    "adamw": ("AdamW", {"foreach": True}),
    "adamw_torch": ("AdamW", {"foreach": True}),
    "adam": ("Adam", {"foreach": True}),
    "adamw_torch_fused": ("AdamW", {"fused": True}),
    "sgd": ("SGD", {"foreach": True}),
    "adagrad": ("Adagrad", {"foreach": True}),
    "rmsprop": ("RMSprop", {"foreach": True}),
}
SNAPSHOT_STEP = 0.005  # the largest tensors are noted each time the peak grows by half a percent


@dataclasses.dataclass
class Traced:
    """What one traced training step held: per phase, its peak and what made it up."""

    phases: dict[str, dict]  # phase -> {"bytes": peak, "by": {category: bytes at that peak}}
    largest: list[dict]  # at the step's overall peak: {"what", "category", "bytes", "count"}
    seconds: float
    says: str  # what ran: the path, the optimizer's implementation, the device the choices follow
    versions: dict[str, str]

    @property
    def peak_phase(self) -> str:
        return max(PHASES, key=lambda p: self.phases[p]["bytes"])

    @property
    def peak(self) -> int:
        return self.phases[self.peak_phase]["bytes"]

    def as_json(self) -> dict:
        return {
            "peak_bytes": self.peak,
            "peak_phase": self.peak_phase,
            "phases": self.phases,
            "largest": self.largest,
            "seconds": round(self.seconds, 1),
            "says": self.says,
            "versions": self.versions,
        }


class _LiveBytes:
    """A TorchDispatchMode (made in `_live_bytes`, where torch is imported) that counts the bytes of
    the storages alive: each op's outputs are added when first seen, under the category of the
    phase that made them, and subtracted when their storage is freed."""

    def __init__(self):
        from torch.utils.weak import WeakIdKeyDictionary

        self.live = WeakIdKeyDictionary()  # storage -> [bytes, category, what]
        self.by: dict[str, int] = {}
        self.total = 0
        self.phase = "load"
        self.peaks: dict[str, tuple[int, dict]] = {}
        self.snapshot: tuple[int, list] = (0, [])
        self.watch_largest = False

    def add(self, tensor, category: str, what: str) -> None:
        storage = tensor.untyped_storage()
        if storage in self.live:
            return
        entry = [storage.nbytes(), category, what]
        self.live[storage] = entry
        self.total += entry[0]
        self.by[category] = self.by.get(category, 0) + entry[0]
        weakref.finalize(storage, self._freed, entry)

    def _freed(self, entry: list) -> None:
        self.total -= entry[0]
        self.by[entry[1]] -= entry[0]

    def label(self, named, category: str) -> None:
        """Count the tensors of `named` ((what, tensor) pairs) under `category` from now on."""
        for what, tensor in named:
            if tensor is None:
                continue
            entry = self.live.get(tensor.untyped_storage())
            if entry is None:
                self.add(tensor, category, what)
            else:
                self.by[entry[1]] -= entry[0]
                self.by[category] = self.by.get(category, 0) + entry[0]
                entry[1], entry[2] = category, what

    def seen(self, func, out) -> None:
        import torch
        from torch.utils._pytree import tree_flatten

        category = CREATED_IN.get(self.phase.split(":")[0], "other")
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.add(t, category, f"{func.__name__} {tuple(t.shape)} {str(t.dtype).replace('torch.', '')}")
        best = self.peaks.get(self.phase)
        if best is None or self.total > best[0]:
            self.peaks[self.phase] = (self.total, dict(self.by))
        if self.watch_largest and self.total > self.snapshot[0] * (1 + SNAPSHOT_STEP):
            self.snapshot = (self.total, [tuple(e) for e in self.live.values()])


def _live_bytes():
    from torch.utils._python_dispatch import TorchDispatchMode

    class LiveBytes(_LiveBytes, TorchDispatchMode):
        def __init__(self):
            _LiveBytes.__init__(self)
            TorchDispatchMode.__init__(self)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            self.seen(func, out)
            return out

    return LiveBytes()


def traceable(run) -> None:
    """A UsageError saying why `run` cannot be traced, else nothing."""
    from harness.catalog import strategies

    if run.method == "qlora" or run.quantization != "none":
        raise UsageError(
            "--trace: QLoRA is not traced: bitsandbytes' 4-bit weight (Params4bit) is a tensor subclass made "
            "with torch.Tensor._make_subclass, which cannot wrap a fake tensor (tried with bitsandbytes 0.50.2: "
            "'Creating a new Tensor subclass Params4bit but the raw Tensor object is already associated to a "
            "python object of type FakeTensor'); the count answers for QLoRA (harness/answers/phases.py)"
        )
    if run.strategy != strategies.one_process().name or run.cards != 1:
        raise UsageError(
            "--trace runs one process on one card: --gpus 1 --strategy single (the count divides what it "
            "traces between cards for the other strategies)"
        )
    if run.optimizer not in OPTIMIZERS:
        raise UsageError(
            f"--trace: optimizer {run.optimizer} is not traced (bitsandbytes' and transformers' own optimizers "
            f"are not run here): one of {', '.join(OPTIMIZERS)}"
        )
    if run.optimizer_in_backward:
        raise UsageError("--trace: --optimizer-in-backward is not traced")
    if getattr(run, "path", "compat") != "compat":
        raise UsageError(
            f"--trace runs compat's workload (HF Trainer + peft), not {run.path}'s own code: the count answers "
            f"for --path {run.path}"
        )


# configs transformers builds under another model_type: GLM-4's own (THUDM's remote code) is the
# architecture transformers ports as "glm" (its GlmConfig defaults are glm-4-9b-chat's), and a
# vision-language model's decoder is its text model's (Qwen2-VL's is Qwen2 with multimodal RoPE)
BUILT_AS = {"chatglm": "glm", "qwen2_vl": "qwen2"}


def hf_config(config: dict, name: str):
    """A transformers config of `config` (config.json's keys, with model_type), and how it is built."""
    import transformers

    model_type = config.get("model_type")
    if not isinstance(model_type, str):
        raise UsageError(f"--trace: {name} names no model_type, so transformers cannot build it")
    keys = {
        k: v
        for k, v in {**config, **(config.get("text_config") or {})}.items()
        if k not in ("model_type", "architectures", "auto_map", "vision_config", "text_config")
    }
    built = BUILT_AS.get(model_type, model_type)
    # what a config.json says by leaving a key out, where transformers' class defaults say otherwise
    # (Qwen3Config's head_dim is 128, DeepseekV2Config's q_lora_rank 1536; a TOML table holds no null)
    if isinstance(keys.get("hidden_size"), int) and isinstance(keys.get("num_attention_heads"), int):
        keys.setdefault("head_dim", keys["hidden_size"] // keys["num_attention_heads"])
    if keys.get("kv_lora_rank"):
        keys.setdefault("q_lora_rank", None)
    try:
        out = transformers.AutoConfig.for_model(built, **keys)
    except (ValueError, KeyError) as exc:
        raise UsageError(
            f"--trace: transformers {transformers.__version__} cannot build model_type {model_type!r} of {name} "
            f"without the model's own code ({str(exc)[:160]})"
        ) from None
    out.use_cache = False
    if built == model_type:
        return out, ""
    if config.get("vision_config"):
        return out, (
            f"{model_type}: its language model built as transformers' {built} (the vision tower's weights are "
            "the count's, frozen; what it keeps per image is not traced)"
        )
    return out, f"{model_type} built as transformers' {built}"


def _build(hf, run):
    """The model as compat's workload builds and wraps it, on the meta device (no memory, no init)."""
    import torch
    import transformers

    sixteen = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(run.precision)
    if run.method == "full":
        dtype = torch.bfloat16 if run.pure_bf16 else torch.float32
    else:
        dtype = sixteen if (run.lora_base_16bit and sixteen is not None) else torch.float32
    with torch.device("meta"):
        try:
            model = transformers.AutoModelForCausalLM.from_config(hf, dtype=dtype, attn_implementation="sdpa")
        except ValueError:  # a model without SDPA (Gemma 2: its soft-capping) trains with eager attention
            model = transformers.AutoModelForCausalLM.from_config(hf, dtype=dtype, attn_implementation="eager")
    if run.method == "lora":
        import peft

        if run.grad_ckpt:
            model.enable_input_require_grads()  # as the workload and LLaMA-Factory do
        from harness.answers.fit import LINEAR

        fused = FUSED.get(hf.model_type, {})
        targets = (
            "all-linear"
            if set(run.lora_targets) >= set(LINEAR)
            else sorted({m for t in run.lora_targets for m in _as_tuple(fused.get(t) or MODULE_NAMES.get(t, t))})
        )
        lora = peft.LoraConfig(
            r=run.lora_r,
            lora_alpha=2 * run.lora_r,
            lora_dropout=0.0,
            target_modules=targets,
            modules_to_save=[SAVED_MODULES[m] for m in run.modules_to_save] or None,
            task_type="CAUSAL_LM",
        )
        model = peft.get_peft_model(model, lora)
    return model, sixteen


def _as_tuple(names) -> tuple:
    return names if isinstance(names, tuple) else (names,)


def _make_fake(model, live) -> None:
    """Each parameter and buffer of `model` (on the meta device) made a fake tensor on the CPU, a
    tied weight once; inside the fake mode, so `live` counts them as the weights."""
    import torch

    made = {}
    for module in model.modules():
        for table in (module._parameters, module._buffers):
            for key, t in list(table.items()):
                if t is None:
                    continue
                if id(t) not in made:
                    fake = torch.empty(tuple(t.shape), dtype=t.dtype, device="cpu")
                    made[id(t)] = (
                        torch.nn.Parameter(fake, t.requires_grad) if isinstance(t, torch.nn.Parameter) else fake
                    )
                table[key] = made[id(t)]
    live.label(model.named_parameters(), WEIGHTS)
    live.label(model.named_buffers(), WEIGHTS)


def trace(config: dict, run, name: str = "config") -> Traced:
    """Two training steps of `run` (fit.Run: one card) on the model of `config`, on fake tensors."""
    traceable(run)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # transformers' and peft's deprecation notes are not the user's
        return _trace(config, run, name)


def _trace(config: dict, run, name: str) -> Traced:
    started = time.monotonic()
    import peft
    import torch
    import transformers
    from torch._subclasses.fake_tensor import FakeTensorMode

    hf, built_as = hf_config(config, name)
    model, sixteen = _build(hf, run)
    if run.grad_ckpt:
        model.gradient_checkpointing_enable()  # the Trainer's call: its default kwargs
    model.train()
    live = _live_bytes()
    with FakeTensorMode(), live, _unpacked(not masked(run)), _experts_in_their_dtype(), _cuda_attention():
        _make_fake(model, live)
        names = {id(p): n for n, p in model.named_parameters()}
        params = [p for p in model.parameters() if p.requires_grad]
        for p in params:  # a gradient is counted as one from the moment autograd accumulates it
            p.register_post_accumulate_grad_hook(
                lambda p: live.label(((f"grad of {names[id(p)]}", p.grad),), GRADIENTS)
            )
        kind, kwargs = OPTIMIZERS[run.optimizer]
        optimizer = getattr(torch.optim, kind)(params, lr=1e-5, **kwargs)
        _two_steps(model, params, names, optimizer, live, run, sixteen)
    phases = {}
    for phase, key in zip(PHASES, ("forward:2", "backward:2", "step:2")):
        peak, by = live.peaks[key]
        phases[phase] = {"bytes": peak, "by": {k: v for k, v in by.items() if v > 0}}
    impl = "fused" if kwargs.get("fused") else "foreach"
    attention = model.config._attn_implementation
    says = (
        (f"{built_as}; " if built_as else "")
        + f"compat's workload (HF Trainer + peft): {run.method}, two steps of batch {run.batch} x "
        f"{run.seq_len} tokens; "
        f"{'pure bf16' if run.pure_bf16 else (run.precision + ' autocast' if sixteen is not None else 'fp32')}; "
        f"torch.optim.{kind} ({impl}, as on CUDA); {attention} attention"
        + (" with a mask (a padded batch)" if masked(run) else "")
        + "; fake tensors on the CPU (FakeTensorMode)"
    )
    return Traced(
        phases,
        _largest(live.snapshot[1]),
        time.monotonic() - started,
        says,
        {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__},
    )


@contextlib.contextmanager
def _experts_in_their_dtype():
    """A mixture of experts whose weights are not bf16 (fp32 master weights) multiplies through
    transformers' own grouped_mm_fallback: torch's _grouped_mm is not autocast-enabled, so
    transformers casts the input to the experts' fp32 (integrations/moe.py, _grouped_mm), and its
    fake kernel takes bf16 only. The fallback's output and saved tensors are the same shapes."""
    import torch

    try:
        import transformers.integrations.moe as moe
    except ImportError:  # a release without grouped_mm experts
        yield
        return
    usable = getattr(moe, "_can_use_grouped_mm", None)
    if usable is None:
        yield
        return
    moe._can_use_grouped_mm = lambda x, weight, offs: weight.dtype == torch.bfloat16 and usable(x, weight, offs)
    try:
        yield
    finally:
        moe._can_use_grouped_mm = usable


@contextlib.contextmanager
def _cuda_attention():
    """SDPA as a CUDA card runs it where the CPU's differs in what it keeps: queries and keys wider
    than the values (DeepSeek's MLA) take CUDA's memory-efficient kernel (q, k, v, the output and
    its log-sum-exp kept), where the CPU falls back to the math path and keeps every score."""
    import torch

    sdpa = torch.nn.functional.scaled_dot_product_attention

    def attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kwargs):
        if query.shape[-1] != value.shape[-1] and not kwargs.get("enable_gqa"):
            bias = attn_mask
            if bias is not None and bias.dtype == torch.bool:  # the kernel takes an additive bias
                bias = torch.zeros(bias.shape, dtype=query.dtype).masked_fill(~bias, float("-inf"))
            if bias is not None:
                bias = bias.expand(query.shape[0], query.shape[1], query.shape[2], key.shape[2])
            return torch.ops.aten._scaled_dot_product_efficient_attention(
                query, key, value, bias, True, dropout_p, is_causal and bias is None, scale=scale
            )[0]
        return sdpa(
            query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale, **kwargs
        )

    torch.nn.functional.scaled_dot_product_attention = attention
    try:
        yield
    finally:
        torch.nn.functional.scaled_dot_product_attention = sdpa


@contextlib.contextmanager
def _unpacked(on: bool):
    """Where `on`: transformers reads the batch as one sequence per row, as it finds from the real
    position ids (masking_utils.find_packed_sequence_indices cannot read fake ones, and would
    otherwise take the batch for packed sequences and build a mask)."""
    import importlib

    try:
        masking = importlib.import_module("transformers.masking_utils")
    except ImportError:
        masking = None
    found = getattr(masking, "find_packed_sequence_indices", None)
    if found is None:  # an older transformers builds the mask its own way
        yield
        return
    if on:
        masking.find_packed_sequence_indices = lambda *args, **kwargs: None
    try:
        yield
    finally:
        masking.find_packed_sequence_indices = found


def _two_steps(model, params, names, optimizer, live, run, sixteen) -> None:
    """Two training steps as the Trainer takes them, each phase named for `live`."""
    import torch

    ids = torch.randint(0, 128, (run.batch, run.seq_len))
    # a padded batch passes its attention mask, and SDPA gets a mask (fake tensors hide that no row is
    # padded); a batch of one needs none, and SDPA runs causal on grouped key/value heads
    mask = {"attention_mask": torch.ones_like(ids)} if masked(run) else {}
    for step in (1, 2):
        live.watch_largest = step == 2
        live.phase = f"forward:{step}"
        with torch.autocast("cpu", dtype=sixteen or torch.float32, enabled=sixteen is not None and not run.pure_bf16):
            loss = model(input_ids=ids, labels=ids, **mask).loss
        live.phase = f"backward:{step}"
        loss.backward()
        del loss
        live.label(((f"grad of {names[id(p)]}", p.grad) for p in params), GRADIENTS)
        live.phase = f"step:{step}"
        torch.nn.utils.clip_grad_norm_(params, 1.0)  # the Trainer's max_grad_norm
        optimizer.step()
        live.label(
            (
                (f"{key} of {names[id(p)]}", v)
                for p, state in optimizer.state.items()
                for key, v in state.items()
                if isinstance(v, torch.Tensor)
            ),
            STATES,
        )
        optimizer.zero_grad(set_to_none=True)
        live.phase = "between steps"


def _largest(entries: list, n: int = 8) -> list[dict]:
    """The largest storages alive at the peak, alike ones (an op's output of one shape, a layer's
    weights of one shape) counted together."""
    groups: dict[tuple[str, str], list[int]] = {}
    for size, category, what in entries:
        if category in (WEIGHTS, GRADIENTS, STATES):
            what = _generic(what)
        groups.setdefault((category, what), []).append(size)
    rows = [
        {"what": what, "category": category, "bytes": sum(sizes), "count": len(sizes)}
        for (category, what), sizes in groups.items()
    ]
    return sorted(rows, key=lambda r: -r["bytes"])[:n]


def _generic(name: str) -> str:
    """A parameter's name with its layer number taken out: "model.layers.*.mlp.up_proj.weight"."""
    import re

    return re.sub(r"\.\d+\.", ".*.", name)


def needs() -> None:
    """A UsageError naming what --trace needs where torch, transformers or peft is missing."""
    import importlib.util

    missing = [m for m in ("torch", "transformers", "peft") if importlib.util.find_spec(m) is None]
    if missing:
        raise UsageError(
            f"--trace runs the model's own code: it needs {', '.join(missing)} in this environment "
            "(pip install 'compat[trace]', or the stack you train with)"
        )


def text(traced: Traced, counted: float, context: float, capacity: float | None) -> str:
    """The trace as `compat fit` prints it below the count: a row per phase, what the peak holds,
    the traced peak beside the count's, and the verdict on the traced peak plus the CUDA context."""
    from harness.answers.fit import GIB, _verdict

    order = (WEIGHTS, GRADIENTS, STATES, *CREATED_IN.values())
    seen = {k for p in PHASES for k, v in traced.phases[p]["by"].items() if v >= 0.005 * GIB}
    categories = [c for c in order if c in seen] + sorted(seen - set(order))
    lines = [
        "",
        f"Traced (counted by running the model's code; {traced.seconds:.1f} s): {traced.says}; "
        + ", ".join(f"{k} {v}" for k, v in traced.versions.items()),
        "",
        f"  {'phase':<16}{'peak':>10}" + "".join(f"{c:>{max(len(c), 8) + 2}}" for c in categories),
    ]
    for phase in PHASES:
        row = traced.phases[phase]
        mark = "  <- the peak" if phase == traced.peak_phase else ""
        lines.append(
            f"  {phase:<16}{row['bytes'] / GIB:>6.2f} GiB"
            + "".join(f"{row['by'].get(c, 0) / GIB:>{max(len(c), 8) - 2}.2f} GiB" for c in categories)
            + mark
        )
    lines.append("")
    lines.append("  Largest at the peak:")
    for r in traced.largest:
        times = f" x {r['count']}" if r["count"] > 1 else ""
        lines.append(f"    {r['bytes'] / GIB:7.2f} GiB  {r['category']}: {r['what']}{times}")
    need = traced.peak + context
    diff = (counted - need) / need if need else 0.0
    lines.append("")
    lines.append(
        f"  Traced peak {traced.peak / GIB:.2f} GiB in the {traced.peak_phase}"
        + (f" + {context / GIB:.2f} GiB CUDA context = {need / GIB:.2f} GiB" if context else "")
        + f"; the count above says {counted / GIB:.2f} GiB for one card ({diff:+.1%})"
        + (f": {_verdict(need, capacity)} on the card" if capacity else "")
        + "."
    )
    return "\n".join(lines) + "\n"


def scaled_down(config: dict) -> dict:
    """A config scaled down to a shape traced in a second, its family's structure kept (model_type,
    the query/key-value head ratio, biases, tied head, experts, MLA's latent ranks): what the checks
    of the count against the trace run (tests/integration/test_trace.py, bench/fit_error.py --trace)."""
    c = {k: v for k, v in config.items() if k != "vision_config"}
    ratio = max(1, c["num_attention_heads"] // c.get("num_key_value_heads", c["num_attention_heads"]))
    c.update(hidden_size=256, num_hidden_layers=3, intermediate_size=512, num_attention_heads=4, vocab_size=8192)
    c.update(num_key_value_heads=max(1, 4 // ratio), head_dim=64, pad_token_id=None)
    for key, value in (("moe_intermediate_size", 128), ("shared_expert_intermediate_size", 256)):
        if key in c:
            c[key] = value
    for key in ("num_local_experts", "num_experts", "n_routed_experts"):
        if key in c:
            c[key] = 8
    if "kv_lora_rank" in c:
        c.update(kv_lora_rank=64, qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32)
    if "first_k_dense_replace" in c:
        c["first_k_dense_replace"] = 1
    c.pop("mlp_only_layers", None)
    return c
