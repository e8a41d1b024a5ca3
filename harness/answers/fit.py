"""`compat fit`: predicted peak memory per card for fine-tuning a real model, term by term.

    peak per card = weights + gradients + optimizer states + activations + logits + overhead

Each term is counted from the model's shape (its config.json) and the run (method, precision,
quantization, strategy, cards, sequence length, batch, gradient checkpointing):

    weights      every parameter at its stored width (fp32 master weights under mixed precision,
                 as the Trainer keeps them; 4-bit NF4 at 0.5 byte plus its block constants)
    gradients    4 bytes per trainable parameter
    optimizer    AdamW: two fp32 moments, 8 bytes per trainable parameter
    activations  per layer and token, in proportion to (hidden + intermediate) width; with
                 gradient checkpointing each layer's input (its checkpoint, 4 bytes per fp32
                 element, set) and the activations of the one layer being recomputed
    logits       batch x sequence x vocabulary, in fp32 for the loss
    overhead     what a process holds besides the model: on a CPU the interpreter and libraries
                 (measured), on a GPU the CUDA context (predicted)

Strategies divide the terms between cards as the ZeRO paper states them (DDP: everything on every
card plus its gradient buckets; ZeRO-2: gradients and optimizer states divided by N; ZeRO-3 and
FSDP full shard: all three divided by N; offload: optimizer states, and with ZeRO-3 parameters, in
host memory instead).

The per-element constants (bytes kept per activation element and per logit, the multipliers on
weights and trainable state, the process baseline) are fitted by least squares on the harness's
own records of the tiny size sweeps in matrix/fit-cpu.toml: `calibrate(records)`. The quantity
fitted and predicted on a CPU is the training-phase peak RSS of each rank (the last point of the
record's memory timeline); on a GPU the prediction is torch's max allocated plus the CUDA
context: the largest phase of the training step, every term counted from what the libraries keep
(phases.py), not fitted; GPU records check it (bench/fit_error.py) and `compat fit --trace`
counts by running the model's code (trace.py).

No torch: `compat fit` answers in well under a second.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from pathlib import Path

from harness.answers import phases
from harness.catalog import strategies
from harness.catalog.gpus import precision_for
from harness.errors import UsageError

LORA_R = 8  # the workload's LoraConfig: r=8 on q_proj, k_proj, v_proj, o_proj (peft's and LLaMA-Factory's default rank)
LORA_TARGETS = ("q", "k", "v", "o")
LINEAR = ("q", "k", "v", "o", "gate", "up", "down")  # every linear layer of a decoder block
ALL_LINEAR = (*LINEAR, "q_a", "q_b", "kv_a", "kv_b")  # and MLA's: LoRA's "all" (not the routers, not lm_head)
# LoRA target modules as users name them (peft's target_modules, LLaMA-Factory's lora_target, axolotl's
# lora_target_modules) -> the names of Shape.linears; "all" is every linear layer of the blocks, not
# lm_head (LLaMA-Factory's find_all_linear_modules, peft's "all-linear"); GLM's fused projections are their own
TARGET_NAMES = {
    **{name: (name,) for name in LINEAR},
    **{f"{name}_proj": (name,) for name in LINEAR},
    "all": ALL_LINEAR,
    "all-linear": ALL_LINEAR,
    "all_linear": ALL_LINEAR,
    "attention": LORA_TARGETS,
    "mlp": ("gate", "up", "down"),
    "w1": ("gate",),
    "w3": ("up",),
    "w2": ("down",),  # Mixtral's experts
    "q_a_proj": ("q_a",),
    "q_b_proj": ("q_b",),
    "kv_a_proj_with_mqa": ("kv_a",),
    "kv_b_proj": ("kv_b",),  # DeepSeek's MLA
    "query_key_value": ("qkv",),
    "qkv_proj": ("qkv",),  # Phi-3's
    "gate_up_proj": ("gate_up",),
    "dense": ("o",),
    "dense_h_to_4h": ("gate_up",),
    "dense_4h_to_h": ("down",),
}
# modules trained and saved whole beside LoRA (peft's modules_to_save, LLaMA-Factory's additional_target)
SAVED_NAMES = {
    "embed_tokens": "embed",
    "embed": "embed",
    "wte": "embed",
    "word_embeddings": "embed",
    "lm_head": "lm_head",
    "output_layer": "lm_head",
    "norm": "norms",
}

# Optimizer states per trainable element, by the names TrainingArguments.optim (and LLaMA-Factory's and
# axolotl's `optim`) take: (full-size states, bits of each). 32-bit states have the trainable
# parameter's dtype (torch keeps them like the parameter: fp32 master weights under mixed precision,
# bf16 under pure bf16). bitsandbytes' 8-bit states are one byte each plus an fp32 absmax per block of
# 256 elements (bitsandbytes/optim/optimizer.py, Optimizer2State/1State.init_state). Paged optimizers
# hold the same bytes on the card until memory runs short, then page to host memory. torch's SGD has
# no state without momentum (TrainingArguments' "sgd" passes none). Adafactor (transformers'
# Adafactor, beta1=None): a row and a column second moment per matrix, a full one per vector
# (Shazeer & Stern 2018, arXiv 1804.04235).
OPTIMIZERS = {
    **dict.fromkeys(
        (
            "adamw",
            "adamw_torch",
            "adamw_torch_fused",
            "adamw_hf",
            "adamw_apex_fused",
            "adamw_anyprecision",
            "paged_adamw_32bit",
            "paged_adamw",
            "adam",
        ),
        (2, 32),
    ),
    **dict.fromkeys(("adamw_8bit", "adamw_bnb_8bit", "paged_adamw_8bit", "adam8bit"), (2, 8)),
    **dict.fromkeys(("lion_32bit", "paged_lion_32bit", "lion"), (1, 32)),
    **dict.fromkeys(("lion_8bit", "paged_lion_8bit"), (1, 8)),
    **dict.fromkeys(("adagrad", "rmsprop"), (1, 32)),
    "sgd": (0, 32),
    "adafactor": ("factored", 32),
}
BNB_BLOCK = 256  # elements per absmax of bitsandbytes' 8-bit optimizer states
MIB = 2**20
GIB = 2**30

# terms of the least-squares fit: name -> what it multiplies
FEATURES = ("weights", "trainable_state", "activations", "recompute", "checkpoints", "logits")
# terms whose constant is set, not fitted (bytes per unit): a checkpoint is a layer's input, one
# element per token and hidden unit, 4 bytes in fp32 (2 in 16-bit: Korthikanti et al. 2022,
# arXiv 2205.05198, "2sbh" bytes per layer with full recomputation). Fitted freely on CPU records
# it comes out near 40: the CPU peak is the largest of several phases, which a sum of terms can
# only mimic by inflating one of them, and times 32-80 layers that would dwarf every real model's
# checkpoints. The one-layer recompute term absorbs the phase effect instead; it does not grow
# with depth.
FIXED: dict[str, float] = {"checkpoints": 4.0}


def _config_first(cfg: dict, *keys, default=None):
    """The first of `keys` a config has (and is not null), else `default`."""
    for k in keys:
        if k in cfg and cfg[k] is not None:
            return cfg[k]
    return default


def _config_whole(cfg: dict, *keys, default=None) -> int | None:
    """The first of `keys` the config has, as a whole number: a JSON integer (4096.0 too),
    never true/false or text (`"hidden_size": true` is not a size of 1)."""
    key = next((k for k in keys if k in cfg and cfg[k] is not None), None)
    value = default if key is None else cfg[key]
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (isinstance(value, float) and not value.is_integer())
    ):
        raise ValueError(f"{key or keys[0]} = {json.dumps(value)[:40]} is not a whole number")
    return int(value)


@dataclasses.dataclass(frozen=True)
class Shape:
    """A decoder-only transformer, as its config.json gives it."""

    name: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    vocab: int
    tied: bool = False
    head_dim: int | None = None
    qkv_bias: bool = False  # Qwen2 and GLM-4 add biases to the q, k and v projections
    # mixture of experts: routed experts (0: a dense model), how many a token uses, each expert's
    # width, the always-used shared experts' width, how many layers keep a dense MLP, and whether a
    # gate scales the shared experts (Qwen's shared_expert_gate)
    experts: int = 0
    experts_active: int = 0
    moe_intermediate: int = 0
    shared_intermediate: int = 0
    dense_layers: int = 0
    shared_gate: bool = False
    # DeepSeek's multi-head latent attention: (kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim,
    # v_head_dim, q_lora_rank or 0); empty for grouped-query attention
    mla: tuple[int, ...] = ()
    vision: int = 0  # a vision tower's parameters (Qwen2-VL's vision_config), frozen as recipes keep it
    family: str = ""  # config.json's model_type: what its layers keep beyond a Llama block's (phases.py)

    @property
    def hd(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def sparse_layers(self) -> int:
        return self.layers - self.dense_layers if self.experts else 0

    @property
    def active_intermediate(self) -> float:
        """The MLP width a token passes through, averaged over the layers: the dense MLP's, or the
        experts it is routed to and the shared experts'."""
        sparse = self.sparse_layers
        return (
            (self.layers - sparse) * self.intermediate
            + sparse * (self.experts_active * self.moe_intermediate + self.shared_intermediate)
        ) / self.layers

    def linears(self) -> list[tuple[str, int, int, int]]:
        """Every linear layer of the blocks as (name, in, out, how many): attention (q, k, v, o; or
        MLA's q / q_a + q_b, kv_a, kv_b, o), the dense MLPs, each routed and shared expert's gate,
        up and down, and the routers."""
        h, n, L = self.hidden, self.heads, self.layers
        if self.mla:
            kv_rank, nope, rope, v, q_rank = self.mla
            q = (
                [("q_a", h, q_rank, L), ("q_b", q_rank, n * (nope + rope), L)]
                if q_rank
                else [("q", h, n * (nope + rope), L)]
            )
            attention = q + [("kv_a", h, kv_rank + rope, L), ("kv_b", kv_rank, n * (nope + v), L), ("o", n * v, h, L)]
        else:
            d_q, d_kv = n * self.hd, self.kv_heads * self.hd
            attention = [("q", h, d_q, L), ("k", h, d_kv, L), ("v", h, d_kv, L), ("o", d_q, h, L)]
        out = attention
        for width, count in (
            (self.intermediate, L - self.sparse_layers),
            (self.moe_intermediate, self.sparse_layers * self.experts),
            (self.shared_intermediate, self.sparse_layers),
        ):
            if width and count:
                out += [("gate", h, width, count), ("up", h, width, count), ("down", width, h, count)]
        if self.sparse_layers:
            out.append(("router", h, self.experts + (1 if self.shared_gate else 0), self.sparse_layers))
        return out

    @classmethod
    def from_config(cls, cfg: dict, name: str = "config") -> "Shape":
        """HF config.json keys (Llama, Mistral, Qwen2, Gemma...) or GLM-4's own (ChatGLM: num_layers,
        ffn_hidden_size, multi_query_group_num, padded_vocab_size, kv_channels)."""
        first, whole = functools.partial(_config_first, cfg), functools.partial(_config_whole, cfg)
        try:
            hidden = whole("hidden_size", "n_embd", "d_model")
            heads = whole("num_attention_heads", "n_head")
            kv = whole("num_key_value_heads")
            if kv is None and cfg.get("multi_query_attention"):
                kv = whole("multi_query_group_num")
            shape = cls(
                name=name,
                hidden=hidden,
                intermediate=whole(
                    "intermediate_size",
                    "ffn_hidden_size",
                    "n_inner",
                    default=4 * hidden if isinstance(hidden, int) else None,
                ),
                layers=whole("num_hidden_layers", "num_layers", "n_layer"),
                heads=heads,
                kv_heads=kv if kv is not None else heads,
                vocab=whole("vocab_size", "padded_vocab_size"),
                tied=bool(first("tie_word_embeddings", default=False)),
                head_dim=whole("head_dim", "kv_channels"),
                qkv_bias=bool(first("attention_bias", "add_qkv_bias", default=cfg.get("model_type") == "qwen2")),
                **_moe_fields(cfg, whole),
                vision=_vision_params(cfg.get("vision_config")),
                family=cfg.get("model_type") if isinstance(cfg.get("model_type"), str) else "",
            )
        except (TypeError, ValueError) as exc:
            raise UsageError(
                f"{name}: not a decoder config compat can read ({exc}); it needs hidden_size, "
                "num_attention_heads, num_hidden_layers and vocab_size"
            ) from None
        sizes = (shape.hidden, shape.heads, shape.kv_heads, shape.layers, shape.vocab, shape.intermediate)
        if None in sizes:
            raise UsageError(
                f"{name}: not a decoder config compat can read; it needs hidden_size, "
                "num_attention_heads, num_hidden_layers and vocab_size"
            )
        if min(sizes) < 1 or (shape.head_dim is not None and shape.head_dim < 1):
            raise UsageError(f"{name}: sizes must be positive")
        return shape

    def params(self) -> dict[str, int]:
        linear = sum(i * o * k for _, i, o, k in self.linears())
        bias = self.layers * (self.heads + 2 * self.kv_heads) * self.hd if self.qkv_bias else 0
        latent = self.layers * (self.mla[0] + self.mla[4]) if self.mla else 0  # MLA's kv_a (and q_a) norms
        # small, unquantized: counted with the norms
        norms = self.layers * 2 * self.hidden + self.hidden + bias + latent
        embed = self.vocab * self.hidden
        head = 0 if self.tied else self.vocab * self.hidden
        return {
            "linear": linear,
            "norms": norms,
            "embed": embed,
            "lm_head": head,
            "vision": self.vision,
            "total": linear + norms + embed + head + self.vision,
        }

    @property
    def fused(self) -> bool:
        """Whether q, k and v are one linear layer, and gate and up another (Phi-3's qkv_proj and
        gate_up_proj): LoRA on any of them adapts the fused layer."""
        return self.family == "phi3"

    def targeted(self, targets: tuple[str, ...]) -> list[tuple[str, int, int, int]]:
        """The linear layers LoRA targets name (linears' names; and GLM's fused query_key_value and
        dense_h_to_4h, "qkv" and "gate_up", as one layer each over the dense blocks; Phi-3's q, k and
        v are its qkv_proj, its gate and up its gate_up_proj)."""
        if self.fused:
            targets = tuple(
                ("qkv" if t in ("q", "k", "v") else "gate_up" if t in ("gate", "up") else t) for t in targets
            )
        out = [lin for lin in self.linears() if lin[0] in targets]
        dense, d_q, d_kv = self.layers - self.sparse_layers, self.heads * self.hd, self.kv_heads * self.hd
        if "qkv" in targets and not self.mla:
            out.append(("qkv", self.hidden, d_q + 2 * d_kv, self.layers))
        if "gate_up" in targets and dense:
            out.append(("gate_up", self.hidden, 2 * self.intermediate, dense))
        return out

    def lora_params(self, r: int = LORA_R, targets: tuple[str, ...] = LORA_TARGETS) -> int:
        """LoRA's A (r x in) and B (out x r) on each target layer of every block (every expert's)."""
        return sum(r * (i + o) * k for _, i, o, k in self.targeted(targets))

    def saved_params(self, modules: tuple[str, ...]) -> int:
        """Elements of the modules trained whole beside LoRA (embed, lm_head, norms)."""
        p = self.params()
        head = self.vocab * self.hidden  # a tied head saved on its own is a copy of its own
        return sum({"embed": p["embed"], "lm_head": head, "norms": p["norms"]}[m] for m in modules)


def _vision_params(vision) -> int:
    """Qwen2-VL's vision tower (transformers' Qwen2VisionTransformerPretrainedModel): a Conv3d patch
    embedding without bias; `depth` blocks of two LayerNorms, a qkv and an output projection and an
    MLP of embed_dim x mlp_ratio, all with biases; the patch merger's LayerNorm and two linear layers
    from embed_dim x spatial_merge_size^2 to the language model's hidden_size. 0 for a config without
    those keys (other towers are not counted)."""
    keys = ("depth", "embed_dim", "mlp_ratio", "hidden_size", "patch_size", "spatial_merge_size", "temporal_patch_size")
    if not isinstance(vision, dict) or not all(
        isinstance(vision.get(k), (int, float)) and not isinstance(vision.get(k), bool) and vision.get(k) > 0
        for k in keys
    ):
        return 0
    e, depth, out = int(vision["embed_dim"]), int(vision["depth"]), int(vision["hidden_size"])
    mlp = int(e * vision["mlp_ratio"])
    channels = int(vision.get("in_chans", vision.get("in_channels", 3)) or 3)
    patch = channels * int(vision["temporal_patch_size"]) * int(vision["patch_size"]) ** 2 * e
    block = 4 * e + (3 * e * e + 3 * e) + (e * e + e) + (2 * e * mlp + mlp + e)
    merged = e * int(vision["spatial_merge_size"]) ** 2
    merger = 2 * e + (merged * merged + merged) + (merged * out + out)
    return patch + depth * block + merger


def _moe_fields(cfg: dict, whole) -> dict:
    """Shape's mixture-of-experts and MLA fields from config.json's keys: Mixtral's
    num_local_experts, Qwen2-MoE's and Qwen3-MoE's num_experts, moe_intermediate_size,
    shared_expert_intermediate_size, decoder_sparse_step and mlp_only_layers, DeepSeek's
    n_routed_experts, n_shared_experts, first_k_dense_replace, kv_lora_rank and its head widths."""
    experts = whole("num_local_experts", "num_experts", "n_routed_experts", default=0)
    layers = whole("num_hidden_layers", "num_layers", "n_layer")
    out: dict = {}
    if experts:
        moe = whole("moe_intermediate_size", default=whole("intermediate_size"))
        shared = whole("shared_expert_intermediate_size", default=0) or whole("n_shared_experts", default=0) * moe
        # layer i is sparse when (i + 1) % step == 0, i >= first_k_dense_replace and i is not in mlp_only_layers;
        # counted without walking the layers (a config may claim any number of them)
        step = max(1, whole("decoder_sparse_step", default=1) or 1)
        first = max(0, whole("first_k_dense_replace", default=0))
        dense_only = (
            {i for i in cfg.get("mlp_only_layers") or () if isinstance(i, int)}
            if isinstance(cfg.get("mlp_only_layers"), list)
            else set()
        )
        sparse = max(0, layers // step - -(-(first + 1) // step) + 1)
        sparse -= len({i for i in dense_only if first <= i < layers and (i + 1) % step == 0})
        out.update(
            experts=experts,
            experts_active=whole("num_experts_per_tok", default=1),
            moe_intermediate=moe,
            shared_intermediate=shared,
            dense_layers=layers - sparse,
            shared_gate="shared_expert_intermediate_size" in cfg,
        )
    if cfg.get("kv_lora_rank"):
        out["mla"] = (
            whole("kv_lora_rank"),
            whole("qk_nope_head_dim"),
            whole("qk_rope_head_dim"),
            whole("v_head_dim"),
            whole("q_lora_rank", default=0) or 0,
        )
    return out


@dataclasses.dataclass(frozen=True)
class Run:
    method: str = "lora"  # full | lora | qlora
    precision: str = "bf16"  # fp32 | bf16 | fp16
    quantization: str = "none"  # none | nf4 | nf4dq | fp4 | fp4dq | int8
    strategy: str = dataclasses.field(default_factory=lambda: strategies.one_process().name)
    cards: int = 1
    seq_len: int = 2048
    batch: int = 1
    grad_ckpt: bool = False
    lora_base_16bit: bool = True  # a LoRA base loaded in the 16-bit compute dtype, as recipes do
    lora_r: int = LORA_R
    lora_targets: tuple[str, ...] = LORA_TARGETS  # names of Shape.linears (and "qkv", "gate_up": Shape.targeted)
    modules_to_save: tuple[str, ...] = ()  # "embed", "lm_head", "norms": trained whole beside LoRA
    optimizer: str = "adamw"  # a name of OPTIMIZERS
    pure_bf16: bool = False  # weights, gradients and optimizer states in bf16, no fp32 master copy
    optimizer_in_backward: bool = False  # each parameter stepped and its gradient freed during backward
    grad_accum: int = 1  # micro-batches per optimizer step: accumulates into the same gradients
    load: str = "auto"  # how each process loads the model before training: LOADS, or the strategy's default
    offload: str = "auto"  # what lives in host memory: OFFLOADS, or the strategy's own (zero3_offload: both)
    path: str = "compat"  # the training code: compat's workload (HF Trainer + peft), or phases.PATHS
    lengths: str = "variable"  # batches padded to their own longest row ("variable"), or one length ("fixed")
    bitsandbytes: str = ""  # its version where known: before 0.43.2 a 4-bit layer keeps its input (phases.py)


# What a run keeps in host memory instead of on the card (Run.offload): DeepSpeed's offload_optimizer
# (ZeRO-Offload: the optimizer states and the fp32 gradients, the step on the CPU; ZeRO-2 or 3),
# offload_param (ZeRO-3's parameters) or both; FSDP's CPUOffload(offload_params=True) moves the
# parameters and gradients, and so the optimizer step and its states, together ("both")
OFFLOADS = ("none", "optimizer", "params", "both")


def offload_of(model, run: "Run") -> str:
    """The offload a run has under strategy `model`, or a UsageError naming what it cannot do."""
    if run.offload == "auto":
        return "both" if model.offload else "none"
    if run.offload == "none":
        return "none"
    if not (model.deepspeed or model.fsdp_version):
        raise UsageError(
            f"--offload {run.offload}: {model.name} keeps everything on the card; offload is ZeRO's or FSDP's"
        )
    if model.deepspeed and model.zero_stage < 3 and run.offload != "optimizer":
        raise UsageError(
            f"--offload {run.offload}: ZeRO-{model.zero_stage} offloads the optimizer only (offload_param needs ZeRO-3)"
        )
    if model.fsdp_version and run.offload != "both":
        raise UsageError(
            f"--offload {run.offload}: FSDP offloads parameters, gradients and optimizer state together "
            "(CPUOffload(offload_params=True)): --offload both"
        )
    return run.offload


# How each process loads the model before it trains (the load-time peak):
#   whole    every process materialises the whole model in host memory, then its strategy places it on
#            the card: DDP and ZeRO-2 whole, ZeRO-3 and FSDP shard by shard as they wrap it. FSDP does this
#            unless fsdp_config's cpu_ram_efficient_loading is on (the Trainer's default is off:
#            transformers' training_args.py); ZeRO-3 when from_pretrained runs outside zero.Init
#   sharded  ZeRO-3 under deepspeed.zero.Init, which transformers' from_pretrained enters when the
#            Trainer's ZeRO-3 config exists first (modeling_utils.py, is_deepspeed_zero3_enabled): each
#            process materialises its shard; FSDP with cpu_ram_efficient_loading: rank 0 loads the whole
#            model in host memory, the others on the meta device, and sync_module_states broadcasts it
#   on-card  every process loads the whole model onto its own card first (device_map to the rank's card,
#            or .to(device) before wrapping), so a sharded run needs the whole model on each card at load
LOADS = ("whole", "sharded", "on-card")


def default_load(strategy: str) -> str:
    """The load of a run that does not say: ZeRO-3's from_pretrained under zero.Init, else whole."""
    model = strategies.get(strategy)
    return "sharded" if model.deepspeed and model.zero_stage == 3 else "whole"


def _module_names(names) -> list[str]:
    """Module names as users write them: "q_proj,v_proj" or ["q_proj", "v_proj"]; UsageError for
    anything else (a number, a mapping: a config's field as no tool writes it)."""
    if not isinstance(names, (str, list, tuple)):
        raise UsageError(f"{names!r} is not module names: give them as text (q_proj,v_proj) or a list")
    return [str(n).strip() for n in (names.split(",") if isinstance(names, str) else names) if str(n).strip()]


def lora_targets(names) -> tuple[str, ...]:
    """Target modules as users write them ("all", "q_proj,v_proj", ["q_proj", "v_proj"]) -> layers."""
    items = _module_names(names)
    unknown = [n for n in items if n.lower() not in TARGET_NAMES]
    if unknown or not items:
        raise UsageError(
            f"LoRA target {', '.join(map(repr, unknown)) or repr(names)}: compat fit counts "
            f"{', '.join(sorted(TARGET_NAMES))}"
        )
    return tuple(dict.fromkeys(layer for n in items for layer in TARGET_NAMES[n.lower()]))


def saved_modules(names) -> tuple[str, ...]:
    items = _module_names(names)
    unknown = [n for n in items if n.lower() not in SAVED_NAMES]
    if unknown:
        raise UsageError(
            f"modules to save {', '.join(map(repr, unknown))}: compat fit counts {', '.join(sorted(SAVED_NAMES))}"
        )
    return tuple(dict.fromkeys(SAVED_NAMES[n.lower()] for n in items))


def optimizer_name(name: str) -> str:
    key = str(name).strip().lower()
    if key not in OPTIMIZERS:
        from harness.tomldata import did_you_mean

        raise UsageError(
            f"optimizer {name!r}{did_you_mean(key, list(OPTIMIZERS))}: compat fit counts {', '.join(OPTIMIZERS)}"
        )
    return key


@dataclasses.dataclass
class Calibration:
    """Fitted constants, and the records they came from."""

    coefficients: dict[str, float]  # FEATURES -> bytes per unit
    baseline: dict[str, float]  # stack -> bytes the process holds before the model (CPU RSS)
    records: list[str]
    quantity: str = "cpu training-phase peak RSS per rank"
    device: str = "cpu"  # "gpu" when fitted on CUDA records
    analytic: bool = False  # a GPU's: every term counted per phase (phases.py), nothing fitted

    def baseline_for(self, stack: str | None) -> float:
        if stack in self.baseline:
            return self.baseline[stack]
        return sum(self.baseline.values()) / len(self.baseline) if self.baseline else 0.0


# ---------------------------------------------------------------------------------------------
# features of one run: the quantities the fitted constants multiply


def quant_bytes_per_param(quantization: str) -> float:
    """Stored bytes per quantized linear weight: NF4/FP4 at 4 bits plus one fp32 absmax per block
    of 64 (0.5 bit per parameter), or 0.127 bit with double quantization (QLoRA paper, 2305.14314);
    LLM.int8 at 1 byte (its per-row scales are a few bytes per row: left out)."""
    return {
        "nf4": 0.5 + 0.5 / 8,
        "fp4": 0.5 + 0.5 / 8,
        "nf4dq": 0.5 + 0.127 / 8,
        "fp4dq": 0.5 + 0.127 / 8,
        "int8": 1.0 + 0.0,
    }.get(quantization, 4.0)


def trainable_tensors(shape: Shape, run: Run) -> list[tuple[int, int, int]]:
    """The trainable tensors of a run as (rows, columns, how many): every weight of the model for a
    full fine-tune; else LoRA's A and B on each target layer of every block, and the modules saved
    whole beside them. Vectors have one column."""
    p = shape.params()
    if run.method == "full":
        out = [(o, i, k) for _, i, o, k in shape.linears()]
        out.append((p["norms"], 1, 1))  # the norms and biases, as one vector: each is a vector
        out += [(shape.vocab, shape.hidden, 1 if shape.tied else 2)]  # embeddings, and an untied head
        return out
    out = [t for _, i, o, k in shape.targeted(run.lora_targets) for t in ((run.lora_r, i, k), (o, run.lora_r, k))]
    for module in run.modules_to_save:
        out.append((p["norms"], 1, 1) if module == "norms" else (shape.vocab, shape.hidden, 1))
    return out


def saved_width(run: Run) -> float:
    """Bytes per element of a module trained whole beside LoRA (peft's modules_to_save): peft's
    ModulesToSaveWrapper deep-copies the module as loaded, and neither peft's autocast_adapter_dtype
    (adapters only) nor the Trainer's mixed precision casts it, so a bf16 base trains a bf16 copy,
    with bf16 gradients and optimizer states (traced: tests/integration/test_trace.py)."""
    if run.pure_bf16:
        return 2.0
    sixteen = run.precision in ("bf16", "fp16")
    return 2.0 if (run.method == "lora" and run.lora_base_16bit and sixteen) else 4.0


def _tensor_widths(shape: Shape, run: Run) -> list[tuple[int, int, int, float]]:
    """trainable_tensors with each one's bytes per element: the trainable dtype (fp32 master weights
    under mixed precision, bf16 under pure bf16; LoRA's adapters likewise, peft keeping them in fp32),
    a module saved whole in its loaded dtype (saved_width)."""
    tensors = trainable_tensors(shape, run)
    width = 2.0 if run.pure_bf16 else 4.0
    saved = len(run.modules_to_save) if run.method != "full" else 0
    return [(r, c, k, saved_width(run) if i >= len(tensors) - saved else width) for i, (r, c, k) in enumerate(tensors)]


def state_bytes(shape: Shape, run: Run) -> tuple[float, float]:
    """Bytes of (gradients, optimizer states) of the trainable tensors, each in its dtype
    (_tensor_widths): one gradient per element, or, with the optimizer stepping each parameter
    during backward, the largest tensor's only; the optimizer's states as OPTIMIZERS counts them."""
    tensors = _tensor_widths(shape, run)
    grads = (
        max(r * c * w for r, c, _, w in tensors)
        if run.optimizer_in_backward
        else float(sum(r * c * k * w for r, c, k, w in tensors))
    )
    states, bits = OPTIMIZERS[run.optimizer]
    if states == "factored":
        optim = float(sum((r + c if r > 1 and c > 1 else r * c) * k * w for r, c, k, w in tensors))
    elif bits == 8:
        optim = states * float(sum(r * c * k for r, c, k, _ in tensors)) * (1 + 4 / BNB_BLOCK)
    else:
        optim = states * float(sum(r * c * k * w for r, c, k, w in tensors))
    return grads, optim


def features(shape: Shape, run: Run) -> dict[str, float]:
    """The quantities the CPU calibration's constants multiply, and the bytes of weights, gradients
    and optimizer states a GPU's phase count (phases.py) starts from."""
    p = shape.params()
    method = run.method
    quantized = run.quantization != "none" or method == "qlora"
    quant = run.quantization if run.quantization != "none" else "nf4"
    half = 2 if run.precision in ("bf16", "fp16") else 4
    if quantized:
        # k-bit linear weights; embeddings, head and norms as the path keeps them: in fp32 after peft's
        # prepare_model_for_kbit_training (compat's workload), else in the compute dtype (phases.qlora_upcast)
        rest = 4 if phases.qlora_upcast(run) else half
        weights = p["linear"] * quant_bytes_per_param(quant) + (p["total"] - p["linear"]) * rest
    elif method == "full":
        # fp32 master weights: the Trainer's mixed precision keeps them; pure bf16 keeps none
        weights = p["total"] * (2.0 if run.pure_bf16 else 4.0)
    else:
        # a frozen base is loaded in the compute dtype (torch_dtype), as LoRA recipes do; a cell
        # whose base stays fp32 (base_dtype "float32", the workload's default) says so
        weights = p["total"] * (half if run.lora_base_16bit else 4)
    if method != "full" and run.modules_to_save:
        # peft keeps the frozen module and a trainable copy of it, in its loaded dtype (saved_width)
        weights += shape.saved_params(run.modules_to_save) * saved_width(run)
    trainable = float(sum(r * c * k for r, c, k in trainable_tensors(shape, run)))
    grads, optim = state_bytes(shape, run)
    tokens = run.batch * run.seq_len
    act_scale = 0.5 if run.precision in ("bf16", "fp16") else 1.0  # 16-bit activations under autocast
    per_layer = tokens * (shape.hidden + shape.active_intermediate) * act_scale  # a MoE token: its experts' widths
    return {
        "weights": weights,  # bytes as stored: the fitted multiplier is ~1 where nothing else scales with them
        "trainable_state": grads
        + optim,  # AdamW under mixed precision: an fp32 gradient and two fp32 moments, 12 bytes
        # every layer's activations, kept for the backward pass...
        "activations": 0.0 if run.grad_ckpt else per_layer * shape.layers,
        # ...or, with gradient checkpointing, those of the one layer being recomputed
        "recompute": per_layer if run.grad_ckpt else 0.0,
        # and each layer's input, kept as its checkpoint
        "checkpoints": tokens * shape.layers * shape.hidden * act_scale if run.grad_ckpt else 0.0,
        "logits": float(tokens * shape.vocab),
        "_weights_bytes": weights,
        "_trainable": trainable,
        "_grads": grads,
        "_optim": optim,
        "_params": float(p["total"]),
    }


# ---------------------------------------------------------------------------------------------
# calibration on records


def measured_peak(rec: dict) -> list[float]:
    """Per rank, the training-phase peak: on a CPU the RSS sampled while the Trainer trained
    (`train_peak_rss_bytes`; building, saving and reloading the model hold copies of their own and
    are not training); on a GPU torch's max allocated over training (`train_max_allocated_bytes`,
    its peaks reset right before it). Records made before the workload measured it have none and
    are not used."""
    gpu = (rec.get("axes") or {}).get("hardware", "cpu") != "cpu"
    out = []
    for m in rec.get("memory") or []:
        peak = m.get("train_max_allocated_bytes" if gpu else "train_peak_rss_bytes")
        if isinstance(peak, (int, float)) and peak > 0:
            out.append(float(peak))
    return out


def shape_of_record(rec: dict) -> Shape:
    """The model a record trained, from its settings.model: matrix/models.toml's keys, the config
    keys a model sets beyond them (its `config` table: tie_word_embeddings, attention_bias, ...) and
    its family as the model_type (a Qwen2's q/k/v biases). Read without the `config` table, the tied
    Qwen2-0.5B shape counted its 136 M-parameter head a second time (630 M parameters, not 494 M)."""
    model = (rec.get("settings") or {}).get("model") or {}
    if not isinstance(model, dict):
        return Shape.from_config({}, name=rec["cell"])
    extra = model.get("config") if isinstance(model.get("config"), dict) else {}
    cfg = {**extra, **{k: v for k, v in model.items() if k != "config"}}
    if isinstance(model.get("family"), str):
        cfg.setdefault("model_type", model["family"])
    return Shape.from_config(cfg, name=rec["cell"])


def _shaped(rec: dict) -> bool:
    """Whether a record carries the model config it trained (settings.model): one without it
    (from a compat that did not write it, or sent without it) cannot calibrate anything and is
    left out, never a reason for `compat fit` to stop."""
    try:
        shape_of_record(rec)
    except UsageError:
        return False
    return True


def run_of_record(rec: dict) -> Run:
    axes = rec["axes"]
    train = (rec.get("settings") or {}).get("train") or {}
    method = "qlora" if axes.get("quantization", "none") != "none" else axes["method"]
    return Run(
        method=method,
        precision=axes["precision"],
        quantization=axes.get("quantization", "none"),
        strategy=strategies.modelled_as(axes["strategy"]),
        cards=int(axes.get("ranks", 1)),
        seq_len=int(train.get("seq_len_max", 64)),
        batch=int(train.get("batch_size", 4)),
        grad_ckpt=bool(axes.get("grad_ckpt")),
        lora_base_16bit=train.get("base_dtype", "float32") == "compute",
    )


def sweep_records(records: list[dict], models: set[str] | None = None, device: str = "cpu") -> list[dict]:
    """Passing single-process records of the fit_* size sweeps (or of `models`), on a CPU
    (`device` "cpu": matrix/fit-cpu.toml) or on a GPU of any architecture ("gpu": fit-gpu.toml)."""
    out = []
    for r in records:
        axes = r.get("axes") or {}
        model = axes.get("model", "default")
        on_gpu = str(axes.get("hardware", "")).startswith("sm_")
        if (
            r.get("outcome") != "pass"
            or on_gpu != (device == "gpu")
            or axes.get("strategy") != strategies.one_process().name
        ):
            continue
        if (models is not None and model not in models) or (models is None and not model.startswith("fit_")):
            continue
        if axes.get("quantization", "none") != "none" or not measured_peak(r) or not _shaped(r):
            continue
        if not on_gpu and (r.get("runner") or {}).get("warm"):
            # a fork of a warm worker shares the worker's pages: its RSS is not a process's own
            # (50-65 MB under a cold one's on the same cells here, 2026-11-26)
            continue
        out.append(r)
    return out


# A GPU rank's training-phase max allocated from which its peak measures the model rather than the
# libraries: below it the peak is mostly the workspaces cuBLAS and its kin keep in torch's allocator
# (the H200's test-model cells allocate 65-68 MiB whatever their precision, 2026-11-26), which the
# count leaves out and which leave the allocator little slack.
REAL_SIZE_BYTES = 2**30


def gpu_check_records(records: list[dict], fitted: set[str]) -> list[dict]:
    """The check of compat fit's GPU predictions: passing one-process GPU records at a real size
    (REAL_SIZE_BYTES allocated in training or more), 16/32-bit weights, of models the GPU constants
    were not fitted on (not in `fitted`); a cell run again counts once, as its newest record."""
    from harness.evidence.summary import latest

    out = []
    for r in records:
        axes = r.get("axes") or {}
        if (
            r.get("outcome") != "pass"
            or not str(axes.get("hardware", "")).startswith("sm_")
            or axes.get("strategy") != strategies.one_process().name
            or axes.get("quantization", "none") != "none"
            or axes.get("model", "default") in fitted
            or not _shaped(r)
        ):
            continue
        peaks = measured_peak(r)
        if peaks and peaks[0] >= REAL_SIZE_BYTES:
            out.append(r)
    return latest(out)


def counted_on_gpu() -> Calibration:
    """A GPU's constants before any CUDA record fits them: every term counted, not fitted (bytes as
    stored, and phases.py's rules for the rest), so each constant is 1 (a checkpoint is FIXED's 4 per
    element x 0.5 in 16 bits). The CPU fit is not used: its constants absorb the CPU's phases (they
    over-predict a GPU's activations by 1.4-1.75x, issue 22)."""
    return Calibration(
        coefficients={k: FIXED.get(k, 1.0) for k in FEATURES},
        baseline={},
        records=[],
        quantity="counted per term and phase, not fitted",
        device="gpu",
        analytic=True,
    )


def calibrate(records: list[dict]) -> Calibration:
    """Least squares, non-negative by elimination: peak = baseline[stack] + sum(c_f * feature_f)."""
    if not records:
        raise UsageError("no calibration records: run `compat run --matrix matrix/fit-cpu.toml` first")
    stacks = sorted({r["axes"]["stack"] for r in records})
    fitted = [k for k in FEATURES if k not in FIXED]
    rows, ys = [], []
    for r in records:
        f = features(shape_of_record(r), run_of_record(r))
        rows.append([1.0 if r["axes"]["stack"] == s else 0.0 for s in stacks] + [f[k] for k in fitted])
        ys.append(measured_peak(r)[0] - sum(c * f[k] for k, c in FIXED.items()))
    names = [f"baseline:{s}" for s in stacks] + fitted
    active = list(range(len(names)))
    while True:
        beta = _lstsq([[row[j] for j in active] for row in rows], ys)
        negative = [active[i] for i, b in enumerate(beta) if b < 0 and names[active[i]] in FEATURES]
        if not negative:
            break
        active = [j for j in active if j not in negative]
    solved = dict.fromkeys(names, 0.0)
    solved.update({names[j]: b for j, b in zip(active, beta)})
    solved.update(FIXED)
    archs = sorted({r["axes"]["hardware"] for r in records} - {"cpu"})
    return Calibration(
        coefficients={k: solved[k] for k in FEATURES},
        baseline={s: solved[f"baseline:{s}"] for s in stacks},
        records=sorted(r["id"] for r in records),
        quantity=f"CUDA training-phase max allocated per rank, on {', '.join(archs)}"
        if archs
        else Calibration.quantity,
        device="gpu" if archs else "cpu",
    )


def _lstsq(x: list[list[float]], y: list[float]) -> list[float]:
    """Ordinary least squares through the normal equations, with each column scaled to unit
    norm first (the features span bytes to billions); Gaussian elimination with pivoting."""
    n = len(x[0])
    scale = [math.sqrt(sum(row[j] ** 2 for row in x)) or 1.0 for j in range(n)]
    xs = [[row[j] / scale[j] for j in range(n)] for row in x]
    a = [[sum(r[i] * r[j] for r in xs) for j in range(n)] + [sum(r[i] * yy for r, yy in zip(xs, y))] for i in range(n)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda i: abs(a[i][col]))
        if abs(a[pivot][col]) < 1e-12:
            raise UsageError(
                "calibration records do not separate the memory terms (a singular fit): run the whole "
                "matrix/fit-cpu.toml"
            )
        a[col], a[pivot] = a[pivot], a[col]
        for i in range(n):
            if i != col:
                factor = a[i][col] / a[col][col]
                a[i] = [u - factor * v for u, v in zip(a[i], a[col])]
    return [a[i][n] / a[i][i] / scale[i] for i in range(n)]


def predict_record(cal: Calibration, rec: dict) -> float:
    """A record's training-phase peak as compat fit predicts it: on a GPU the largest phase of the
    step (torch's allocated memory: no CUDA context), on a CPU the fitted sum of the terms."""
    if cal.analytic:
        return predict(shape_of_record(rec), run_of_record(rec), cal, None, 0.0).total
    f = features(shape_of_record(rec), run_of_record(rec))
    return cal.baseline_for(rec["axes"]["stack"]) + sum(cal.coefficients[k] * f[k] for k in FEATURES)


def strategy_records(records: list[dict], models: set[str] | None = None) -> list[dict]:
    """Passing multi-rank CPU records of the size-sweep models (or of `models`): the check of the
    strategy terms."""
    from harness.evidence.summary import latest  # a cell run again counts once: its newest record

    def wanted(model):
        return model in models if models is not None else str(model).startswith("fit_")

    return latest(
        [
            r
            for r in records
            if r.get("outcome") == "pass"
            and (r.get("axes") or {}).get("hardware") == "cpu"
            and wanted(r["axes"].get("model"))
            and r["axes"].get("ranks", 1) > 1
            and measured_peak(r)
            and _shaped(r)
        ]
    )


def strategy_error_table(cal: Calibration, records: list[dict]) -> list[dict]:
    """Each rank's measured training peak against `predict` for its strategy, the process
    baseline standing in for the CUDA context (the prediction is per rank, so the largest rank)."""
    return [
        _error_row(
            cal,
            r,
            max(measured_peak(r)),
            predict(shape_of_record(r), run_of_record(r), cal, None, cal.baseline_for(r["axes"]["stack"])).total,
        )
        for r in records
    ]


def error_table(cal: Calibration, records: list[dict]) -> list[dict]:
    return [_error_row(cal, r, measured_peak(r)[0], predict_record(cal, r)) for r in records]


def error_bands(rows: list[dict]) -> dict[tuple[str, str], dict]:
    """Per (strategy as compat fit models it, method): how many records, and the median and P90 of
    |predicted - measured| / measured over them (P90 by nearest rank: the value 90% of the errors
    are at most). `rows` are error_table / strategy_error_table rows."""
    groups: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        groups.setdefault((strategies.modelled_as(r["strategy"]), r["method"]), []).append(abs(r["error"]))
    out = {}
    for key, errors in sorted(groups.items()):
        errors.sort()
        n = len(errors)
        median = errors[n // 2] if n % 2 else (errors[n // 2 - 1] + errors[n // 2]) / 2
        out[key] = {"records": n, "median": median, "p90": errors[max(0, math.ceil(0.9 * n) - 1)]}
    return out


def _error_row(cal: Calibration, rec: dict, measured: float, predicted: float) -> dict:
    base = cal.baseline_for(rec["axes"]["stack"])
    return {
        "cell": rec["cell"],
        "id": rec["id"],
        "measured": measured,
        "predicted": predicted,
        "strategy": rec["axes"]["strategy"],
        "method": rec["axes"]["method"],
        "error": (predicted - measured) / measured,
        # the model-dependent part: what the fit must get right beyond the process baseline
        "error_above_baseline": (predicted - measured) / max(1.0, measured - base),
    }


def load_json_config(path: Path) -> dict:
    from harness.tomldata import NotAFile, read_regular

    try:
        return json.loads(read_regular(path).decode("utf-8"))
    except NotAFile as exc:
        raise UsageError(f"{path}: {exc}") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read: {exc.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise UsageError(f"{path}: not a JSON config.json ({type(exc).__name__}: {str(exc)[:200]})") from None


# ---------------------------------------------------------------------------------------------
# prediction for a real model on a named card

# what each strategy divides over the cards, offloads or adds is in harness/catalog/strategies.py


@dataclasses.dataclass
class Prediction:
    strategy: str
    cards: int
    terms: dict[str, float]  # bytes per card
    host: dict[str, float]  # bytes moved to host memory (per card's process)
    total: float
    capacity: float | None
    verdict: str  # "fits" | "tight" | "does not fit" | "n/a"
    why: str
    limit: str = "card"  # what the verdict is about: the card, or the host memory that offload or loading fills
    phase: str = "training step"  # what sets the per-card peak: loading, or a phase of the step (phases.py)
    load: dict = dataclasses.field(default_factory=dict)  # load_phase
    phases: dict = dataclasses.field(default_factory=dict)  # on a GPU: each phase's bytes per card
    band: float = 0.0  # the prediction's error band the verdict allows for (verdict_band)

    def as_json(self) -> dict:
        return {
            "strategy": self.strategy,
            "cards": self.cards,
            "per_card_bytes": {k: round(v) for k, v in self.terms.items()},
            "per_card_total_bytes": round(self.total),
            "host_bytes": {k: round(v) for k, v in self.host.items()},
            "host_bytes_all_processes": round(sum(self.host.values()) * self.cards),
            "card_bytes": self.capacity,
            "verdict": self.verdict,
            "verdict_limit": self.limit,
            "peak_phase": self.phase,
            "phases_bytes": {k: round(v) for k, v in self.phases.items()},
            "verdict_band": self.band,
            "load": {k: (round(v) if isinstance(v, float) else v) for k, v in self.load.items()},
            "why": self.why,
        }


MARGIN = 0.10  # "fits" leaves a tenth of the card free: allocator fragmentation, longer batches


def predict(
    shape: Shape,
    run: Run,
    cal: Calibration,
    capacity: float | None,
    context_bytes: float,
    host_memory: tuple[float, str] | None = None,
    band: float = 0.0,
) -> Prediction:
    """Per-card peak of `run` on cards of `capacity` bytes, with a CUDA context of `context_bytes`;
    what offload moves to host memory is totalled over the run's processes (one host holds them
    all) and, given `host_memory` (bytes, and whose they are), a total above it does not fit.
    `band`: how far the prediction may fall short of the run (verdict_band), which "fits" leaves room for."""
    f, c, n = features(shape, run), cal.coefficients, run.cards
    sixteen = run.precision in ("bf16", "fp16")
    model = strategies.BY_NAME.get(run.strategy)
    if model is None or model.fit_as:
        raise UsageError(f"strategy {run.strategy!r}: one of {', '.join(strategies.fit_models())}")
    weights, grads, optim = _model_state(model, shape, run, f, c, sixteen)
    if cal.analytic:
        return _predict_phases(model, shape, run, (weights, grads, optim), capacity, context_bytes, host_memory, band)
    act = c["activations"] * f["activations"] + c["recompute"] * f["recompute"] + c["checkpoints"] * f["checkpoints"]
    extra = {"gradient buckets": grads} if model.buckets else {}  # DDP reduces gradients through buckets: a copy
    weights_whole = weights  # the model as loaded, before any strategy divides or moves it
    weights, grads, optim, host, offload = _placed(model, run, weights, grads, optim)
    if "weights" in model.shards:
        extra["gathered layer"] = _gathered_layer(shape, run, model)
    terms = {
        "weights": weights,
        "gradients": grads,
        "optimizer": optim,
        "activations": act,
        "logits": c["logits"] * f["logits"],
        **extra,
        "overhead": context_bytes,
    }
    step = sum(terms.values())
    load = load_phase(model, run, weights_whole, context_bytes)
    total = max(step, load["card"])
    phase = "loading" if load["card"] > step else "training step"
    verdict, limit, why = _judged(model, run, offload, load, host, total, capacity, host_memory, band)
    return Prediction(model.name, n, terms, host, total, capacity, verdict, why, limit, phase, load, band=band)


def _judged(model, run: Run, offload: str, load: dict, host: dict, total: float, capacity, host_memory, band: float):
    """(verdict, what it is about, why) of a per-card `total` on cards of `capacity` with its band,
    once what offload (`host`) and loading keep in the host memory of the run's processes is checked."""
    return _host_check(
        _verdict(total, capacity, band),
        _why(model, run, run.cards, offload, load),
        sum(host.values()) * run.cards,
        load["host_total"],
        run.cards,
        host_memory,
    )


def _placed(model, run: Run, weights: float, grads: float, optim: float):
    """(weights, gradients, optimizer states) on one card once the strategy divides them between
    its cards and offload moves them, what offload keeps in host memory, and the offload."""
    n = run.cards
    weights = weights / n if "weights" in model.shards else weights
    grads = grads / n if "gradients" in model.shards else grads
    optim = optim / n if "optimizer" in model.shards else optim
    host: dict[str, float] = {}
    offload = offload_of(model, run)
    if offload in ("optimizer", "both"):
        # the optimizer step runs on the CPU, so the (fp32) gradients go there too
        host["optimizer"], host["gradients"], optim, grads = optim, grads, 0.0, 0.0
    if offload in ("params", "both"):  # the parameters live there; each layer is gathered onto the card
        host["weights"], weights = weights, 0.0
    return weights, grads, optim, host, offload


def _gathered_layer(shape: Shape, run: Run, model=None) -> float:
    """What ZeRO-3 and FSDP hold unsharded on a card at a time, in the compute dtype: the largest
    module gathered (a decoder layer, or the embedding or the head where those are larger: a 128k
    vocabulary's embedding is 2.4 times a Llama-3-8B layer) and the next layer prefetched. FSDP's root
    unit holds the embedding, the head and the final norm, which are in no layer's unit, and does not
    reshard them between forward and backward, so under FSDP they stay whole through both."""
    p = shape.params()
    width = 2.0 if run.precision in ("bf16", "fp16") else 4.0
    layer = (p["linear"] + p["norms"]) / max(1, shape.layers)
    outside = p["embed"] + p["lm_head"]  # the modules outside the decoder layers
    if model is not None and model.fsdp_version:
        return width * (outside + 2 * layer)
    return width * (max(layer, p["embed"], p["lm_head"]) + layer)


def _predict_phases(
    model, shape: Shape, run: Run, state, capacity, context_bytes: float, host_memory, band: float
) -> Prediction:
    """A GPU prediction: the largest of the step's phases (phases.py) and loading, on one card of
    the run's strategy; `state` the (weights, gradients, optimizer states) before it divides them."""
    n, weights_whole = run.cards, state[0]
    extra = {"gradient buckets": state[1]} if model.buckets else {}
    weights, grads, optim, host, offload = _placed(model, run, *state)
    kinds = OPTIMIZERS[run.optimizer][0]
    one_state = optim / kinds if isinstance(kinds, int) and kinds else optim
    largest = max(r * c for r, c, _ in trainable_tensors(shape, run))
    temporaries = phases.step_temporaries(run.optimizer, one_state, largest, bool(model.deepspeed))
    if run.optimizer_in_backward:  # one optimizer per parameter, stepped as its gradient arrives
        temporaries = min(temporaries, largest * (2.0 if run.pure_bf16 else 4.0))
    trained = {"weights": weights, "gradients": grads, "optimizer states": optim, "optimizer temporaries": temporaries}
    sharded_16bit = bool(model.deepspeed or model.fsdp_version) and run.precision in ("bf16", "fp16")
    # DeepSpeed's engine and FSDP's mixed precision hold the model in 16 bits: no autocast copies
    act_run = dataclasses.replace(run, pure_bf16=True) if sharded_16bit else run
    by_phase = phases.phase_terms(shape, act_run, trained, phases.masked(run))
    if "weights" in model.shards:
        for phase in ("forward", "backward"):
            by_phase[phase]["gathered layer"] = _gathered_layer(shape, run, model)
    renamed = {"optimizer states": "optimizer"}
    by_phase = {
        phase: {renamed.get(k, k): v for k, v in {**terms, **extra, "overhead": context_bytes}.items()}
        for phase, terms in by_phase.items()
    }
    totals = {phase: sum(terms.values()) for phase, terms in by_phase.items()}
    peak = max(totals, key=totals.get)
    load = load_phase(model, run, weights_whole, context_bytes)
    total, phase = (load["card"], "loading") if load["card"] > totals[peak] else (totals[peak], peak)
    verdict, limit, why = _judged(model, run, offload, load, host, total, capacity, host_memory, band)
    return Prediction(
        model.name, n, by_phase[peak], host, total, capacity, verdict, why, limit, phase, load, totals, band
    )


def _model_state(model, shape: Shape, run: Run, f: dict, c: dict, sixteen: bool):
    """(weights, gradients, optimizer state) in bytes on one card before a strategy divides or moves
    them: the trainable state as each strategy stores it."""
    weights = f["_weights_bytes"] * c["weights"]
    quantized = run.method == "qlora" or run.quantization != "none"
    if model.deepspeed and sixteen:
        # ZeRO's mixed-precision accounting: 16-bit parameters and gradients, and an fp32 master
        # copy beside the optimizer's states (AdamW: 2 + 2 + 4 + 8 bytes per parameter)
        if not quantized:  # the engine holds the whole model, and any saved module's copy, in 16 bits
            saved = shape.saved_params(run.modules_to_save) if run.method != "full" else 0
            weights = (f["_params"] + saved) * 2.0 * c["weights"]
        mixed = dataclasses.replace(run, pure_bf16=False, optimizer_in_backward=False)
        trainable = f["_trainable"]
        grads, optim = 2.0 * trainable, 4.0 * trainable + state_bytes(shape, mixed)[1]
    else:
        grads, optim = f["_grads"], f["_optim"]
    state_scale = c["trainable_state"]
    return weights, grads * state_scale, optim * state_scale


def _why(model, run: Run, n: int, offload: str, load: dict) -> str:
    """What a prediction's verdict is about: the strategy's own words, what is offloaded, how it loads."""
    offloaded = {
        "optimizer": "the optimizer state and gradients",
        "params": "the parameters",
        "both": "parameters, gradients and optimizer state",
    }.get(offload, "")
    why = model.fit_why.format(n=n) + (
        f"; with {offloaded} in host memory" if run.offload not in ("auto", "none") and offloaded else ""
    )
    return why + f"; loading: {load['says']}"


def _host_check(verdict: str, why: str, training: float, loading: float, n: int, host_memory) -> tuple[str, str, str]:
    """The verdict, what it is about and why, once the host memory of the `n` processes (`training`:
    what offload keeps there; `loading`: what loading materialises) is checked against `host_memory`."""
    on_host = max(training, loading)
    if not host_memory or _verdict(on_host, host_memory[0]) == "fits":
        return verdict, "card", why
    short = _verdict(on_host, host_memory[0]) == "does not fit"
    verdict = "does not fit" if short else ("tight" if verdict == "fits" else verdict)
    when = "while loading" if loading >= training else "while training"
    return (
        verdict,
        "host memory",
        why
        + (
            f"; the {_gib(on_host)} its {n} processes keep in host memory {when} is "
            f"{'more than' if short else 'near'} {host_memory[1]} {_gib(host_memory[0])}"
        ),
    )


def load_phase(model, run: Run, weights: float, context_bytes: float) -> dict:
    """What loading `weights` (the whole model as stored) holds before training, under `run.load`
    (LOADS; "auto": default_load): on each card (the whole model where it is placed whole before
    sharding, else at most what training holds: 0 here), and in host memory per process and in all."""
    n, how = run.cards, run.load if run.load != "auto" else default_load(model.name)
    sharded = "weights" in model.shards or model.offload
    if how == "on-card":
        return {
            "how": how,
            "card": weights + context_bytes if sharded else 0.0,
            "host_per_process": 0.0,
            "host_total": 0.0,
            "says": "each process loads the whole model onto its card" + (" before sharding it" if sharded else ""),
        }
    if how == "sharded" and sharded:
        zero = model.deepspeed
        return {
            "how": how,
            "card": 0.0,
            "host_per_process": weights / n if zero else weights,
            "host_total": weights,
            "says": (
                "each process materialises only its shard (from_pretrained under deepspeed.zero.Init)"
                if zero
                else "rank 0 materialises the whole model in host memory, the others none (cpu_ram_efficient_loading)"
            ),
        }
    return {
        "how": "whole",
        "card": 0.0,
        "host_per_process": weights,
        "host_total": weights * n,
        "says": f"each of the {n} processes materialises the whole model in host memory first"
        if n > 1
        else "the whole model in host memory first",
    }


def _verdict(need: float, capacity: float | None, band: float = 0.0) -> str:
    """ "fits" where the upper side of the prediction's error band (`need` x (1 + band)) leaves a
    tenth of `capacity` free (MARGIN), "tight" where `need` itself is within the card, else "does not fit"."""
    if capacity is None:
        return "n/a"
    if need * (1 + band) <= capacity * (1 - MARGIN):
        return "fits"
    return "tight" if need <= capacity else "does not fit"


ASSUMED_BAND = 0.10  # where no GPU record measures a kind of prediction, it may fall this far short


def verdict_band(rows: list[dict], strategy: str, method: str) -> tuple[float, str]:
    """The band a GPU verdict allows for, and where it comes from: the largest under-prediction
    (-error) among GPU check records (error_table rows) of `strategy` and `method`, else
    ASSUMED_BAND where none measures that kind (QLoRA, sharded strategies on one host so far)."""
    errors = [r["error"] for r in rows if (strategies.modelled_as(r["strategy"]), r["method"]) == (strategy, method)]
    if not errors:
        return ASSUMED_BAND, f"{ASSUMED_BAND:.0%} assumed: no GPU record measures {strategy} with {method}"
    under = max(0.0, -min(errors))
    return under, (
        f"{under:.1%}: the most GPU records of {strategy} with {method} came out above the count "
        f"({len(errors)} record{'s' if len(errors) > 1 else ''})"
    )


def describe(run: Run) -> str:
    """The method and what it trains, the precision and the optimizer, as the header says them."""
    out = [run.method]
    if run.method != "full":
        out.append(
            f"r={run.lora_r} on "
            f"{'every linear layer' if set(run.lora_targets) >= set(LINEAR) else ', '.join(run.lora_targets)}"
            + (f", {' and '.join(run.modules_to_save)} trained whole" if run.modules_to_save else "")
        )
    out.append("pure bf16" if run.pure_bf16 else run.precision)
    if run.method == "qlora" or run.quantization != "none":
        out.append(
            {
                "nf4": "4-bit NF4 base",
                "nf4dq": "4-bit NF4 base, double-quantized",
                "fp4": "4-bit FP4 base",
                "fp4dq": "4-bit FP4 base, double-quantized",
                "int8": "8-bit base",
            }.get(run.quantization if run.quantization != "none" else "nf4", run.quantization)
        )
    out.append(run.optimizer + (", stepped during backward" if run.optimizer_in_backward else ""))
    return "; ".join(out)


def _gib(n: float) -> str:
    return f"{n / GIB:,.1f} GiB"


TERM_ORDER = (
    "weights",
    "gradients",
    "optimizer",
    "optimizer temporaries",
    "weight copies",
    "activations",
    "recomputed layer",
    "logits",
    "gradient buckets",
    "gathered layer",
    "dequantized weight",
    "overhead",
)


@dataclasses.dataclass
class Report:
    model: object  # model_configs.ModelConfig
    gpu: object | None  # gpus.GpuModel
    run: Run
    predictions: list[Prediction]
    calibration: Calibration
    configs: object  # model_configs.ModelConfigs
    strategy_checks: list[dict] = dataclasses.field(default_factory=list)  # strategy_error_table rows
    context: object = None  # models.Context: the CUDA context added on a GPU, and its evidence
    defaults: tuple[str, ...] = ()  # the settings the user did not give, and whose default each took
    read_as: str = ""  # how the model name given was read: which shipped config it is
    bands: dict = dataclasses.field(default_factory=dict)  # error_bands of the CPU records the fit was not fitted on
    # error_table rows of gpu_check_records (a GPU prediction)
    gpu_checks: list = dataclasses.field(default_factory=list)
    # ModelConfigs.allocator_slack: {(expandable_segments, length regime): {slack, records}}
    slack: dict = dataclasses.field(default_factory=dict)
    host_hint: str = ""  # how to have host memory checked, where it was not given ("" where it was)
    capacity_how: str = ""  # capacity_of's second part: "given", "exposed" or "as sold x share"

    def other_backend(self) -> str:
        """What the answer for a card of another backend than CUDA rests on (predicted)."""
        return (
            f"{self.gpu.name} is a {self.gpu.backend} card ({self.gpu.arch}): compat has no record of it, so the "
            "terms, their band and the context below are CUDA's, from NVIDIA cards' records; its allocator and "
            "kernels may hold more (predicted, not measured)"
        )

    def _capacity_said(self) -> str:
        if self.capacity_how == "exposed":
            return ", as the card exposes it"
        if self.capacity_how.startswith("as sold"):
            return f": {self.capacity_how.replace('as sold x', 'as sold x')}, the least any card compat knows exposes"
        return ""

    def quantities(self, p: "Prediction") -> dict:
        """Per card, the quantities users read: torch's allocated (the terms but the context), its
        reserved (allocated plus the caching allocator's slack, with and without expandable_segments,
        where GPU records measured it; else None) and what nvidia-smi shows (reserved plus the context)."""
        context = p.terms.get("overhead", 0.0)
        allocated = p.total - context
        out = {"allocated_bytes": round(allocated)}
        for es, key in ((False, "reserved_bytes"), (True, "reserved_expandable_segments_bytes")):
            slack = self.slack.get((es, self.run.lengths))
            out[key] = round(allocated * (1 + slack["slack"])) if slack else None
        out["nvidia_smi_bytes"] = round(out["reserved_bytes"] + context) if out["reserved_bytes"] is not None else None
        return out

    @property
    def counted(self) -> bool:
        """A GPU prediction before any CUDA record: every term counted, no constant fitted."""
        return self.calibration.analytic and not self.calibration.records

    def _terms_evidence(self) -> dict:
        sources = ", ".join(self.model.sources[:2])
        if self.counted:
            return {
                "kind": "predicted",
                "rule": "fit-terms",
                "records": [],
                "says": (
                    f"terms counted from the model's config ({sources}), none fitted, for each phase of the "
                    "training step; the peak is the largest phase: the forward pass (16-bit weight copies autocast "
                    "keeps, the tensors autograd saves per layer, the logits and the loss's fp32 copies), the "
                    "backward pass (the logits' gradients at 12 bytes each when it starts, the gradients when it "
                    "ends) or the optimizer step (weights, gradients, states and its temporaries: foreach AdamW "
                    "holds one more state); harness/answers/phases.py names each tensor, and compat fit --trace "
                    "counts by running the model's code"
                ),
            }
        sweep = "CPU records of matrix/fit-cpu.toml"
        return {
            "kind": "predicted",
            "rule": "fit-terms",
            "records": self.calibration.records,
            "says": (
                f"terms counted from the model's config ({sources}); per-element constants fitted on "
                f"{len(self.calibration.records)} {sweep} ({self.calibration.quantity}); bench/fit_error.py "
                "reports the fit's error on them and on held-out sizes"
            ),
        }

    def evidence(self) -> list[dict]:
        shown = sorted({p.strategy for p in self.predictions})
        out = [self._terms_evidence()]
        out += [e for e in map(self._strategy_check, shown) if e is not None]
        out += [self._fit_error(strategy) for strategy in shown]
        return out + self._gpu_evidence()

    def _strategy_check(self, strategy: str) -> dict | None:
        """How the multi-rank CPU records of `strategy` differed from this model's prediction."""
        rows = [r for r in self.strategy_checks if strategies.modelled_as(r["strategy"]) == strategy]
        if not rows:
            return None
        errors = ", ".join(
            f"{r['method']}{'' if r['strategy'] == strategy else ' (' + r['strategy'] + ')'} {-r['error']:+.0%}"
            for r in rows
        )
        return {
            "kind": "measured",
            "rule": "strategy-check",
            "says": (
                f"{strategy}: on 2 CPU ranks (fp32, matrix/fit-cpu-dist.toml) the measured per-rank "
                f"training peak differed from this model's prediction by {errors} of the measured peak "
                "(+: measured higher)"
            ),
            "records": [r["id"] for r in rows],
        }

    def _fit_error(self, strategy: str) -> dict:
        """The error band that applies to this prediction of `strategy`: on GPU records where there
        are any, else on CPU records, else unknown."""
        method = "lora" if self.run.method == "qlora" else self.run.method
        band = self.bands.get((strategy, method))
        kind = f"{strategy} with {self.run.method}"
        gpu_rows = [
            r for r in self.gpu_checks if (strategies.modelled_as(r["strategy"]), r["method"]) == (strategy, method)
        ]
        if self.gpu is not None and gpu_rows:
            return self._gpu_error(kind, strategy, method, gpu_rows)
        if band is None:
            return {
                "kind": "predicted",
                "rule": "fit-error",
                "says": f"{kind}: no record compat has checks this kind of prediction; its error is not known",
            }
        said = (
            f"{kind}: on the CPU records compat's fit was not fitted on "
            f"({'held-out sizes' if strategy == strategies.one_process().name else '2 ranks'}), {strategy} with "
            f"{method} predictions were off by a median {band['median']:.0%} (P90 {band['p90']:.0%}, "
            f"{band['records']} record{'s' if band['records'] > 1 else ''})"
            + ("; none of them has 4-bit weights" if self.run.method == "qlora" else "")
            + (
                "; that is the CPU fit's error: on a GPU compat counts the terms instead, and their error is not "
                "measured yet"
                if self.counted
                else ""
            )
        )
        return {
            "kind": "predicted" if self.run.method == "qlora" else "measured",
            "rule": "fit-error",
            "says": said,
            "band": band,
        }

    def _gpu_evidence(self) -> list[dict]:
        """On a GPU: where the CUDA context figure comes from, and whether GPU records calibrate the count."""
        out = []
        if self.gpu is not None and self.context is not None:
            c = self.context
            out.append(
                {
                    "kind": "measured" if c.measured else "predicted",
                    "rule": "cuda-context",
                    "says": c.says,
                    **({"records": list(c.records)} if c.measured else {"sources": list(c.sources)}),
                }
            )
        if self.gpu is not None:
            checked = (
                f"{len(self.gpu_checks)} real-size GPU record(s) checked the count (fit-error)"
                if self.gpu_checks
                else "no GPU record has checked these numbers yet"
            )
            out.append(
                {
                    "kind": "predicted",
                    "rule": "gpu-count",
                    "says": f"{checked}: on a GPU every term is counted, none fitted; CUDA records check the count "
                    "(bench/fit_error.py) rather than fit it (compat's CPU fit is not used on a GPU: it over-states "
                    "a GPU's activations by 1.4-1.75x, issue 22)",
                }
            )
        return out

    def _gpu_error(self, kind: str, strategy: str, method: str, rows: list[dict]) -> dict:
        """fit-error measured on GPU records at a real size that the GPU constants were not fitted on."""
        band = error_bands(rows)[(strategy, method)]
        said = (
            f"{kind}: on GPU records at a real size that compat's GPU {'count' if self.counted else 'fit'} was not "
            f"fitted on ({', '.join(sorted({r['model'] for r in rows}))}; "
            f"{', '.join(sorted({r['card'] for r in rows}))}), its "
            f"{strategy} with {method} predictions of torch's training-phase max allocated were off by a median "
            f"{band['median']:.1%} (P90 {band['p90']:.1%}, {band['records']} "
            f"record{'s' if band['records'] > 1 else ''}; "
            + ", ".join(f"{r['precision']} {r['error']:+.1%}" for r in rows)
            + ")"
            + ("; none of them has 4-bit weights" if self.run.method == "qlora" else "")
        )
        return {
            "kind": "predicted" if self.run.method == "qlora" else "measured",
            "rule": "fit-error",
            "says": said,
            "band": band,
            "records": [r["id"] for r in rows],
        }

    def _quantity_lines(self) -> list[str]:
        """What nvidia-smi would show beside the verdict's number (allocated plus the context), where
        GPU records measured the caching allocator's slack for the run's length regime."""
        if self.gpu is None:
            return []
        regime = self.run.lengths
        measured = {es: s for (es, lengths), s in self.slack.items() if lengths == regime}
        if not measured:
            return [
                f"The verdict is on allocated memory plus the context. nvidia-smi shows more, by the caching "
                f"allocator's slack, which no GPU record measures yet for {regime}-length batches."
            ]
        said = "; ".join(
            f"{s['slack']:.0%} {'with' if es else 'without'} expandable_segments ({len(s['records'])} GPU records)"
            for es, s in sorted(measured.items())
        )
        out = [
            f"The verdict is on allocated memory plus the context. nvidia-smi shows more: the caching allocator "
            f"keeps freed blocks, measured with {regime}-length batches (--lengths) at {said} over allocated; on "
            "a card too small for that it frees them and retries before it fails, so it shows at most the card:"
        ]
        for p in self.predictions:
            q = self.quantities(p)
            line = f"  {p.strategy}: allocated {_gib(q['allocated_bytes'])} + context = {_gib(p.total)} (the verdict's)"
            for es, key in ((False, "nvidia_smi_bytes"), (True, "reserved_expandable_segments_bytes")):
                if q[key] is None:
                    continue
                shown = q[key] + (p.terms.get("overhead", 0.0) if es else 0.0)
                where = (
                    f"up to the card's {_gib(p.capacity)} ({_gib(shown)} on a larger one)"
                    if p.capacity and shown > p.capacity
                    else f"about {_gib(shown)}"
                )
                line += f"; nvidia-smi {where}" + (" with expandable_segments" if es else "")
            out.append(line)
        return out

    def quantity(self) -> str:
        if self.gpu is None:
            return "the model's memory (the terms below) without any process overhead"
        return (
            "torch's peak allocated memory (the terms up to the overhead) plus the CUDA context; nvidia-smi shows "
            "more, "
            "by the caching allocator's slack between reserved and allocated (below)"
        )

    def as_json(self) -> dict:
        p = self.model.shape.params()
        # each prediction names its own
        run = {k: v for k, v in dataclasses.asdict(self.run).items() if k != "strategy"}
        return {
            "model": {
                "key": self.model.key,
                "title": self.model.title,
                "read_as": self.read_as,
                "parameters": p["total"],
                "trainable": int(features(self.model.shape, self.run)["_trainable"]),
                "sources": list(self.model.sources),
            },
            "gpu": None
            if self.gpu is None
            else {
                "name": self.gpu.name,
                "arch": self.gpu.arch,
                "backend": self.gpu.backend,
                "count": self.run.cards,
                "memory_bytes": self.predictions[0].capacity,
                **({} if self.gpu.cuda else {"note": self.other_backend()}),
            },
            "run": {**run, "strategies": [p.strategy for p in self.predictions]},
            "defaults": list(self.defaults),
            "quantity": self.quantity(),
            "calibration": {
                "coefficients": self.calibration.coefficients,
                "baseline_bytes": self.calibration.baseline,
                "quantity": self.calibration.quantity,
                "records": len(self.calibration.records),
            },
            "predictions": [
                {**p.as_json(), **(self.quantities(p) if self.gpu is not None else {})} for p in self.predictions
            ],
            "evidence": self.evidence(),
        }

    def text(self) -> str:
        r, shape = self.run, self.model.shape
        params = shape.params()["total"]
        trainable = features(shape, r)["_trainable"]
        lines = [
            f"{self.model.title}: {params / 1e9:.2f} B parameters, {trainable / 1e6:,.1f} M trainable ({describe(r)}), "
            f"sequence {r.seq_len} x batch {r.batch} per card"
            + (
                f" x {r.grad_accum} accumulated (no change to the peak: micro-batches add into the same gradients)"
                if r.grad_accum > 1
                else ""
            )
            + f", gradient checkpointing {'on' if r.grad_ckpt else 'off'}"
        ]
        if self.read_as:
            lines.insert(0, f"Model: {self.read_as}")
        if self.defaults:
            lines.append("Defaults taken: " + "; ".join(self.defaults))
        cap = self.predictions[0].capacity
        if self.gpu is not None:
            lines.append(
                f"on {r.cards} x {self.gpu.name} ({cap / GIB:,.1f} GiB per card{self._capacity_said()}; "
                f"'fits' leaves {MARGIN:.0%} free)"
            )
        if self.gpu is not None and not self.gpu.cuda:
            lines.append(self.other_backend())
        lines.append(f"Per card: {self.quantity()}.")
        lines.append("")
        lines += self._table(cap)
        lines += self._quantity_lines()
        lines.append("")
        lines += self._whys()
        lines.append("")
        lines.append("Evidence:")
        for e in self.evidence():
            lines.append(f"  [{e['kind']}] {e['says']} (rule {e['rule']})")
            for s in e.get("sources", [])[:3]:
                lines.append(f"      {s}")
        return "\n".join(lines) + "\n"

    def _table(self, cap: float | None) -> list[str]:
        """The predictions, a row per strategy: the total, the phase it peaks in, the verdict, each term."""
        lines = []
        present = [t for t in TERM_ORDER if any(t in p.terms and p.terms[t] for p in self.predictions)]
        header = ["strategy", "per card", "peak at", "verdict", *present]
        rows = [header]
        for p in self.predictions:
            band = f"; band {p.band:.1%}" if self.gpu is not None and p.limit == "card" else ""
            verdict = (
                p.verdict
                if cap is None
                else f"{p.verdict} ({p.total / cap:.0%}{' of card; host memory' if p.limit != 'card' else band})"
            )
            rows.append(
                [
                    p.strategy,
                    _gib(p.total),
                    p.phase if p.phase != "training step" else "training",
                    verdict,
                    *(_gib(p.terms.get(t, 0.0)) for t in present),
                ]
            )
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        for row in rows:
            lines.append(
                "  ".join(
                    cell.ljust(w) if i < 4 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))
                ).rstrip()
            )
        if any(p.phase == "loading" for p in self.predictions):
            lines.append(
                "(the terms are the training step's; a peak at loading is the whole model on each card before sharding)"
            )
        elif self.gpu is not None:
            lines.append("(the terms are those of the phase the card peaks in; --format json gives every phase)")
        if self.gpu is not None and cap is not None:
            method = "qlora" if self.run.method == "qlora" or self.run.quantization != "none" else self.run.method
            says = "; ".join(
                f"{p.strategy} {verdict_band(self.gpu_checks, p.strategy, method)[1]}" for p in self.predictions
            )
            lines.append(
                f"'fits' where the prediction plus its error band leaves {MARGIN:.0%} of the card free, 'tight' where "
                f"the prediction alone fits the card. Band: {says}."
            )
        return lines

    def _whys(self) -> list[str]:
        """Each prediction's reasons, with the host memory it needs where the card is not the limit."""
        lines = []
        for p in self.predictions:
            host = ""
            if p.limit == "card" and (p.host or p.load.get("host_total")):
                training, loading = sum(p.host.values()) * p.cards, p.load.get("host_total", 0.0)
                host = (
                    f"; host memory at most {_gib(max(training, loading))} for its {p.cards} process"
                    f"{'es' if p.cards > 1 else ''} ({'while loading' if loading >= training else 'while training'})"
                    + (f": {self.host_hint} checks it against the host's RAM" if self.host_hint else "")
                )
            lines.append(f"  {p.strategy}: {p.why}{host}")
        return lines


def card_capacity(gpu, gpu_name: str, gpu_memory_gib: float | None) -> float | None:
    """Bytes of one card: `gpu_memory_gib` when given; else what the size the name gives ("A100
    80GB" names one of the card's sizes), else the card's smallest, exposes to software
    (matrix/gpus.toml's memory_mib: an A10's 24 GB is 23,028 MiB in nvidia-smi, not 24 GiB); where
    that is not known, the size as sold times the smallest share any card of the database exposes
    (GpuModel.unknown_share: the safe side); None without a card."""
    return capacity_of(gpu, gpu_name, gpu_memory_gib)[0]


def capacity_of(gpu, gpu_name: str, gpu_memory_gib: float | None) -> tuple[float | None, str]:
    """(card_capacity, how it was had: "given", "exposed" or "as sold x share")."""
    if gpu_memory_gib:
        return gpu_memory_gib * GIB, "given"
    if gpu is None:
        return None, ""
    if gpu.unified_memory:
        raise UsageError(
            f"{gpu.name} shares its memory with the system ({gpu.memory_text()}): give what torch may use with "
            "--gpu-memory GIB (torch.mps.recommended_max_memory() / 2**30 on that Mac)"
        )
    i = gpu.variant(gpu_name)
    if i is None:
        i = min(range(len(gpu.memory_gb)), key=lambda j: gpu.memory_gb[j])
    if i < len(gpu.memory_mib) and gpu.memory_mib[i]:
        return gpu.memory_mib[i] * MIB, "exposed"
    share = gpu.unknown_share
    each = f" / {gpu.devices} devices" if gpu.devices > 1 else ""  # a device is what one process has
    return gpu.memory_gb[i] * GIB * share / gpu.devices, f"as sold x {share:.1%}{each}"


def _card_of(rec: dict) -> str:
    """The name of the card a GPU record ran on, as its fingerprint gives it."""
    gpus = ((rec.get("fingerprint") or {}).get("hardware") or {}).get("gpus") or [{}]
    name = gpus[0].get("name") if isinstance(gpus[0], dict) else None
    return name if isinstance(name, str) and name else rec["axes"]["hardware"]


def _precision(precision: str, gpu, names: list[str], run_fields: dict) -> str:
    """The precision asked for ("auto": the card's), checked against pure bf16 and the optimizer
    step in backward."""
    if precision == "auto":
        precision = ("bf16" if run_fields.get("pure_bf16") else "fp32") if gpu is None else precision_for(gpu)
    if run_fields.get("pure_bf16") and precision != "bf16":
        raise UsageError(
            f"pure bf16 trains in bf16, and the precision here is {precision}"
            + (f" ({gpu.name} has no bf16)" if gpu is not None and precision_for(gpu) != "bf16" else "")
        )
    if run_fields.get("optimizer_in_backward") and any(
        strategies.get(s).name != strategies.one_process().name for s in names
    ):
        raise UsageError(
            "the optimizer step in backward is modelled on one card (torchtune's optimizer_in_bwd is "
            "single-device): give --gpus 1"
        )
    return precision


def _gpu_checks(known, cal, recs: list[dict]) -> list[dict]:
    """The GPU prediction's own check: real-size GPU records its constants were not fitted on."""
    on_gpu = gpu_check_records(recs, set(known.calibration_models))
    return [
        dict(row, card=_card_of(r), model=r["axes"].get("model", "default"), precision=r["axes"]["precision"])
        for row, r in zip(error_table(cal, on_gpu), on_gpu)
    ]


def _predicted(shape: Shape, run: Run, cal: Calibration, gpu_checks: list[dict]):
    """predict() of `run`, to be given the card, the context, the host memory and whether it is a GPU
    (whose verdict takes the band GPU records measured for the run's strategy and method)."""
    method = run.method if run.method != "qlora" and run.quantization == "none" else "qlora"

    def on(capacity, context: float, host_memory, gpu: bool) -> Prediction:
        band = verdict_band(gpu_checks, run.strategy, method)[0] if gpu else 0.0
        return predict(shape, run, cal, capacity, context, host_memory, band)

    return on


def report_for(
    known,
    entry,
    gpu,
    capacity: float | None,
    precision: str,
    names: list[str],
    recs: list[dict],
    host_memory: tuple[float, str] | None = None,
    defaults: tuple[str, ...] = (),
    read_as: str = "",
    per_strategy: dict | None = None,
    host_hint: str = "--host-memory GIB",
    capacity_how: str = "",
    **run_fields,
) -> "Report":
    """compat fit's predictions for `entry` (a model config) under each strategy of `names`, on
    cards `gpu` (matrix/gpus.toml's, or None) of `capacity` bytes, calibrated on `recs` (the
    evidence of a results folder); precision "auto" follows the card's compute capability.
    `host_memory` (bytes, whose) checks what loading and offload keep in host memory (`host_hint`
    says how to give it); `defaults` says which settings took a default, and which; `per_strategy`
    gives a strategy Run fields of its own (its variant's load and offload)."""
    precision = _precision(precision, gpu, names, run_fields)
    run_fields.setdefault("quantization", "nf4" if run_fields["method"] == "qlora" else "none")
    cal = known.calibrate(recs, gpu=gpu is not None)
    run = Run(precision=precision, **run_fields)
    context = known.cuda_context(recs, gpu.arch) if gpu is not None else None
    gpu_checks = _gpu_checks(known, cal, recs) if gpu is not None else []
    preds = [
        _predicted(
            entry.shape, dataclasses.replace(run, strategy=s, **(per_strategy or {}).get(s, {})), cal, gpu_checks
        )(capacity, context.bytes if context else 0.0, host_memory, gpu is not None)
        for s in names
    ]
    cpu_cal = cal if gpu is None else known.calibrate(recs)  # the CPU fit, for the CPU records' checks and bands
    checks = strategy_error_table(cpu_cal, strategy_records(recs))  # the CPU ranks' check: CPU constants
    held_out = [r for r in sweep_records(recs) if r["axes"].get("model") not in known.calibration_models]
    bands = error_bands(error_table(cpu_cal, held_out) + checks)
    return Report(
        entry,
        gpu,
        run,
        preds,
        cal,
        known,
        checks,
        context,
        defaults,
        read_as,
        bands,
        gpu_checks,
        known.allocator_slack(recs) if gpu is not None else {},
        "" if host_memory is not None else host_hint,
        capacity_how,
    )
