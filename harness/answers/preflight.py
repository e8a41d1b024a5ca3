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
silently ignored. A file that does not parse is an error naming file:line (exit code 2), and so is
one past the bounds of a config (MAX_CONFIG_BYTES, MAX_CONFIG_VALUES) or a count past any run (MOST).

A preset (matrix/presets/NAME/preset.toml) is a set of such configs, shipped, that mirrors a setup
users reported trouble with, with its sources; its variants each change one thing (a config file,
the stack, a setting) so the cells run side by side show what that one thing does.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import re
from pathlib import Path

from harness import tomldata
from harness.catalog import strategies
from harness.errors import MatrixError, UsageError
from harness.tomldata import TEXT, Key, NotAFile, Table, check, did_you_mean, load_data, open_data, read_regular

KINDS = ("llamafactory", "deepspeed", "accelerate", "training_args")
TITLES = {
    "llamafactory": "LLaMA-Factory training YAML",
    "deepspeed": "DeepSpeed JSON",
    "accelerate": "accelerate config",
    "training_args": "TrainingArguments",
}

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
    # the DeepSpeed JSONs given on the command line, by file name: a YAML's `deepspeed:` path that
    # is not there (relative to a LLaMA-Factory checkout) is the one given with its name
    given_deepspeed: dict = dataclasses.field(default_factory=dict)
    fsdp: dict = dataclasses.field(default_factory=dict)  # fsdp / fsdp_config as given
    model_name: str = ""
    model_size: str = ""  # "8B", from the model's name
    fit: dict = dataclasses.field(default_factory=dict)  # seq_len, batch, LoRA and optimizer settings: for compat fit
    # the settings compat fit took a tool's default for
    fit_defaults: list[str] = dataclasses.field(default_factory=list)
    train: dict = dataclasses.field(default_factory=dict)  # [settings.train] of the tiny run, from the configs
    used: list[str] = dataclasses.field(default_factory=list)  # "file: field"
    not_modelled: list[str] = dataclasses.field(default_factory=list)
    unknown: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)

    def set(self, axis: str, value, why: str) -> None:
        if axis in self.axes and self.axes[axis] != value:
            self.notes.append(f"{axis}: {why} overrides {self.why[axis]}")
        self.axes[axis] = value
        self.why[axis] = why


# what a config file may hold: LLaMA-Factory's examples are under 2 KB and 40 fields, with no YAML
# alias; far larger is no config, and an alias that stands for an alias of an alias... (a 500-byte
# "billion laughs") would be millions of values by the time it is shown
MAX_CONFIG_BYTES = 2**20
MAX_CONFIG_VALUES = 10_000  # keys and values, an alias counted as the values it stands for
SHOWN_CHARS = 200  # a config's value echoed in a line of the plan or a message: longer ones are cut


class _Refused(Exception):
    """What the YAML reader will not build, and where: (problem, a yaml Mark)."""


def read(path: Path) -> Source:
    """Parse one config file (JSON or YAML by its suffix; YAML also reads JSON) and tell its kind.
    A file of more than MAX_CONFIG_BYTES or MAX_CONFIG_VALUES is refused, before it is built."""
    try:
        text = read_regular(path, MAX_CONFIG_BYTES).decode("utf-8")
    except NotAFile as exc:
        raise UsageError(f"{path}: {exc}") from None
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a folder, not a config file") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not a text file ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read: {exc.strerror}") from None
    data = _json(path, text) if path.suffix.lower() == ".json" else _yaml(path, text)
    if not isinstance(data, dict):
        raise UsageError(
            f"{path}: a config is a mapping of fields at the top, not "
            f"{type(data).__name__ if data is not None else 'an empty file'}"
        )
    bad = [k for k in data if not isinstance(k, str)]
    if bad:
        raise UsageError(f"{path}: field names are text, not {_shown(bad[0], r=True)}")
    return Source(path, kind_of(path, data), data)


def _too_many(where: str) -> UsageError:
    return UsageError(
        f"{where}: more than {MAX_CONFIG_VALUES:,} keys and values (an alias counted as the values it stands for): "
        "not a training config"
    )


def _json(path: Path, text: str):
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
    except ValueError as exc:  # a number of more digits than Python converts (4,300)
        raise UsageError(f"{path}: not valid JSON: {str(exc).split(':')[0]}") from None
    except RecursionError:
        raise UsageError(f"{path}: nested too deeply to be a config") from None
    # JSON shares no value: each is counted once, keys included, as the YAML reader counts
    count, todo = 0, [data]
    while todo:
        item = todo.pop()
        count += 1
        if count > MAX_CONFIG_VALUES:
            raise _too_many(str(path))
        if isinstance(item, dict):
            todo += [*item, *item.values()]
        elif isinstance(item, list):
            todo += item
    return data


def _yaml(path: Path, text: str):
    import yaml

    try:
        return yaml.load(text, Loader=_yaml_loader())  # SafeLoader, counting
    except _Refused as exc:
        problem, mark = exc.args
        if problem is None:
            raise _too_many(f"{path}:{mark.line + 1}:{mark.column + 1}") from None
        raise UsageError(f"{path}:{mark.line + 1}:{mark.column + 1}: {problem}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        raise UsageError(f"{path}{at}: not valid YAML: {exc.problem or exc.context}") from None
    except (yaml.YAMLError, RecursionError) as exc:
        raise UsageError(
            f"{path}: not valid YAML: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        ) from None
    except ValueError as exc:  # a number of more digits than Python converts (4,300)
        raise UsageError(f"{path}: not valid YAML: {str(exc).split(':')[0]}") from None


@functools.cache
def _yaml_loader():
    """yaml's SafeLoader, held to what a config is: it counts the values it composes, an alias as
    the values it stands for, and stops past MAX_CONFIG_VALUES (a "billion laughs" ends at once,
    before a value is built); an alias inside the value it names (a value that holds itself) is
    refused, as are !!binary and !!set (no config holds bytes or sets, and neither is JSON, as the
    DeepSpeed and FSDP settings handed to the run must be); a date is kept as the text it is."""
    import yaml

    class Loader(yaml.SafeLoader):
        def __init__(self, stream):
            super().__init__(stream)
            self.values = 0  # composed so far, each alias as the values it stands for
            self.sizes: dict[int, int] = {}  # id(node) -> its values, itself included, once composed

        def compose_node(self, parent, index):
            start = self.peek_event().start_mark
            alias = self.check_event(yaml.AliasEvent)
            node = super().compose_node(parent, index)
            if alias:
                size = self.sizes.get(id(node))
                if size is None:
                    raise _Refused("an alias inside the value it names: a value that holds itself", start)
            else:
                inside = node.value if isinstance(node, yaml.SequenceNode) else ()
                if isinstance(node, yaml.MappingNode):
                    inside = [n for pair in node.value for n in pair]
                size = 1 + sum(self.sizes[id(n)] for n in inside)
                self.sizes[id(node)] = size
            self.values += size if alias else 1
            if self.values > MAX_CONFIG_VALUES:
                raise _Refused(None, start)
            return node

    def refused(loader, node):
        raise _Refused(f"{node.tag.rsplit(':', 1)[-1]}: a value no training config holds", node.start_mark)

    Loader.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str)
    Loader.add_constructor("tag:yaml.org,2002:binary", refused)
    Loader.add_constructor("tag:yaml.org,2002:set", refused)
    return Loader


def _shown(value, r: bool = False, limit: int = SHOWN_CHARS) -> str:
    """A config's value as a line shows it (str, or repr where `r`), cut to `limit` characters."""
    text = repr(value) if r else str(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def kind_of(path: Path, data: dict) -> str:
    keys = set(data)
    if keys & {"finetuning_type", "stage", "template", "quantization_bit", "lora_target", "cutoff_len"}:
        return "llamafactory"
    if keys & {"distributed_type", "compute_environment", "num_processes", "fsdp_config"} and "output_dir" not in keys:
        return "accelerate"
    if keys & {
        "zero_optimization",
        "train_micro_batch_size_per_gpu",
        "train_batch_size",
        "zero_allow_untested_optimizer",
    }:
        return "deepspeed"
    if keys & {
        "output_dir",
        "per_device_train_batch_size",
        "learning_rate",
        "num_train_epochs",
        "gradient_checkpointing",
    }:
        return "training_args"
    raise UsageError(
        f"{path}: not a config compat reads: none of the fields that mark a {', a '.join(TITLES.values())} "
        f"(its fields: {', '.join(_shown(k) for k in sorted(keys)[:12]) or 'none'})"
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
                raise MatrixError(
                    [
                        where(
                            "sources",
                            f"[{kind}].sources",
                            "missing: every field list cites where it was read",
                            table=kind,
                        )
                    ]
                )
            known[kind] = frozenset(table.get("fields", ()))
        return cls(known)


def family_of(name: str) -> str | None:
    low = name.lower()
    for pattern, family in FAMILY_PATTERNS:
        if re.search(pattern, low):
            return family
    return None


def size_of(name: str) -> str:
    """ "8B" from "meta-llama/Llama-3.1-8B-Instruct"; "" when the name carries no size (a number of
    more than 5 digits is no model's size in billions)."""
    spaced = name.replace("-", " ").replace("_", " ")
    found = re.findall(r"(?<![\w.])(\d{1,5}(?:\.\d{1,3})?)\s*[bB](?![a-zA-Z])", spaced)
    return f"{found[-1]}B" if found else ""


def _truthy(value) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "yes", "1"))


def _deepspeed_strategy(ds: dict) -> tuple[str | None, str]:
    """(strategy, why) for a DeepSpeed config: its ZeRO stage and where it offloads."""
    zero = ds.get("zero_optimization") or {}
    if not isinstance(zero, dict):
        return None, f"zero_optimization = {_shown(zero, r=True)}: DeepSpeed takes a mapping (stage, offload_*)"
    stage = zero.get("stage", 0)
    offload = [
        k
        for k in ("offload_optimizer", "offload_param")
        if isinstance(zero.get(k), dict) and str(zero[k].get("device", "none")).lower() in ("cpu", "nvme")
    ]
    whole = (isinstance(stage, int) and not isinstance(stage, bool)) or (
        isinstance(stage, float) and stage.is_integer()
    )
    found = strategies.for_deepspeed(int(stage), bool(offload)) if whole else None
    if found is None:
        stages = " and ".join(str(n) for n in sorted({s.zero_stage for s in strategies.TABLE if s.deepspeed}))
        return None, f"zero_optimization.stage = {_shown(stage, r=True)}: compat's cells have ZeRO stage {stages}"
    said = f"zero_optimization.stage = {found.zero_stage}"
    if found.offload or not offload:
        return found.name, said + (f", {' + '.join(offload)}" if offload else "")
    return found.name, f"{said} ({' + '.join(offload)} is not a cell of its own: run as {found.name})"


def _deepspeed_precision(ds: dict) -> str | None:
    for p in ("bf16", "fp16"):
        if isinstance(ds.get(p), dict) and ds[p].get("enabled") is True:
            return p
    return None


def request(sources: list[Source], fields: Fields) -> Request:
    """What the configs ask for together: each file's fields sorted into used / not modelled /
    unknown, and the cell axes they decide."""
    req = Request(given_deepspeed={s.path.name: s for s in sources if s.kind == "deepspeed"})
    # an accelerate config first: the training arguments' fp16/bf16 then override its
    # mixed_precision, as at run time (TrainingArguments sets ACCELERATE_MIXED_PRECISION itself)
    for src in sorted(sources, key=lambda s: s.kind != "accelerate"):
        {
            "llamafactory": _llamafactory,
            "deepspeed": _deepspeed_file,
            "accelerate": _accelerate,
            "training_args": _training_args,
        }[src.kind](src, req, fields)
    return req


def _sort(src: Source, req: Request, fields: Fields, used: set[str], known_extra: frozenset = frozenset()) -> None:
    known = fields.known[src.kind] | known_extra
    for key in src.data:
        label = f"{src.path.name}: {_shown(key)}"
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
                req.set("precision", precision, f"{src.path.name}: {field} = {_shown(d[field])}")


def _deepspeed_ref(src: Source, req: Request, value, used: set[str], fields: Fields) -> None:
    used.add("deepspeed")
    if isinstance(value, dict):
        ds, name = value, f"{src.path.name}: deepspeed"
    elif isinstance(value, str) and value.strip():
        path = Path(value)
        candidates = [path] if path.is_absolute() else [src.path.parent / path, Path.cwd() / path]
        found = next((c for c in candidates if _is_file(c)), None)
        given = req.given_deepspeed.get(path.name) if found is None else None
        if found is None and given is None:
            raise UsageError(
                f"{src.path}: deepspeed: {_shown(value)}: no such file (looked in "
                f"{' and '.join(str(c.parent) for c in candidates)}); give the JSON beside the YAML: "
                f"compat preflight {src.path.name} PATH/TO/{path.name}"
            )
        if given is not None:  # named on the command line: read, and its fields sorted, as its own file
            ds, name = given.data, f"{given.path} (given for {_shown(value)})"
        else:
            ds_src = read(found)
            ds, name = ds_src.data, str(found)
            _sort(ds_src, req, fields, {"zero_optimization"} | ({"fp16", "bf16"} & set(ds)))
    else:
        return
    _apply_deepspeed(ds, name, req)


def _is_file(path: Path) -> bool:
    """A file there; False for a name the system cannot even look up (longer than a path may be)."""
    try:
        return path.is_file()
    except OSError:
        return False


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


FSDP_KEY = "fsdp"  # TrainingArguments' own argument (not a strategy's name)


def _fsdp_fields(src: Source, req: Request, used: set[str]) -> None:
    d = src.data
    if d.get(FSDP_KEY):
        used.add(FSDP_KEY)
        req.fsdp[FSDP_KEY] = d[FSDP_KEY]
        version = (d.get("fsdp_config") or {}).get("version") if isinstance(d.get("fsdp_config"), dict) else None
        said = f"{src.path.name}: fsdp = {_shown(d[FSDP_KEY], r=True)}"
        req.set("strategy", strategies.for_trainer_fsdp(version).name, said)
    if "fsdp_config" in d:
        used.add("fsdp_config")
        req.fsdp["fsdp_config"] = d["fsdp_config"]


def _llamafactory(src: Source, req: Request, fields: Fields) -> None:
    d, name, used = src.data, src.path.name, set()
    model = d.get("model_name_or_path")
    if isinstance(model, str):
        used.add("model_name_or_path")
        req.model_name = model
        family = family_of(model)
        if family:
            req.set("family", family, f"{name}: model_name_or_path = {_shown(model)}")
        else:  # said in the family row and in the notes: the cell trains another model than theirs
            req.set(
                "family",
                "llama",
                f"{name}: model_name_or_path = {_shown(model)}: no tiny model of its family; a llama instead",
            )
            req.notes.append(
                f"{name}: model_name_or_path = {_shown(model)}: no family compat has a tiny model of; the cell trains "
                "a llama"
            )
        req.model_size = req.model_size or size_of(model)
    if "finetuning_type" in d:
        used.add("finetuning_type")
        ft = str(d["finetuning_type"]).lower()
        if ft in ("lora", "full"):
            req.set("method", ft, f"{name}: finetuning_type = {ft}")
        else:
            said = _shown(d["finetuning_type"])
            req.notes.append(f"{name}: finetuning_type = {said}: compat's cells are full or lora")
    _quantization_fields(src, req, used)
    _precision_fields(src, req, used)
    if "deepspeed" in d:
        _deepspeed_ref(src, req, d["deepspeed"], used, fields)
    _fsdp_fields(src, req, used)
    # LLaMA-Factory turns gradient checkpointing on unless told not to
    used |= {"disable_gradient_checkpointing"} & set(d)
    req.set(
        "grad_ckpt",
        not _truthy(d.get("disable_gradient_checkpointing", False)),
        f"{name}: disable_gradient_checkpointing = {_shown(d.get('disable_gradient_checkpointing', False))} "
        "(LLaMA-Factory's default: on)",
    )
    _fit_fields(src, req, used, ("cutoff_len",))
    _fit_options(src, req, used, "LLaMA-Factory", lora=req.axes.get("method") != "full")
    req.fit["path"] = "llamafactory"  # what it holds in which dtype (compat fit's phases.PATHS)
    _sort(src, req, fields, used, fields.known["training_args"])


def _quantization_fields(src: Source, req: Request, used: set[str]) -> None:
    """LLaMA-Factory's quantization_bit, _method, _type and double_quantization: the cell's
    quantization, or a note where bitsandbytes has no such one."""
    d, name = src.data, src.path.name
    bits = d.get("quantization_bit")
    if bits is None:
        return
    used.update({"quantization_bit", "quantization_method", "quantization_type", "double_quantization"} & set(d))
    method = str(d.get("quantization_method", "bitsandbytes")).lower()
    if method not in ("bitsandbytes", "bnb"):
        req.notes.append(f"{name}: quantization_method = {_shown(method)}: compat quantizes with bitsandbytes only")
    elif bits == 8:
        req.set("quantization", "int8", f"{name}: quantization_bit = 8")
    elif bits == 4 and str(d.get("quantization_type", "nf4")).lower() not in ("nf4", "fp4"):
        req.notes.append(
            f"{name}: quantization_type = {_shown(d['quantization_type'])}: bitsandbytes quantizes 4-bit as nf4 or fp4"
        )
    elif bits == 4:
        kind = str(d.get("quantization_type", "nf4")).lower()
        q = kind + ("dq" if _truthy(d.get("double_quantization", False)) else "")
        req.set(
            "quantization",
            q,
            f"{name}: quantization_bit = 4, quantization_type = {kind}"
            + (", double_quantization" if q.endswith("dq") else ""),
        )
    else:
        req.notes.append(f"{name}: quantization_bit = {_shown(bits)}: bitsandbytes quantizes to 4 or 8 bits")


# the whole numbers read from the configs, each from 1 to far past what any run uses: a bound that
# only refuses what is no setting at all (-5, 10**20) before it reaches the cell or compat fit's sums
MOST = {
    "cutoff_len": 2**24,  # tokens: 16M, past the longest context of any model (10M)
    "max_seq_length": 2**24,
    "max_length": 2**24,
    "per_device_train_batch_size": 2**16,
    "gradient_accumulation_steps": 2**16,
    "lora_rank": 2**16,  # past the hidden size of any model (16k)
    "num_processes": 2**16,  # processes, one a card
}


def whole_number(src: Source, field: str) -> int | None:
    """The whole number a config gives `field` (one of MOST), None where it gives none (absent or
    null); anything else (text, a fraction, 0 or less, more than MOST) is a UsageError naming the
    file and the field."""
    value = src.data.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MOST[field]:
        raise UsageError(
            f"{src.path}: {field} = {_shown(value, r=True)}: must be a whole number from 1 to {MOST[field]:,}"
        )
    return value


def _fit_fields(src: Source, req: Request, used: set[str], seq_fields: tuple) -> None:
    steps = whole_number(src, "gradient_accumulation_steps")
    if steps is not None:
        used.add("gradient_accumulation_steps")
        req.train["gradient_accumulation_steps"] = steps
    for f in seq_fields:
        seq_len = whole_number(src, f)
        if seq_len is not None:
            used.add(f)
            req.fit["seq_len"] = seq_len
    batch = whole_number(src, "per_device_train_batch_size")
    if batch is not None:
        used.add("per_device_train_batch_size")
        req.fit["batch"] = batch


def _fit_options(src: Source, req: Request, used: set[str], tool: str, lora: bool) -> None:
    """The settings compat fit counts beyond the cell's axes: LoRA's rank, target modules and
    modules trained whole (LLaMA-Factory's lora_rank, lora_target, additional_target: defaults 8
    and "all", hparams/finetuning_args.py), the optimizer (`optim`, default adamw_torch), pure
    bf16 and gradient accumulation. A rank or a step count that is no whole number in range is an
    error (whole_number); another value fit cannot count is a note, and fit keeps its default."""
    from harness.answers import fit

    d, name = src.data, src.path.name
    steps = whole_number(src, "gradient_accumulation_steps")
    if steps is not None:
        req.fit["grad_accum"] = steps
    rank = whole_number(src, "lora_rank")
    if rank is not None:
        used.add("lora_rank")
        req.fit["lora_r"] = rank
    if _truthy(d.get("pure_bf16", False)):
        req.fit["pure_bf16"] = True
    for field in ("packing", "neat_packing"):
        if field in d:
            used.add(field)
            if _truthy(d[field]):
                req.fit["lengths"] = "fixed"  # one length throughout: the allocator's slack is that regime's
                req.notes.append(
                    f"{name}: {field} = {_shown(d[field])}: compat fit counts the same worst-case peak as padding to "
                    "the cutoff length (a batch of full-length sequences), and the allocator slack of fixed lengths"
                )
    readers = (
        ("lora_target", "lora_targets", fit.lora_targets),
        ("additional_target", "modules_to_save", fit.saved_modules),
        ("optim", "optimizer", fit.optimizer_name),
    )
    for field, key, read in readers:
        if field not in d:
            continue
        used.add(field)
        try:
            req.fit[key] = read(d[field])
        except UsageError as exc:
            req.notes.append(
                f"{name}: {field} = {_shown(d[field], r=True)}: compat fit cannot count it ({_shown(exc)}); it counts "
                "the default"
            )
    if lora and "lora_rank" not in d:
        req.fit_defaults.append(f"{name}: lora_rank {fit.LORA_R} ({tool}'s default)")
    if lora and "lora_target" not in d:
        req.fit["lora_targets"] = fit.LINEAR
        req.fit_defaults.append(f"{name}: lora_target all, every linear layer ({tool}'s default)")
    if "optim" not in d:
        req.fit_defaults.append(f"{name}: optim adamw_torch ({tool}'s default)")


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
        req.set("strategy", strategies.data_parallel(2).name, f"{name}: distributed_type = {_shown(kind)}")
    elif kind == "FSDP":
        fc = d.get("fsdp_config") if isinstance(d.get("fsdp_config"), dict) else {}
        used |= {"fsdp_config"} & set(d)
        req.fsdp["accelerate_fsdp_config"] = fc
        req.set(
            "strategy",
            strategies.for_trainer_fsdp(fc.get("fsdp_version")).name,
            f"{name}: distributed_type = FSDP" + (", fsdp_version = 2" if fc.get("fsdp_version") == 2 else ""),
        )
    elif kind == "DEEPSPEED":
        dc = d.get("deepspeed_config") if isinstance(d.get("deepspeed_config"), dict) else {}
        used |= {"deepspeed_config"} & set(d)
        if "zero3_init_flag" in dc:  # accelerate's switch for from_pretrained under deepspeed.zero.Init
            req.fit["load"] = "sharded" if _truthy(dc["zero3_init_flag"]) else "whole"
        if dc.get("deepspeed_config_file"):
            _deepspeed_ref(src, req, dc["deepspeed_config_file"], set(), fields)
        else:
            offload = [
                k
                for k in ("offload_optimizer_device", "offload_param_device")
                if str(dc.get(k, "none")).lower() in ("cpu", "nvme")
            ]
            ds = {
                "zero_optimization": {
                    "stage": dc.get("zero_stage", 0),
                    **(
                        {"offload_optimizer": {"device": dc["offload_optimizer_device"]}}
                        if "offload_optimizer_device" in offload
                        else {}
                    ),
                    **(
                        {"offload_param": {"device": dc["offload_param_device"]}}
                        if "offload_param_device" in offload
                        else {}
                    ),
                }
            }
            _apply_deepspeed(ds, f"{name} (deepspeed_config)", req)
    processes = whole_number(src, "num_processes")
    if processes is not None:
        used.add("num_processes")
        req.set("ranks", processes, f"{name}: num_processes = {processes}")
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
        req.set(
            "grad_ckpt",
            _truthy(d["gradient_checkpointing"]),
            f"{name}: gradient_checkpointing = {_shown(d['gradient_checkpointing'])}",
        )
    _fit_fields(src, req, used, ("max_seq_length", "max_length"))
    _fit_options(src, req, used, "the Trainer", lora=False)
    if "gradient_checkpointing" not in d:
        req.fit_defaults.append(f"{name}: gradient checkpointing off (the Trainer's default)")
    _sort(src, req, fields, used)


# accelerate's fsdp_sharding_strategy (a name, or the number older accelerate configs write)
SHARDING = {"1": "full_shard", "2": "shard_grad_op", "3": "no_shard", "4": "hybrid_shard", "5": "hybrid_shard_zero2"}


def fsdp_args(req: Request) -> dict | None:
    """The FSDP settings of the configs as TrainingArguments' `fsdp` and `fsdp_config`, the form
    the tiny run hands the Trainer: as given where they are TrainingArguments already; an
    accelerate config's fsdp_config turned into that form key for key. None without FSDP settings."""
    if "accelerate_fsdp_config" in req.fsdp:
        fc = dict(req.fsdp["accelerate_fsdp_config"])
        sharding = str(fc.pop("fsdp_sharding_strategy", "FULL_SHARD"))
        words = [SHARDING.get(sharding, sharding.lower())]
        if _truthy(fc.pop("fsdp_offload_params", False)):
            words.append("offload")
        if str(fc.pop("fsdp_auto_wrap_policy", "TRANSFORMER_BASED_WRAP")).upper() != "NO_WRAP":
            words.append("auto_wrap")
        return {FSDP_KEY: " ".join(words), "fsdp_config": fc}
    if FSDP_KEY in req.fsdp:
        return {
            FSDP_KEY: req.fsdp[FSDP_KEY],
            **({"fsdp_config": req.fsdp["fsdp_config"]} if "fsdp_config" in req.fsdp else {}),
        }
    return None


CPU_RANKS = 2  # on a CPU host a multi-card config runs on 2 ranks (processes)


def cell_for(req: Request, hardware: str, stack: str, gpus: int | None, cards_here: int = 0):
    """The cell the request amounts to on this hardware (with `cards_here` cards of it on a GPU
    host), and notes on what was chosen for it."""
    from harness.catalog.cell import DEFAULT_MODEL, Cell

    notes = []
    ranks = gpus or req.axes.get("ranks") or 1
    strategy = req.axes.get("strategy") or strategies.data_parallel(ranks).name
    if hardware == "cpu" and ranks > CPU_RANKS:
        notes.append(f"{ranks} cards asked for: on this CPU host the cell runs {CPU_RANKS} ranks (processes)")
        ranks = CPU_RANKS
    elif hardware != "cpu" and ranks > cards_here >= 1:
        plural = "s" if cards_here > 1 else ""
        known = strategies.BY_NAME.get(strategy)
        least = known.min_ranks if known else 1
        if known is not None and known.trainer_fsdp and cards_here < least:
            notes.append(
                f"{ranks} cards asked for: this host has {cards_here} {hardware} card; FSDP shards over {least} or "
                "more, "
                f"so the cell asks for {least} and is recorded as unsupported here"
            )
            ranks = least
        else:
            notes.append(
                f"{ranks} cards asked for: this host has {cards_here} {hardware} card{plural}, so the cell runs "
                f"{cards_here} rank{plural}; memory per card is measured at {cards_here}, not {ranks}, ways of sharding"
            )
            ranks = cards_here
    if strategy == strategies.data_parallel(2).name:
        strategy = strategies.data_parallel(ranks).name
    quantization = req.axes.get("quantization", "none")
    method = req.axes.get("method") or ("lora" if quantization != "none" else "full")
    family = req.axes.get("family", "llama")
    cell = Cell(
        hardware=hardware,
        stack=req.axes.get("stack", stack),
        precision=req.axes.get("precision", "fp32"),
        quantization=quantization,
        method=method,
        strategy=strategy,
        ranks=ranks,
        grad_ckpt=bool(req.axes.get("grad_ckpt", False)),
        expandable_segments=bool(req.axes.get("expandable_segments", False)),
        model=DEFAULT_MODEL if family == "llama" else family,
    )
    return cell, notes


def plan_text(
    sources: list[Source], req: Request, cell, notes: list[str], only: set[str] | None = None, changes: tuple = ()
) -> str:
    """The mapping, axis by axis, and every field of every file read. `only`: list the fields of
    these files alone (a preset's later variant: the files it adds); `changes`: the settings the
    variant changes."""
    mine = [s for s in sources if only is None or s.path.name in only]
    out = ["Read:"] if only is None else [f"Read, besides the first variant's files: {'' if mine else 'nothing'}"]
    out += [f"  {s.path}  ({TITLES[s.kind]}, {len(s.data)} fields)" for s in mine]
    out += ["", f"Cell: {cell.id}"]
    for axis in (
        "stack",
        "family",
        "precision",
        "quantization",
        "method",
        "strategy",
        "ranks",
        "grad_ckpt",
        "expandable_segments",
    ):
        if axis in ("stack", "expandable_segments") and axis not in req.why:
            continue  # no config format sets these: only a preset's variant does
        if axis in req.why:
            out.append(f"  {axis:<20}{req.axes[axis]!s:<15}from {req.why[axis]}")
        else:
            out.append(f"  {axis:<20}{'':<15}not set: compat's default")
    if req.deepspeed is not None:
        out.append(f"  DeepSpeed config as given: {req.deepspeed_from}")
    if fsdp_args(req) and strategies.get(cell.strategy).trainer_fsdp:
        given = _shown(json.dumps(fsdp_args(req)), limit=10 * SHOWN_CHARS)
        out.append(f"  FSDP settings as given (TrainingArguments form): {given}")
    if req.train:
        out.append(
            f"  tiny run's training settings from the configs: {', '.join(f'{k} = {v}' for k, v in req.train.items())}"
        )
    if req.model_name:
        out.append(f"  model: {_shown(req.model_name)}" + (f" ({req.model_size})" if req.model_size else ""))
    if changes:
        out.append(f"  the variant's settings of the tiny run: {', '.join(changes)}")
    names = {s.path.name for s in mine}

    def listed(items: list[str]) -> list[str]:  # every field, or those of the files a later variant adds
        return items if only is None else [i for i in items if i.split(": ", 1)[0] in names]

    for title, items in (
        ("Used", listed(req.used)),
        ("Not modelled (they do not change which cell runs)", listed(req.not_modelled)),
        ("Unknown (not a field of that format as compat knows it)", listed(req.unknown)),
        ("Notes", req.notes + notes),
    ):
        out += ["", f"{title}: {len(items)}"] + [f"  {i}" for i in items]
    return "\n".join(out) + "\n"


def result_text(rec: dict) -> str:
    """What the tiny run showed: its outcome, memory per card, error and the known issues it matched."""
    from harness.evidence import summary

    out = ["", f"Outcome: {rec['outcome']}" + (f": {rec['reason']}" if rec.get("reason") else "")]
    out.append(f"  memory per card: {summary.peak_memory(rec).replace('<br>', ', ')}")
    if growth_text(rec) != "—":
        out.append(f"  memory from the first training step to the last (rank 0): {growth_text(rec)}")
    if rec.get("error"):
        out.append(f"  error: {rec['error']['signature']}")
    if rec.get("known_issues"):
        out.append(f"  known issues: {', '.join(rec['known_issues'])} (`compat explain` on the log tells their fixes)")
    out.append(f"  record {rec['id']}, log {rec.get('log', '')}")
    return "\n".join(out) + "\n"


# -- presets -------------------------------------------------------------------------------------

# cell fields a variant may set, laid over what the configs map to
VARIANT_AXES = ("stack", "precision", "quantization", "method", "strategy", "grad_ckpt", "expandable_segments")
_SAYS_WHAT = "missing: a preset says what it is and where it comes from"
_NO_CONFIGS = "missing: the configs the preset runs"
_NONBLANK = tomldata.kind(lambda v: isinstance(v, str) and v.strip(), "must be a non-empty string")
_CARDS = tomldata.kind(
    lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
    "{r} must be a whole number of cards, 1 or more",
)
_CONFIGS = tomldata.kind(
    lambda v: isinstance(v, list) and all(isinstance(x, str) and x for x in v),
    "must be a list of file names in the preset's folder",
)
_VARIANTS = tomldata.kind(
    lambda v: isinstance(v, list) and v and all(isinstance(x, dict) for x in v),
    "must be one or more [[variant]] tables",
)
# matrix/presets/NAME/preset.toml, and each of its [[variant]] tables
PRESET = Table(
    {
        "description": Key.of(_NONBLANK, required=True, missing=_SAYS_WHAT),
        "configs": Key.of(_CONFIGS, tomldata.kind(bool, _NO_CONFIGS), required=True, missing=_NO_CONFIGS),
        "gpus": Key.of(_CARDS),
        "gpu": Key.of(tomldata.kind(lambda v: isinstance(v, str), "must be a non-empty string")),
        "sources": Key.of(
            tomldata.kind(
                lambda v: isinstance(v, list) and v and all(isinstance(x, str) and x.startswith("https://") for x in v),
                "must list the reports the preset mirrors, as https:// addresses",
            ),
            required=True,
            missing="must list the reports the preset mirrors, as https:// addresses",
        ),
        "settings": Key.of(),  # laid over defaults.toml's, each key checked there (settings_over)
        "variant": Key.of(_VARIANTS),
    },
    unknown="unknown key{hint}; a preset has {keys}",
)
VARIANT = Table(
    {
        "name": Key.of(
            _NONBLANK,
            tomldata.kind(
                lambda v: re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", v), "{r}: lower-case letters, digits, '_', '.' and '-'"
            ),
            required=True,
            missing=_SAYS_WHAT,
        ),
        "description": Key.of(TEXT),
        "configs": Key.of(_CONFIGS),
        "gpus": Key.of(_CARDS),
        "settings": Key.of(),
        **{axis: Key.of() for axis in VARIANT_AXES},  # each checked against matrix/axes.toml (check_axis_value)
    }
)
_PRESET_LABELS = {"variant": "[[variant]]"}


@dataclasses.dataclass(frozen=True)
class Variant:
    name: str
    description: str
    configs: tuple[Path, ...]  # read after the preset's own
    axes: dict  # cell field -> value
    settings: dict  # the tiny run's settings: defaults.toml, the preset's [settings], then the variant's
    changes: tuple[str, ...] = ()  # the variant's own settings, as "train.padding = max_length"
    gpus: int | None = None  # cards, where the variant differs from the preset in that


@dataclasses.dataclass(frozen=True)
class Preset:
    name: str
    description: str
    configs: tuple[Path, ...]
    gpus: int  # the cards the reported setup had
    gpu: str  # the card it was reported on (for the fit prediction), or ""
    sources: tuple[str, ...]
    variants: tuple[Variant, ...]


def preset_names(matrix_dir: Path) -> list[str]:
    folder = matrix_dir / "presets"
    return sorted(p.parent.name for p in folder.glob("*/preset.toml")) if folder.is_dir() else []


def load_preset(matrix_dir: Path, name: str, data) -> Preset:
    """matrix/presets/NAME/preset.toml, checked against `data` (MatrixData: axes, stacks and
    defaults); every problem is reported at once, each with file:line."""
    from harness.catalog.matrix import settings_over

    names = preset_names(matrix_dir)
    if name not in names:
        raise UsageError(
            f"no preset {name!r}{did_you_mean(name, names)}; matrix/presets/ has {', '.join(names) or 'none'}"
        )
    folder = matrix_dir / "presets" / name
    doc, where = open_data(folder / "preset.toml")
    problems: list[str] = []
    check(doc, PRESET, lambda key, msg: where(key, _PRESET_LABELS.get(key, key), msg), problems)
    configs = _config_files(doc, folder, lambda msg: where("configs", "configs", msg), problems)
    settings = settings_over(data.defaults, doc.get("settings", {}), "settings", where, problems)
    raw = doc.get("variant", [{"name": "as-given"}])
    variants: list[Variant] = []
    for n, v in enumerate(raw if _VARIANTS.problem(raw) is None else []):
        variants.append(_variant(v, n, folder, settings, data, where, problems, [x.name for x in variants]))
    if problems:
        raise MatrixError(problems)
    return Preset(
        name,
        doc["description"],
        configs,
        doc.get("gpus", 1),
        doc.get("gpu", ""),
        tuple(doc["sources"]),
        tuple(variants),
    )


def _config_files(values: dict, folder: Path, at, problems: list[str]) -> tuple[Path, ...]:
    """The config files a preset or variant names (already checked to be a list of names), each
    in the preset's folder."""
    names = values.get("configs", [])
    if _CONFIGS.problem(names):
        return ()
    missing = [v for v in names if not (folder / v).is_file()]
    if missing:
        problems.append(at(f"no such file in {folder}: {', '.join(missing)}"))
    return tuple(folder / v for v in names)


def _variant(
    v: dict, n: int, folder: Path, settings: dict, data, where, problems: list[str], earlier: list[str]
) -> "Variant":
    """A preset's n-th [[variant]], checked; its settings laid over the preset's."""
    from harness.catalog.matrix import check_axis_value, settings_over

    label = f"[[variant]] #{n + 1}"
    at = functools.partial(where, table="variant", nth=n)
    check(v, VARIANT, lambda key, msg: at(key, f"{label}.{key}", msg), problems)
    vname = v.get("name") if isinstance(v.get("name"), str) else ""
    if vname and vname in earlier:
        problems.append(at("name", f"{label}.name", f"{vname!r} is the name of an earlier variant"))
    axes = {
        axis: v[axis]
        for axis in VARIANT_AXES
        if axis in v and check_axis_value(data, axis, v[axis], at, f"{label}.{axis}", problems)
    }
    own = settings_over(settings, v.get("settings", {}), "variant.settings", where, problems)
    changes = tuple(
        f"{part}.{k} = {val!r}"
        for part, sub in (v.get("settings") or {}).items()
        if isinstance(sub, dict)
        for k, val in sub.items()
    )
    configs = _config_files(v, folder, lambda msg: at("configs", f"{label}.configs", msg), problems)
    return Variant(
        vname,
        v.get("description", "") if isinstance(v.get("description", ""), str) else "",
        configs,
        axes,
        own,
        changes,
        v.get("gpus") if _CARDS.problem(v.get("gpus", 1)) is None else None,
    )


@dataclasses.dataclass
class Job:
    """One cell to run: a preset's variant (None for the user's own configs), what was read for
    it, what it asks for, the cell on this host and the notes on how it was chosen."""

    variant: Variant | None
    sources: list[Source]
    req: Request
    cell: object
    notes: list[str]


def bitsandbytes_note(cell, stacks: dict) -> str | None:
    """Where a cell quantizes on a stack without bitsandbytes, what to run instead: the stacks of
    matrix/stacks.toml that pin it. None where the stack has it (or the cell does not quantize)."""
    if cell.quantization == "none":
        return None
    stack = stacks[cell.stack]
    if stack.current:
        import importlib.util

        if importlib.util.find_spec("bitsandbytes") is not None:
            return None
        lacks = f"the `{stack.name}` stack (the interpreter compat runs under) has none installed"
    elif "bitsandbytes" in dict(stack.packages):
        return None
    else:
        lacks = f"stack {stack.name} pins none"
    have = [s.name for s in stacks.values() if not s.current and "bitsandbytes" in dict(s.packages)]
    where = f"run with --stack {have[0]} (the stacks with it: {', '.join(have)}), or " if have else ""
    return f"quantization {cell.quantization} needs bitsandbytes and {lacks}: {where}install bitsandbytes beside compat"


def jobs_for(
    preset: Preset | None,
    configs: list[Path],
    fields: Fields,
    hardware: str,
    stack: str,
    gpus: int | None,
    cards_here: int,
) -> list[Job]:
    """The cells the user's configs (or each variant of a preset) amount to on this host. Cards:
    `gpus` (--gpus) where given, else the variant's, else the preset's, else the configs'."""
    jobs = []
    for variant in preset.variants if preset else (None,):
        sources = [read(path) for path in (preset.configs + variant.configs if variant else configs)]
        req = request(sources, fields)
        if variant:
            for axis, value in variant.axes.items():
                req.set(axis, value, f"preset {preset.name}, variant {variant.name}: {axis} = {value}")
        cards = gpus or (variant.gpus if variant else None) or (preset.gpus if preset else None)
        if cards:  # the cards asked for, and where from, in the axis table like every other setting
            where = (
                f"--gpus {gpus}"
                if gpus
                else f"preset {preset.name}"
                + (f", variant {variant.name}" if variant and variant.gpus else "")
                + f": gpus = {cards}"
            )
            req.set("ranks", cards, where)
        cell, notes = cell_for(req, hardware, stack, cards, cards_here)
        jobs.append(Job(variant, sources, req, cell, notes))
    return jobs


def growth_text(rec: dict) -> str:
    """How rank 0's memory moved from the first training step to the last (harness/run/memory.py's
    staircase reading of the per-step timeline), or "—"."""
    stair = next((m.get("staircase") for m in rec.get("memory") or [] if m.get("staircase")), None)
    if not stair:
        return "—"
    grew = f"{stair['growth_bytes'] / 2**20:+,.0f} MiB"
    if stair["flag"]:
        return f"staircase: {len(stair['rises'])} rises, {grew}"
    return f"no staircase, {grew}"


def summary_text(preset: Preset, runs: list) -> str:
    """The variants side by side: (variant, record) pairs."""
    from harness.evidence import summary

    rows = [("variant", "cell", "outcome", "peak per card", "over training", "known issues / reason")]
    for variant, rec in runs:
        detail = ", ".join(rec.get("known_issues") or []) or (rec.get("reason") or "")
        if not detail and rec.get("error"):
            detail = rec["error"]["signature"]
        rows.append(
            (
                variant.name,
                rec["cell"],
                rec["outcome"],
                summary.peak_memory(rec).replace("<br>", ", "),
                growth_text(rec),
                detail[:120],
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    out = ["", f"Preset {preset.name}: {len(runs)} variant{'s' if len(runs) > 1 else ''}, measured on this host"]
    out += ["  " + "  ".join(c.ljust(w) for c, w in zip(r[:5], widths)) + "  " + r[5] for r in rows]
    return "\n".join(line.rstrip() for line in out) + "\n"


def _modelled(cells: list, cards: int) -> list[str]:
    """The strategies compat fit models for the cells' own, on `cards` cards, each once."""
    on_cards = {s.name for s in strategies.for_cards(cards)}
    return [s for s in dict.fromkeys(strategies.get(c.strategy).fit_as or c.strategy for c in cells) if s in on_cards]


def fit_text(matrix_dir: Path, gpu_name: str, jobs: list, gpus: int | None, model_size: str | None, evidence) -> str:
    """compat fit's prediction for the real model the configs name (its size `model_size`, else
    read from the name), for the strategies of the cells, on the cards asked for: a prediction,
    labelled so. `evidence()` gives the records it is calibrated on."""
    from harness.answers import fit, model_configs
    from harness.catalog.gpus import GpuDb

    req = jobs[0].req
    size = model_size or req.model_size
    known = model_configs.ModelConfigs.load(matrix_dir)
    # the config compat ships under the model's name, unless --model-size says otherwise
    by_name = None if model_size or not req.model_name else known.find(req.model_name)
    if not size and not by_name:
        return ""
    head = (
        f"\nPredicted for the real model ({_shown(req.model_name or 'unnamed')}, {size or by_name.title}), not "
        "measured: compat fit\n"
    )
    try:
        entry = by_name or known.by_size(size)
    except UsageError as exc:
        return head + f"  no prediction; compat fit says: {exc}\n"
    cells = [job.cell for job in jobs]
    cards = gpus or req.axes.get("ranks") or 1
    modelled = _modelled(cells, cards)
    if not modelled:
        return head + f"  no prediction: compat fit has no {', '.join(c.strategy for c in cells)} on {cards} card(s)\n"
    first = cells[0]
    method = "qlora" if first.quantization != "none" else first.method
    try:
        gpu = GpuDb.load(matrix_dir).find(gpu_name) if gpu_name else None
        options = {k: v for k, v in req.fit.items() if k not in ("seq_len", "batch", "load")}
        if method == "full":
            options = {k: v for k, v in options.items() if k not in ("lora_r", "lora_targets", "modules_to_save")}
        capacity, capacity_how = fit.capacity_of(gpu, gpu_name, None)
        report = fit.report_for(
            known,
            entry,
            gpu,
            capacity,
            first.precision,
            modelled,
            evidence(),
            per_strategy=_per_strategy(jobs),
            host_hint="compat fit --host-memory GIB",
            capacity_how=capacity_how,
            defaults=tuple(req.fit_defaults),
            read_as=_read_as(req, entry, size, by_name),
            method=method,
            cards=cards,
            seq_len=req.fit.get("seq_len", 2048),
            batch=req.fit.get("batch", 1),
            grad_ckpt=first.grad_ckpt,
            quantization=first.quantization if method == "qlora" else "none",
            **options,
        )
    except UsageError as exc:
        return head + f"  no prediction; compat fit says: {exc}\n"
    return head + "".join(f"  {line}\n" if line else "\n" for line in report.text().splitlines())


def _read_as(req, entry, size, by_name) -> str:
    """How the configs' model was read: as the shipped config of its name, or of the size asked for."""
    if by_name:
        return f"{_shown(req.model_name)} is compat's {entry.key} ({entry.title})"
    return f"{_shown(req.model_name or 'the model')} taken as compat's {size} config, {entry.key} ({entry.title})"


def _per_strategy(jobs: list) -> dict:
    """Per strategy the fit models, how its variant's configs load the model and what they offload
    (fit.LOADS, fit.OFFLOADS): FSDP's cpu_ram_efficient_loading (accelerate's
    fsdp_cpu_ram_efficient_loading) and CPU offload (`offload` in TrainingArguments' fsdp,
    accelerate's fsdp_offload_params), accelerate's zero3_init_flag, DeepSpeed's offload_optimizer
    and offload_param; what the configs do not say keeps the fit's default."""
    out: dict = {}
    for job in jobs:
        req, strategy = job.req, strategies.modelled_as(job.cell.strategy)
        options = out.setdefault(strategy, {})
        fsdp = {**(req.fsdp.get("fsdp_config") or {}), **(req.fsdp.get("accelerate_fsdp_config") or {})}
        efficient = [k for k in ("cpu_ram_efficient_loading", "fsdp_cpu_ram_efficient_loading") if k in fsdp]
        if efficient:
            options["load"] = "sharded" if _truthy(fsdp[efficient[0]]) else "whole"
        elif "load" in req.fit:
            options["load"] = req.fit["load"]
        if strategies.get(job.cell.strategy).fsdp_version == 2 and job.cell.quantization != "none":
            # accelerate's fsdp2_prepare_model does not move a model holding Params4bit to the meta device
            # before sharding ("bypassing the move to meta will still cause the VRAM spike",
            # utils/fsdp_utils.py): each rank holds the whole 4-bit model on its card first
            options["load"] = "on-card"
        if strategies.get(strategy).fsdp_version and (
            "offload" in str(req.fsdp.get(FSDP_KEY, "")).split() or _truthy(fsdp.get("fsdp_offload_params"))
        ):
            options["offload"] = "both"
        zero = (req.deepspeed or {}).get("zero_optimization") if isinstance(req.deepspeed, dict) else None
        if isinstance(zero, dict) and strategies.get(strategy).deepspeed:
            on = [
                k
                for k in ("offload_optimizer", "offload_param")
                if isinstance(zero.get(k), dict) and str(zero[k].get("device", "none")).lower() in ("cpu", "nvme")
            ]
            options["offload"] = {0: "none", 2: "both"}.get(
                len(on), "optimizer" if on == ["offload_optimizer"] else "params"
            )
    return {s: o for s, o in out.items() if o}


def run_jobs(
    jobs: list, preset, data, host, results: Path, env_dir: Path | None, issues, report, cluster=None
) -> list[dict]:
    """Each job's cell run tiny on this host, or on the Ray cluster `cluster` (ray, its nodes as
    raydispatch.Node) where given, one run each (its own run id: two variants of one cell keep
    their logs apart), with the configs' own DeepSpeed config and FSDP settings; the records, in
    the jobs' order."""
    from harness.evidence import records
    from harness.run import context, envs, runner

    manager = envs.EnvManager(root=env_dir or envs.default_root(), log=lambda line: print(line, flush=True))
    recs = []
    for job in jobs:
        variant, req, cell = job.variant, job.req, job.cell
        settings = copy.deepcopy(variant.settings if variant else data.defaults)
        settings["train"].update(req.train)
        ctx = context.RunContext(
            results_dir=results,
            records_path=results / "records.jsonl",
            settings=settings,
            models=data.models,
            host=host,
            stacks=data.stacks,
            matrix_dir=data.dir,
            known_issues=issues,
            envs=manager,
        )
        deepspeed_config = None
        if req.deepspeed is not None and strategies.get(cell.strategy).deepspeed:
            ctx.log_dir.mkdir(parents=True, exist_ok=True)
            deepspeed_config = ctx.log_dir / "deepspeed.json"  # as given (a file, or accelerate's settings)
            records.write_atomic(deepspeed_config, json.dumps(req.deepspeed, indent=1) + "\n")
        override = context.Override(
            deepspeed_config=deepspeed_config,
            fsdp_args=fsdp_args(req),
            record_extra={
                "preflight": {
                    "preset": preset.name if preset else None,
                    "variant": variant.name if variant else None,
                    "configs": [str(source.path) for source in job.sources],
                }
            },
        )
        if variant:
            print(f"== variant {variant.name}: {cell.id}", flush=True)
        if cluster is None:
            (rec,) = runner.run_all(runner.plan([cell], host), ctx, report=report, overrides={cell.id: override})
        else:
            rec = _on_cluster(cluster, cell, ctx, env_dir, report, override)
        print(result_text(rec), end="", flush=True)
        recs.append(rec)
    return recs


def _on_cluster(cluster, cell, ctx, env_dir: Path | None, report, override) -> dict:
    """One preflight cell run on a node of the Ray cluster, its record appended here."""
    import os

    from harness.run import raydispatch

    _, nodes = cluster
    planned = raydispatch.plan([cell], nodes)
    if not (planned[0].here or planned[0].unsupported):
        raise UsageError(f"{cell.id}: {planned[0].reason}")
    spec = raydispatch.WorkerSpec(
        run_id=ctx.run_id,
        settings=ctx.settings,
        timeouts=ctx.timeouts,
        timeout_s=ctx.timeout_s,
        stacks=ctx.stacks,
        models=ctx.models,
        env_dir=str(env_dir) if env_dir else None,
        offline=False,
        find_links=(),
        runner_name=os.environ.get("COMPAT_RUNNER_NAME") or None,
    )
    (rec,) = raydispatch.run_all(planned, ctx, spec, nodes, report=report, overrides={cell.id: override})
    return rec
