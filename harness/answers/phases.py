"""compat fit on a GPU, phase by phase: what one card holds at the peak of the forward pass, of the
backward pass and of the optimizer step, each term counted from what the libraries' code keeps.

A training step's peak is the largest of its phases, not the sum of every term: activations and
logits are gone before the optimizer steps, and a full fine-tune's gradients are all there only at
the end of the backward pass. For compat's workload (HF Trainer + peft, `from_pretrained` then
`get_peft_model`, autocast for bf16/fp16, `zero_grad(set_to_none=True)`), one card holds

    forward         weights + optimizer states + weight copies + saved activations + logits (forward)
    backward start  weights + optimizer states + weight copies kept for backward + saved activations
                    + logits (backward) + one layer recomputed (gradient checkpointing)
    backward end    weights + optimizer states + gradients
    optimizer step  weights + gradients + optimizer states + the step's temporaries

and the backward pass in between frees a layer's activations as it adds the layer's gradients, so
its peak is at one end or the other. The per-token bytes follow a Llama-style decoder layer in
transformers (RMSNorm, SDPA attention, a gated MLP) and what autograd saves for it; each rule below
names the tensors. `compat fit --trace` runs the same step and counts every tensor instead
(harness/answers/trace.py); tests/integration/test_trace.py holds the two together.

The dtypes the rules depend on:
    w  the compute width: 2 under bf16/fp16 autocast or pure bf16, 4 in fp32
    r  the residual stream's width: the embedding's dtype (an fp32 embedding keeps the residual
       stream in fp32 under autocast, since adding a 16-bit layer output to it promotes to fp32):
       4 for a full fine-tune with fp32 master weights, a LoRA base left in fp32, and QLoRA after
       peft's prepare_model_for_kbit_training (which casts every non-quantized parameter to fp32,
       peft/utils/other.py); 2 for a 16-bit base or pure bf16
"""

from __future__ import annotations

import dataclasses

# What an optimizer's step allocates beyond its states on a CUDA card, by the names
# TrainingArguments.optim takes (compat fit's OPTIMIZERS):
#   "state"   one temporary the size of all its states of one kind: torch.optim's multi-tensor
#             (foreach) implementation, its default on CUDA (torch/optim/optimizer.py,
#             _default_to_fused_or_foreach): AdamW/Adam take _foreach_sqrt(exp_avg_sq) of every
#             parameter at once (torch/optim/adam.py, _multi_tensor_adam), RMSprop and Adagrad the
#             square root of theirs
#   "none"    fused kernels (adamw_torch_fused; DeepSpeed's FusedAdam) and bitsandbytes' 8-bit and
#             paged optimizers (one kernel per tensor) and plain SGD (_foreach_add_ in place)
#   "tensor"  per-tensor loops: Adafactor (transformers' Adafactor.step: the gradient in fp32, its
#             square and the factored update, three fp32 copies of the largest tensor)
STEP_TEMPORARIES = {
    **dict.fromkeys(("adamw", "adamw_torch", "adam", "adagrad", "rmsprop", "adamw_apex_fused"), "state"),
    **dict.fromkeys(
        (
            "adamw_torch_fused",
            "adamw_8bit",
            "adamw_bnb_8bit",
            "paged_adamw_8bit",
            "adam8bit",
            "paged_adamw_32bit",
            "paged_adamw",
            "lion_32bit",
            "paged_lion_32bit",
            "lion",
            "lion_8bit",
            "paged_lion_8bit",
            "sgd",
        ),
        "none",
    ),
    **dict.fromkeys(("adafactor", "adamw_hf", "adamw_anyprecision"), "tensor"),
}
# adamw_apex_fused: apex's FusedAdam is one kernel, but counted on the safe side as torch's foreach;
# adamw_hf (transformers' own AdamW, removed in 5.x) and adamw_anyprecision (torchdistx's) loop over
# tensors: counted as per-tensor, on the safe side


def step_temporaries(optimizer: str, one_state: float, largest: float, deepspeed: bool) -> float:
    """Bytes the optimizer step allocates beyond its states: `one_state` the bytes of one of its
    states over every trainable tensor, `largest` the largest trainable tensor's elements. Under
    DeepSpeed the engine steps with its own fused optimizer."""
    kind = "none" if deepspeed else STEP_TEMPORARIES.get(optimizer, "state")
    if kind == "state":
        return one_state
    if kind == "tensor":
        return 12.0 * largest
    return 0.0


def masked(run) -> bool:
    """Whether SDPA gets a mask: a batch padded to its longest row (LLaMA-Factory's and compat's
    collators) does whenever its rows differ; a batch of one never needs one."""
    return run.batch > 1


@dataclasses.dataclass(frozen=True)
class TrainingPath:
    """What a training stack holds, and in which dtype, where stacks differ (read in each one's code)."""

    title: str
    qlora_upcast: bool  # QLoRA's parameters that are not quantized (embeddings, head, norms) kept in fp32
    optimizer: str  # the optimizer it takes when the config names none (compat fit's OPTIMIZERS)
    pure_bf16: bool = False  # weights, adapters, gradients and states in bf16, no fp32 master copy
    loss_chunks: int = 0  # the loss computed over this many chunks of the logits (0: whole, in fp32)
    checkpoints_on_host: bool = False  # gradient checkpointing keeps each layer's input in host memory
    sources: tuple[str, ...] = ()


PATHS = {
    "compat": TrainingPath(
        "compat's workload (HF Trainer + peft)",
        qlora_upcast=True,  # peft's prepare_model_for_kbit_training: fp16/bf16 non-Params4bit params to fp32
        optimizer="adamw",  # the Trainer's adamw_torch (foreach on CUDA): the safe side, see below
        sources=(
            "https://github.com/huggingface/peft/blob/main/src/peft/utils/other.py",
            "https://github.com/huggingface/transformers/pull/37358",
        ),
    ),
    "llamafactory": TrainingPath(
        "LLaMA-Factory",
        qlora_upcast=False,  # its own prepare_model_for_training; upcast_layernorm, upcast_lmhead_output off
        optimizer="adamw",  # no default of its own: the Trainer's
        sources=(
            "https://github.com/hiyouga/LLaMA-Factory/blob/main/src/llamafactory/model/model_utils/checkpointing.py",
            "https://github.com/hiyouga/LLaMA-Factory/blob/main/src/llamafactory/hparams/model_args.py",
        ),
    ),
    "axolotl": TrainingPath(
        "axolotl",
        qlora_upcast=False,  # prepare_model_for_kbit_training, then norms, embed_tokens, lm_head back to bf16
        optimizer="adamw_torch_fused",  # schemas/training.py: optimizer default
        sources=(
            "https://github.com/axolotl-ai-cloud/axolotl/blob/main/src/axolotl/loaders/model.py",
            "https://github.com/axolotl-ai-cloud/axolotl/blob/main/src/axolotl/utils/schemas/training.py",
        ),
    ),
    "torchtune": TrainingPath(
        "torchtune",
        qlora_upcast=False,  # the model built in bf16 (dtype: bf16), only base linears NF4 (torchao)
        optimizer="adamw_torch_fused",  # the shipped LoRA/QLoRA configs: torch.optim.AdamW, fused: True
        pure_bf16=True,  # adapters checked to be bf16 (validate_expected_param_dtype)
        loss_chunks=8,  # LinearCrossEntropyLoss / CEWithChunkedOutputLoss, num_output_chunks 8
        sources=(
            "https://github.com/pytorch/torchtune/blob/main/recipes/lora_finetune_single_device.py",
            "https://github.com/pytorch/torchtune/blob/main/torchtune/modules/loss/cross_entropy_loss.py",
        ),
    ),
    "unsloth": TrainingPath(
        "unsloth",
        qlora_upcast=False,  # its prepare_model_for_training upcasts only lora_A/lora_B
        optimizer="adamw_8bit",  # patched into TRL's configs
        loss_chunks=8,  # unsloth_fused_ce_loss: logits a chunk at a time (the chunk count is an estimate)
        checkpoints_on_host=True,  # use_gradient_checkpointing="unsloth": each layer's input offloaded
        sources=(
            "https://github.com/unslothai/unsloth/blob/main/unsloth/models/_utils.py",
            "https://github.com/unslothai/unsloth/blob/main/unsloth/models/rl.py",
        ),
    ),
}


def path_of(run) -> TrainingPath:
    return PATHS.get(getattr(run, "path", "compat"), PATHS["compat"])


def quantized(run) -> bool:
    return run.method == "qlora" or run.quantization != "none"


def bnb_keeps_inputs(run) -> bool:
    """Whether bitsandbytes' 4-bit matmul keeps each layer's input for backward: it did until
    bitsandbytes PR #1270 (merged 2024-07-16, released in 0.43.2: MatMul4Bit.forward's
    ctx.tensors = (None, B) instead of (A, B)), though a frozen weight needs no input to back-propagate."""
    version = getattr(run, "bitsandbytes", "") or ""
    parts = [int(p) for p in version.split(".")[:3] if p.isdigit()]
    return bool(parts) and tuple(parts + [0] * (3 - len(parts))) < (0, 43, 2)


def qlora_upcast(run) -> bool:
    """Whether a QLoRA run keeps its parameters that are not quantized (embeddings, head, norms) in
    fp32: peft's prepare_model_for_kbit_training casts every fp16/bf16 parameter that is not a
    Params4bit to fp32 (peft/utils/other.py), as compat's workload calls it."""
    return path_of(run).qlora_upcast


def widths(run) -> tuple[int, int]:
    """(w, r): the compute width and the residual stream's (the module docstring)."""
    sixteen = run.precision in ("bf16", "fp16") or run.pure_bf16
    w = 2 if sixteen else 4
    if run.method == "full":
        r = 2 if run.pure_bf16 else 4
    elif run.method == "qlora" or run.quantization != "none":
        r = 4 if qlora_upcast(run) else w
    else:
        r = 2 if (run.lora_base_16bit and sixteen) else 4
    return w, r


def _consumers_saved(width_in: int, inputs: int, training: int, w: int, r: int, cast: bool) -> float:
    """Bytes per token saved for the linear layers that read one `width_in`-wide tensor of `r`-byte
    elements, `inputs` of them in all, `training` of them needing their input for a weight's
    gradient: none if no layer does; the tensor once if every one reads it as it is (same dtype, no
    copy); else a w-byte copy each (autocast casts a layer's input anew at every call, and peft
    casts a LoRA adapter's input to the adapter's fp32 first, then autocast back)."""
    if training == 0:
        return 0.0
    if cast or r != w:
        return float(training * w * width_in)
    return float(r * width_in)


# what a family's layers keep beyond a Llama block's (transformers' modeling_<family>.py)
GEMMA_NORMS = ("gemma2", "gemma3_text", "gemma3")  # x.float() normalised and scaled in fp32; a norm after
# attention and after the MLP as well as before each (four a layer)
QK_NORMS = ("qwen3", "qwen3_moe", "gemma3_text", "gemma3")  # an RMSNorm on each head's query and key
SOFTCAPPED = ("gemma2",)  # eager attention (no SDPA: soft-capping), tanh-capped scores and logits


def _norm(width: int, x_in: int, trains: bool, gemma: bool) -> float:
    """Bytes per token an RMSNorm over `width` keeps: its input in fp32 for the variance (a copy of an
    `x_in`-byte input), and where its weight trains the normalised input its weight multiplies: in the
    input's dtype (LlamaRMSNorm: weight * hidden.to(input_dtype)) or in fp32 (Gemma's)."""
    return 4.0 * width + ((4.0 if gemma else x_in) * width if trains else 0.0)


def layer_saved(shape, run, masked: bool, sparse: bool = False) -> dict[str, float]:
    """Bytes per token one decoder layer keeps for backward, by tensor; `sparse` a mixture-of-experts
    layer. A Llama-style block with SDPA keeps

    norms        each RMSNorm's input in fp32, and its normalised input where its weight trains
                 (_norm); Gemma's norms after attention and the MLP too, Qwen3's and Gemma 3's
                 query and key norms
    norm outputs what the linear layers reading a norm's output keep (_consumers_saved): q, k and v
                 (MLA: q and kv_a) read the first, gate and up (and a router) the second
    attention    SDPA keeps q and k after RoPE, v and its output (o_proj reads the output as it is:
                 flash and memory-efficient attention lay it out so its transpose needs no copy); on
                 the masked path (a padded batch: transformers passes a mask and repeats grouped
                 key/value heads itself, sdpa_attention.py/use_gqa_in_sdpa) the repeated keys and
                 values too. Gemma 2's eager attention keeps q, the repeated k and v, the tanh of the
                 scores, softmax's fp32 output and its 16-bit copy (heads x sequence each per token),
                 and the contiguous output o_proj reads. MLA (DeepSeek-V2) keeps its compressed kv's
                 norm and SDPA's q, k (nope + rope wide), v and output per head
    o_proj input what o_proj's adapter keeps of the attention output beyond it
    mlp          the gate's output (for SiLU/GELU), the activation's and up's (for their product), and
                 the product where down_proj's weight or adapter trains. A routed layer (transformers'
                 grouped_mm experts, in the experts' dtype) keeps per routed token copy the gathered
                 input where the experts train, the gate-up output, the activation, the product
                 where they train and the down output the routing weight scales; shared experts as a
                 dense MLP
    """
    w, r = widths(run)
    h, heads = shape.hidden, shape.heads
    d_q, d_kv = heads * shape.hd, shape.kv_heads * shape.hd
    full = run.method == "full"
    targets = set(run.lora_targets) if not full else set()
    if shape.fused:  # Phi-3: one qkv_proj and one gate_up_proj read each norm's output
        targets |= {"qkv"} if targets & {"q", "k", "v", "qkv"} else set()
        targets |= {"gate_up"} if targets & {"gate", "up", "gate_up"} else set()
    trains = lambda names: sum(1 for n in names if full or n in targets)  # noqa: E731
    # under autocast every LoRA adapter's input is cast (peft to fp32, autocast back to w bytes)
    cast = not full and w == 2
    norm_trains = full or "norms" in run.modules_to_save
    gemma = shape.family in GEMMA_NORMS
    # a 4-bit layer returns its output in its input's dtype (bitsandbytes' Linear4bit.forward)
    lin_out = r if quantized(run) else w
    norms = 2 * _norm(h, r, norm_trains, gemma)
    if gemma:
        norms += 2 * _norm(h, lin_out, norm_trains, gemma)
    if shape.family in QK_NORMS:
        norms += _norm(d_q, lin_out, norm_trains, gemma) + _norm(d_kv, lin_out, norm_trains, gemma)
    out = {"norms": norms}
    if quantized(run) and bnb_keeps_inputs(run):  # each 4-bit layer's input, cast to the compute dtype
        out["4-bit layer inputs"] = float(w * sum(i * k for _, i, _, k in shape.linears()) / shape.layers)
    out.update(_attention(shape, run, masked, trains, cast, targets))
    out["mlp"] = _mlp(shape, run, sparse, trains, cast)
    return out


def _attention(shape, run, masked: bool, trains, cast: bool, targets: set) -> dict[str, float]:
    """What attention keeps per token, and the readers of the norm before it (layer_saved)."""
    w, r = widths(run)
    h, heads = shape.hidden, shape.heads
    d_q, d_kv = heads * shape.hd, shape.kv_heads * shape.hd
    full = run.method == "full"
    norm_trains = full or "norms" in run.modules_to_save
    out = {}
    if shape.mla:
        kv_rank, nope, rope, v, q_rank = shape.mla
        readers = ("q_a", "kv_a") if q_rank else ("q", "kv_a")
        out["norm outputs"] = _consumers_saved(h, 2, trains(readers), w, r, cast)
        latent = _norm(kv_rank, w, norm_trains, False) + _consumers_saved(kv_rank, 1, trains(("kv_b",)), w, w, cast)
        if q_rank:
            latent += _norm(q_rank, w, norm_trains, False) + _consumers_saved(q_rank, 1, trains(("q_b",)), w, w, cast)
        out["attention"] = latent + w * heads * (2 * (nope + rope) + 2 * v)
        out["o_proj input"] = float(w * heads * v) if ("o" in targets and cast) else 0.0
    else:
        qkv = ("qkv",) if shape.fused else ("q", "k", "v")
        out["norm outputs"] = _consumers_saved(h, len(qkv), trains(qkv), w, r, cast)
        grouped = shape.kv_heads < heads
        if shape.family in SOFTCAPPED:
            scores = heads * run.seq_len * (w + 4 + w)  # tanh of the scores, softmax's fp32 output, its copy
            kept = w * (3 * d_q + (2 * d_kv if grouped else 0)) + (w * d_q if trains(("o",)) and full else 0)
            out["attention"] = float(scores + kept)
        else:
            out["attention"] = float(w * (2 * d_q + 2 * d_kv) + (2 * w * d_q if masked and grouped else 0))
        out["o_proj input"] = float(w * d_q) if ("o" in targets and cast) else 0.0
    return out


def _mlp(shape, run, sparse: bool, trains, cast: bool) -> float:
    """Bytes per token an MLP keeps, and what its readers keep of the norm before it (layer_saved)."""
    w, r = widths(run)
    h, full = shape.hidden, run.method == "full"
    gate_up = ("gate_up",) if shape.fused else ("gate", "up")
    readers = _consumers_saved(h, len(gate_up), trains(gate_up), w, r, cast)

    lin_out = r if quantized(run) else w  # a 4-bit layer's output is in its input's dtype

    def dense(width: float) -> float:
        return 3.0 * lin_out * width + (w * width if trains(("down",)) else 0.0)

    if not sparse:
        return readers + dense(shape.intermediate)
    k, inter = shape.experts_active, shape.moe_intermediate
    routed = k * r * (inter * 3 + h + ((h + inter) if full else 0))
    shared = dense(shape.shared_intermediate) if shape.shared_intermediate else 0.0
    router = w * h if full else 0.0  # the router's input, where the router trains
    return (readers if shape.shared_intermediate else 0.0) + routed + shared + router


def layers_saved(shape, run, masked: bool) -> tuple[float, float]:
    """(bytes per token every layer keeps, the most one layer keeps): dense and routed layers."""
    dense = sum(layer_saved(shape, run, masked).values())
    sparse = sum(layer_saved(shape, run, masked, sparse=True).values()) if shape.sparse_layers else 0.0
    n_sparse = shape.sparse_layers
    return (shape.layers - n_sparse) * dense + n_sparse * sparse, max(dense, sparse)


def weight_copies(shape, run, grad_ckpt: bool) -> tuple[float, float]:
    """(bytes during the forward pass, bytes still held when backward starts) of the 16-bit copies
    autocast makes of fp32 weights for its matmuls. A trainable fp32 leaf's copy is cached for the
    whole autocast region (torch's autocast cached_cast: float32 leaves that require grad), so a
    full fine-tune with fp32 master weights holds a 16-bit copy of every linear weight and of the
    head through the forward pass; backward runs after the region closes, and without gradient
    checkpointing the copies stay, saved for the inputs' gradients. A frozen fp32 base (LoRA) is
    not cached, but each copy is saved for backward unless checkpointing recomputes it; the head's
    is saved either way (it runs outside the checkpointed layers)."""
    p = shape.params()
    w, r = widths(run)
    if w != 2 or run.pure_bf16:
        return 0.0, 0.0
    head = 2.0 * shape.vocab * shape.hidden
    # routed experts multiply through grouped_mm, which autocast does not cast: no copies of theirs
    experts = 3 * shape.hidden * shape.moe_intermediate * shape.experts * shape.sparse_layers
    if run.method == "full":
        body = 2.0 * (p["linear"] - experts)
        return body + head, (0.0 if grad_ckpt else body) + head
    if r == 4:  # a LoRA base, or QLoRA's upcast head, in fp32 under autocast
        body = 0.0 if (run.method == "qlora" or run.quantization != "none") else 2.0 * (p["linear"] - experts)
        held = head + (0.0 if grad_ckpt else body)
        return held, held
    return 0.0, 0.0


def final_saved(shape, run) -> float:
    """Bytes per token kept after the last layer: the final norm's fp32 input (and normalised
    output where it trains) and what the head keeps of its input (where it trains)."""
    w, r = widths(run)
    h = shape.hidden
    full = run.method == "full"
    head_trains = full or "lm_head" in run.modules_to_save
    return 4.0 * h + (4.0 * h if full else 0.0) + (_consumers_saved(h, 1, 1, w, r, False) if head_trains else 0.0)


def logit_bytes(run, shape=None) -> tuple[float, float]:
    """(forward, backward) bytes per logit: the head's output (w bytes) and transformers' loss
    (ForCausalLMLoss: logits.float(), a 4-byte copy in 16-bit, then cross_entropy, whose
    log_softmax keeps its fp32 output) at the forward's peak; when backward starts, log_softmax's
    output, the loss's gradient and log_softmax's gradient, 4 bytes each, the head's output gone.
    Gemma 2 caps its logits with a tanh, whose output it keeps (w bytes more in both). A loss over n
    chunks (torchtune's, unsloth's) keeps log_softmax's fp32 output of every chunk and makes the rest
    one chunk at a time: 4 + (w + 4)/n forward, 4 + 8/n when backward starts (from their code, not traced)."""
    w, _ = widths(run)
    capped = float(w) if shape is not None and shape.family in SOFTCAPPED else 0.0
    chunks = path_of(run).loss_chunks
    if chunks:
        return 4.0 + (w + 4.0) / chunks + capped, 4.0 + 8.0 / chunks + capped
    return float(w + (4 if w == 2 else 0) + 4) + capped, 12.0 + capped


def phase_terms(shape, run, trained: dict[str, float], masked: bool) -> dict[str, dict[str, float]]:
    """Per phase, its terms in bytes on one card before a strategy divides them; `trained` holds the
    bytes of "weights", "gradients", "optimizer states" and "optimizer temporaries"."""
    tokens = run.batch * run.seq_len
    w, r = widths(run)
    every_layer, per_layer = layers_saved(shape, run, masked)
    if run.grad_ckpt:  # each layer's input, kept by its checkpoint; one layer at a time recomputed
        # (unsloth's checkpointing keeps the inputs in host memory)
        saved = 0.0 if path_of(run).checkpoints_on_host else float(shape.layers * tokens * r * shape.hidden)
        copies = weight_copies(shape, run, True)
        recompute = tokens * per_layer + (weight_copies(shape, run, False)[1] - copies[1]) / max(1, shape.layers)
    else:
        saved, copies, recompute = float(tokens * every_layer), weight_copies(shape, run, False), 0.0
    saved += tokens * final_saved(shape, run)
    logits_fwd, logits_bwd = (tokens * shape.vocab * b for b in logit_bytes(run, shape))
    held = {"weights": trained["weights"], "optimizer states": trained["optimizer states"]}
    if quantized(run):  # bitsandbytes dequantizes one layer's weight at a time, forward and backward
        held["dequantized weight"] = float(w * max(i * o for _, i, o, _ in shape.linears()))
    start = {**held, "weight copies": copies[1], "activations": saved}
    # the logits' gradients are freed before checkpointing recomputes the last layer
    start.update({"logits": logits_bwd} if logits_bwd >= recompute else {"recomputed layer": recompute})
    end = {**held, "gradients": trained["gradients"]}
    return {
        "forward": {**held, "weight copies": copies[0], "activations": saved, "logits": logits_fwd},
        "backward": start if sum(start.values()) >= sum(end.values()) else end,
        "optimizer step": {
            "weights": trained["weights"],  # (no layer is dequantized during the step)
            "gradients": trained["gradients"],
            "optimizer states": trained["optimizer states"],
            "optimizer temporaries": trained["optimizer temporaries"],
        },
    }
