"""compat preflight: the training configs users have, read and mapped to the cells they amount to.

    LLaMA-Factory training YAML   model_name_or_path, finetuning_type, quantization_bit, fp16/bf16,
                                  deepspeed: <a DeepSpeed JSON, read too>, ...
    DeepSpeed JSON                zero_optimization.stage and offload_*, fp16/bf16 (often "auto")
    accelerate config YAML        distributed_type (MULTI_GPU, FSDP, DEEPSPEED), num_processes,
                                  mixed_precision, fsdp_config, deepspeed_config
    TrainingArguments JSON/YAML   fp16/bf16, deepspeed, fsdp, gradient_checkpointing, ...

Every top-level field of every file ends up in exactly one of three lists, each shown to the
user: `used` (it decides an axis of the cell: family, precision, quantization, method,
strategy, ranks, gradient checkpointing), `not_modelled` (a real field of that format that does
not change which cell runs: the data set, the learning rate, the output folder, ...), `unknown`
(not a field of that format as compat knows it: a typo, or a newer release's field). Nothing is
silently ignored. A file that does not parse is an error naming file:line (exit code 2).
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from harness.errors import MatrixError, UsageError
from harness.tomldata import load_data

KINDS = ("llamafactory", "deepspeed", "accelerate", "training_args")
TITLES = {"llamafactory": "LLaMA-Factory training YAML", "deepspeed": "DeepSpeed JSON",
          "accelerate": "accelerate config", "training_args": "TrainingArguments"}

# model_name_or_path -> family (the first pattern that matches); matrix/models.toml has each family
FAMILY_PATTERNS = (
    (r"qwen2(\.5)?-?vl|qwen2_vl", "qwen2_vl"),
    (r"qwen2|qwen1\.5", "qwen2"),  # Qwen1.5 is model type qwen2 too; Qwen3 is a family of its own
    (r"glm-?4", "glm4"),
    (r"gemma", "gemma"),
    (r"mistral|mixtral", "mistral"),
    (r"llama", "llama"),
)


@dataclasses.dataclass
class Source:
    path: Path
    kind: str
    data: dict


@dataclasses.dataclass
class Request:
    """What the configs ask for, axis by axis, with where each value came from."""

    axes: dict = dataclasses.field(default_factory=dict)  # axis -> value
    why: dict = dataclasses.field(default_factory=dict)  # axis -> "file: field = value"
    deepspeed: dict | None = None  # the DeepSpeed config, as given
    deepspeed_from: str = ""
    fsdp: dict = dataclasses.field(default_factory=dict)  # fsdp / fsdp_config as given
    model_name: str = ""
    model_size: str = ""  # "8B", from the model's name
    fit: dict = dataclasses.field(default_factory=dict)  # seq_len, batch: for compat fit
    used: list[str] = dataclasses.field(default_factory=list)  # "file: field"
    not_modelled: list[str] = dataclasses.field(default_factory=list)
    unknown: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)

    def set(self, axis: str, value, why: str) -> None:
        if axis in self.axes and self.axes[axis] != value:
            self.notes.append(f"{axis}: {why} overrides {self.why[axis]}")
        self.axes[axis] = value
        self.why[axis] = why


def read(path: Path) -> Source:
    """Parse one config file (JSON or YAML by its suffix; YAML also reads JSON) and tell its kind."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a folder, not a config file") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not a text file ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read: {exc.strerror}") from None
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
        except RecursionError:
            raise UsageError(f"{path}: nested too deeply to be a config") from None
    else:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            at = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
            raise UsageError(f"{path}{at}: not valid YAML: {exc.problem or exc.context}") from None
        except (yaml.YAMLError, RecursionError) as exc:
            raise UsageError(f"{path}: not valid YAML: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: a config is a mapping of fields at the top, not {type(data).__name__ if data is not None else 'an empty file'}")
    bad = [k for k in data if not isinstance(k, str)]
    if bad:
        raise UsageError(f"{path}: field names are text, not {bad[0]!r}")
    return Source(path, kind_of(path, data), data)


def kind_of(path: Path, data: dict) -> str:
    keys = set(data)
    if keys & {"finetuning_type", "stage", "template", "quantization_bit", "lora_target", "cutoff_len"}:
        return "llamafactory"
    if keys & {"distributed_type", "compute_environment", "num_processes", "fsdp_config"} and "output_dir" not in keys:
        return "accelerate"
    if keys & {"zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size", "zero_allow_untested_optimizer"}:
        return "deepspeed"
    if keys & {"output_dir", "per_device_train_batch_size", "learning_rate", "num_train_epochs", "gradient_checkpointing"}:
        return "training_args"
    raise UsageError(
        f"{path}: not a config compat reads: none of the fields that mark a {', a '.join(TITLES.values())} "
        f"(its fields: {', '.join(sorted(keys)[:12]) or 'none'})"
    )


@dataclasses.dataclass(frozen=True)
class Fields:
    """matrix/preflight.toml: the fields each format accepts, with sources."""

    known: dict  # kind -> frozenset of field names

    @classmethod
    def load(cls, directory: Path) -> "Fields":
        doc, where = load_data(directory / "preflight.toml", KINDS)
        known = {}
        for kind in KINDS:
            table = doc.get(kind) or {}
            if not table.get("sources"):
                raise MatrixError([where("sources", f"[{kind}].sources", "missing: every field list cites where it was read", table=kind)])
            known[kind] = frozenset(table.get("fields", ()))
        return cls(known)


def family_of(name: str) -> str | None:
    low = name.lower()
    for pattern, family in FAMILY_PATTERNS:
        if re.search(pattern, low):
            return family
    return None


def size_of(name: str) -> str:
    """"8B" from "meta-llama/Llama-3.1-8B-Instruct"; "" when the name carries no size."""
    found = re.findall(r"(?<![\w.])(\d+(?:\.\d+)?)\s*[bB](?![a-zA-Z])", name.replace("-", " ").replace("_", " "))
    return f"{found[-1]}B" if found else ""


def _truthy(value) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "yes", "1"))


def _deepspeed_strategy(ds: dict) -> tuple[str | None, str]:
    """(strategy, why) for a DeepSpeed config: its ZeRO stage and where it offloads."""
    zero = ds.get("zero_optimization") or {}
    stage = zero.get("stage", 0) if isinstance(zero, dict) else 0
    offload = [k for k in ("offload_optimizer", "offload_param")
               if isinstance(zero.get(k), dict) and str(zero[k].get("device", "none")).lower() in ("cpu", "nvme")]
    if stage == 3:
        return ("zero3_offload" if offload else "zero3"), f"zero_optimization.stage = 3{', ' + ' + '.join(offload) if offload else ''}"
    if stage == 2:
        return "zero2", "zero_optimization.stage = 2" + (f" ({' + '.join(offload)} is not a cell of its own: run as zero2)" if offload else "")
    return None, f"zero_optimization.stage = {stage!r}: compat's cells have ZeRO stage 2 and 3"


def _deepspeed_precision(ds: dict) -> str | None:
    for p in ("bf16", "fp16"):
        if isinstance(ds.get(p), dict) and ds[p].get("enabled") is True:
            return p
    return None


def request(sources: list[Source], fields: Fields) -> Request:
    """What the configs ask for together: each file's fields sorted into used / not modelled /
    unknown, and the cell axes they decide."""
    req = Request()
    for src in sources:
        {"llamafactory": _llamafactory, "deepspeed": _deepspeed_file, "accelerate": _accelerate,
         "training_args": _training_args}[src.kind](src, req, fields)
    return req


def _sort(src: Source, req: Request, fields: Fields, used: set[str], known_extra: frozenset = frozenset()) -> None:
    known = fields.known[src.kind] | known_extra
    for key in src.data:
        label = f"{src.path.name}: {key}"
        if key in used:
            req.used.append(label)
        elif key in known:
            req.not_modelled.append(label)
        else:
            req.unknown.append(label)


def _precision_fields(src: Source, req: Request, used: set[str]) -> None:
    d = src.data
    for field, precision in (("bf16", "bf16"), ("pure_bf16", "bf16"), ("fp16", "fp16")):
        if field in d:
            used.add(field)
            if _truthy(d[field]):
                req.set("precision", precision, f"{src.path.name}: {field} = {d[field]}")


def _deepspeed_ref(src: Source, req: Request, value, used: set[str], fields: Fields) -> None:
    used.add("deepspeed")
    if isinstance(value, dict):
        ds, name = value, f"{src.path.name}: deepspeed"
    elif isinstance(value, str) and value.strip():
        path = Path(value)
        candidates = [path] if path.is_absolute() else [src.path.parent / path, Path.cwd() / path]
        found = next((c for c in candidates if c.is_file()), None)
        if found is None:
            raise UsageError(f"{src.path}: deepspeed: {value}: no such file (looked in {' and '.join(str(c.parent) for c in candidates)})")
        ds_src = read(found)
        ds, name = ds_src.data, str(found)
        _sort(ds_src, req, fields, {"zero_optimization"} | ({"fp16", "bf16"} & set(ds)))
    else:
        return
    _apply_deepspeed(ds, name, req)


def _apply_deepspeed(ds: dict, name: str, req: Request) -> None:
    req.deepspeed, req.deepspeed_from = ds, name
    strategy, why = _deepspeed_strategy(ds)
    if strategy:
        req.set("strategy", strategy, f"{Path(name).name}: {why}")
    else:
        req.notes.append(f"{Path(name).name}: {why}")
    precision = _deepspeed_precision(ds)
    if precision and "precision" not in req.axes:
        req.set("precision", precision, f"{Path(name).name}: {precision}.enabled = true")


def _fsdp_fields(src: Source, req: Request, used: set[str]) -> None:
    d = src.data
    if d.get("fsdp"):
        used.add("fsdp")
        req.fsdp["fsdp"] = d["fsdp"]
        version = (d.get("fsdp_config") or {}).get("version") if isinstance(d.get("fsdp_config"), dict) else None
        req.set("strategy", "fsdp2" if version == 2 else "fsdp", f"{src.path.name}: fsdp = {d['fsdp']!r}")
    if "fsdp_config" in d:
        used.add("fsdp_config")
        req.fsdp["fsdp_config"] = d["fsdp_config"]
    if req.fsdp:
        req.notes.append(f"{src.path.name}: fsdp / fsdp_config: the cell shards as compat's FSDP strategy does; "
                         "these settings are not yet applied as given")


def _llamafactory(src: Source, req: Request, fields: Fields) -> None:
    d, name, used = src.data, src.path.name, set()
    model = d.get("model_name_or_path")
    if isinstance(model, str):
        used.add("model_name_or_path")
        req.model_name = model
        family = family_of(model)
        if family:
            req.set("family", family, f"{name}: model_name_or_path = {model}")
        else:
            req.notes.append(f"{name}: model_name_or_path = {model}: no family compat has a tiny model of; the cell trains a llama")
        req.model_size = req.model_size or size_of(model)
    if "finetuning_type" in d:
        used.add("finetuning_type")
        ft = str(d["finetuning_type"]).lower()
        if ft in ("lora", "full"):
            req.set("method", ft, f"{name}: finetuning_type = {ft}")
        else:
            req.notes.append(f"{name}: finetuning_type = {d['finetuning_type']}: compat's cells are full or lora")
    bits = d.get("quantization_bit")
    if bits is not None:
        used.update({"quantization_bit", "quantization_method", "quantization_type", "double_quantization"} & set(d))
        method = str(d.get("quantization_method", "bitsandbytes")).lower()
        if method not in ("bitsandbytes", "bnb"):
            req.notes.append(f"{name}: quantization_method = {method}: compat quantizes with bitsandbytes only")
        elif bits == 8:
            req.set("quantization", "int8", f"{name}: quantization_bit = 8")
        elif bits == 4:
            kind = str(d.get("quantization_type", "nf4")).lower()
            q = kind + ("dq" if _truthy(d.get("double_quantization", False)) else "")
            req.set("quantization", q, f"{name}: quantization_bit = 4, quantization_type = {kind}"
                    + (", double_quantization" if q.endswith("dq") else ""))
        else:
            req.notes.append(f"{name}: quantization_bit = {bits}: bitsandbytes quantizes to 4 or 8 bits")
    _precision_fields(src, req, used)
    if "deepspeed" in d:
        _deepspeed_ref(src, req, d["deepspeed"], used, fields)
    _fsdp_fields(src, req, used)
    # LLaMA-Factory turns gradient checkpointing on unless told not to
    used |= {"disable_gradient_checkpointing"} & set(d)
    req.set("grad_ckpt", not _truthy(d.get("disable_gradient_checkpointing", False)),
            f"{name}: disable_gradient_checkpointing = {d.get('disable_gradient_checkpointing', False)} (LLaMA-Factory's default: on)")
    _fit_fields(src, req, used, ("cutoff_len",))
    _sort(src, req, fields, used, fields.known["training_args"])


def _fit_fields(src: Source, req: Request, used: set[str], seq_fields: tuple) -> None:
    d = src.data
    for f in seq_fields:
        if isinstance(d.get(f), int):
            used.add(f)
            req.fit["seq_len"] = d[f]
    if isinstance(d.get("per_device_train_batch_size"), int):
        used.add("per_device_train_batch_size")
        req.fit["batch"] = d["per_device_train_batch_size"]


def _deepspeed_file(src: Source, req: Request, fields: Fields) -> None:
    _apply_deepspeed(src.data, str(src.path), req)
    used = {"zero_optimization"} | ({"fp16", "bf16"} & set(src.data))
    _sort(src, req, fields, used)


def _accelerate(src: Source, req: Request, fields: Fields) -> None:
    d, name, used = src.data, src.path.name, set()
    kind = str(d.get("distributed_type", "NO")).upper()
    if "distributed_type" in d:
        used.add("distributed_type")
    if kind == "MULTI_GPU" or kind == "MULTI_CPU":
        req.set("strategy", "ddp", f"{name}: distributed_type = {kind}")
    elif kind == "FSDP":
        fc = d.get("fsdp_config") if isinstance(d.get("fsdp_config"), dict) else {}
        used |= {"fsdp_config"} & set(d)
        req.fsdp["accelerate_fsdp_config"] = fc
        req.notes.append(f"{name}: fsdp_config: the cell shards as compat's {'fsdp2' if fc.get('fsdp_version') == 2 else 'fsdp'} "
                         "strategy does (full shard, wrapped per decoder layer); these settings are not yet applied as given")
        req.set("strategy", "fsdp2" if fc.get("fsdp_version") == 2 else "fsdp", f"{name}: distributed_type = FSDP"
                + (", fsdp_version = 2" if fc.get("fsdp_version") == 2 else ""))
    elif kind == "DEEPSPEED":
        dc = d.get("deepspeed_config") if isinstance(d.get("deepspeed_config"), dict) else {}
        used |= {"deepspeed_config"} & set(d)
        if dc.get("deepspeed_config_file"):
            _deepspeed_ref(src, req, dc["deepspeed_config_file"], set(), fields)
        else:
            offload = [k for k in ("offload_optimizer_device", "offload_param_device") if str(dc.get(k, "none")).lower() in ("cpu", "nvme")]
            ds = {"zero_optimization": {"stage": dc.get("zero_stage", 0),
                                        **({"offload_optimizer": {"device": dc["offload_optimizer_device"]}} if "offload_optimizer_device" in offload else {}),
                                        **({"offload_param": {"device": dc["offload_param_device"]}} if "offload_param_device" in offload else {})}}
            _apply_deepspeed(ds, f"{name} (deepspeed_config)", req)
    if isinstance(d.get("num_processes"), int):
        used.add("num_processes")
        req.set("ranks", d["num_processes"], f"{name}: num_processes = {d['num_processes']}")
    mp = str(d.get("mixed_precision", "no")).lower()
    if "mixed_precision" in d:
        used.add("mixed_precision")
        if mp in ("fp16", "bf16"):
            req.set("precision", mp, f"{name}: mixed_precision = {mp}")
    _sort(src, req, fields, used)


def _training_args(src: Source, req: Request, fields: Fields) -> None:
    d, name, used = src.data, src.path.name, set()
    _precision_fields(src, req, used)
    if "deepspeed" in d:
        _deepspeed_ref(src, req, d["deepspeed"], used, fields)
    _fsdp_fields(src, req, used)
    if "gradient_checkpointing" in d:
        used.add("gradient_checkpointing")
        req.set("grad_ckpt", _truthy(d["gradient_checkpointing"]), f"{name}: gradient_checkpointing = {d['gradient_checkpointing']}")
    _fit_fields(src, req, used, ("max_seq_length", "max_length"))
    _sort(src, req, fields, used)


CPU_RANKS = 2  # on a CPU host a multi-card config runs on 2 ranks (processes)


def cell_for(req: Request, hardware: str, stack: str, gpus: int | None):
    """The cell the request amounts to on this hardware, and notes on what was chosen for it."""
    from harness.cell import DEFAULT_MODEL, Cell

    notes = []
    ranks = gpus or req.axes.get("ranks") or 1
    if hardware == "cpu" and ranks > CPU_RANKS:
        notes.append(f"{ranks} cards asked for: on this CPU host the cell runs {CPU_RANKS} ranks (processes)")
        ranks = CPU_RANKS
    strategy = req.axes.get("strategy") or ("ddp" if ranks > 1 else "single")
    if strategy == "ddp" and ranks == 1:
        strategy = "single"
    quantization = req.axes.get("quantization", "none")
    method = req.axes.get("method") or ("lora" if quantization != "none" else "full")
    family = req.axes.get("family", "llama")
    cell = Cell(hardware=hardware, stack=stack, precision=req.axes.get("precision", "fp32"), quantization=quantization,
                method=method, strategy=strategy, ranks=ranks, grad_ckpt=bool(req.axes.get("grad_ckpt", False)),
                model=DEFAULT_MODEL if family == "llama" else family)
    return cell, notes


def plan_text(sources: list[Source], req: Request, cell, notes: list[str]) -> str:
    out = ["Read:"]
    out += [f"  {s.path}  ({TITLES[s.kind]}, {len(s.data)} fields)" for s in sources]
    out += ["", f"Cell: {cell.id}"]
    for axis in ("family", "precision", "quantization", "method", "strategy", "ranks", "grad_ckpt"):
        if axis in req.why:
            out.append(f"  {axis:<13}{req.axes[axis]!s:<15}from {req.why[axis]}")
        else:
            out.append(f"  {axis:<13}{'':<15}not set: compat's default")
    if req.deepspeed is not None:
        out.append(f"  DeepSpeed config as given: {req.deepspeed_from}")
    if req.model_name:
        out.append(f"  model: {req.model_name}" + (f" ({req.model_size})" if req.model_size else ""))
    for title, items in (("Used", req.used), ("Not modelled (they do not change which cell runs)", req.not_modelled),
                         ("Unknown (not a field of that format as compat knows it)", req.unknown), ("Notes", req.notes + notes)):
        out += ["", f"{title}: {len(items)}"] + [f"  {i}" for i in items]
    return "\n".join(out) + "\n"


def result_text(rec: dict) -> str:
    """What the tiny run showed: its outcome, memory per card, error and the known issues it matched."""
    from harness import table

    out = ["", f"Outcome: {rec['outcome']}" + (f": {rec['reason']}" if rec.get("reason") else "")]
    out.append(f"  memory per card: {table.peak_memory(rec).replace('<br>', ', ')}")
    if rec.get("error"):
        out.append(f"  error: {rec['error']['signature']}")
    if rec.get("known_issues"):
        out.append(f"  known issues: {', '.join(rec['known_issues'])} (`compat explain` on the log tells their fixes)")
    out.append(f"  record {rec['id']}, log {rec.get('log', '')}")
    return "\n".join(out) + "\n"
