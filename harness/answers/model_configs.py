"""matrix/model_configs.toml: the shapes of real models `compat fit` predicts for, with sources.

    [model.llama2_7b]
    title = "Llama 2 7B"
    sizes = ["7B"]                 # --model-size spellings that mean this model
    hidden_size = 4096             # config.json keys, as the publisher's config.json has them
    ...
    sources = ["https://..."]      # where those values are stated

and one [fit] table: `calibration` (the tiny models of matrix/models.toml the fit is calibrated
on), `cuda_context_mib` and its `cuda_context_sources`.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from harness.answers import fit
from harness.answers.fit import Shape, load_json_config
from harness.errors import MatrixError, UsageError
from harness.tomldata import POSITIVE_INT, TEXT, TEXT_LIST, URL, Key, Table, check, did_you_mean, kind, load_data

# a vision-language model's tower (fit._vision_params)
CONFIG_KEYS = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "vocab_size",
    "tie_word_embeddings",
    "head_dim",
    "attention_bias",
    # mixture of experts and latent attention (fit._moe_fields)
    "num_local_experts",
    "num_experts",
    "n_routed_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
    "n_shared_experts",
    "decoder_sparse_step",
    "mlp_only_layers",
    "first_k_dense_replace",
    "kv_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
    "q_lora_rank",
    "vision_config",
    "model_type",  # the architecture transformers builds (compat fit --trace)
)
_SOURCES = "missing: every model config cites where its values are stated"
# a [model.KEY] table of matrix/model_configs.toml; its config keys are checked by fit.Shape
MODEL = Table(
    {
        "title": Key.of(TEXT),
        "sizes": Key.of(
            kind(
                lambda v: (
                    isinstance(v, list) and all(isinstance(x, str) and re.fullmatch(r"\d+(\.\d+)?[Bb]", x) for x in v)
                ),
                'must be a list of sizes like "7B"',
            )
        ),
        "names": Key.of(
            kind(
                lambda v: (
                    isinstance(v, list) and all(isinstance(x, str) and re.fullmatch(r"[\w.-]+/[\w.-]+", x) for x in v)
                ),
                'must be a list of Hugging Face repository ids like "Qwen/Qwen2.5-7B"',
            )
        ),
        "sources": Key.of(
            kind(lambda v: isinstance(v, list) and v, _SOURCES), each=URL, required=True, missing=_SOURCES
        ),
        "parameters": Key.of(POSITIVE_INT),
        **{key: Key.of() for key in CONFIG_KEYS},
    }
)
FIT = Table(
    {
        "calibration": Key.of(TEXT_LIST, required=True),
        "cuda_context_mib": Key.of(
            kind(
                lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0,
                "{r} must be a number of MiB",
            ),
            required=True,
        ),
        "cuda_context_sources": Key.of(TEXT_LIST, each=URL, required=True),
    },
    missing="missing",
)
ENTRY_KEYS = tuple(MODEL.keys)


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    key: str
    title: str
    sizes: tuple[str, ...]
    shape: Shape
    sources: tuple[str, ...]
    parameters: int | None = None  # as the publisher states it, to check the count against
    names: tuple[str, ...] = ()  # its Hugging Face repository ids
    config: dict = dataclasses.field(default_factory=dict, compare=False)  # its config.json keys (fit --trace)

    @classmethod
    def from_file(cls, path: Path) -> "ModelConfig":
        cfg = load_json_config(path)
        if not isinstance(cfg, dict):
            raise UsageError(f"{path}: not a config.json (a JSON object)")
        if isinstance(cfg.get("text_config"), dict):  # vision-language configs keep the decoder here
            cfg = {**cfg, **cfg["text_config"]}
        return cls(str(path), path.name, (), Shape.from_config(cfg, name=str(path)), (str(path),), config=cfg)


@dataclasses.dataclass(frozen=True)
class Context:
    """The CUDA context a prediction adds per process, and where the figure comes from."""

    bytes: float
    measured: bool
    records: tuple[str, ...]  # the GPU records it was measured on
    sources: tuple[str, ...]  # the public sources of the figure when it is not measured
    says: str


@dataclasses.dataclass(frozen=True)
class ModelConfigs:
    path: Path
    models: tuple[ModelConfig, ...]
    calibration_models: frozenset[str]
    cuda_context_bytes: float
    cuda_context_sources: tuple[str, ...]

    @classmethod
    def load(cls, directory: Path) -> "ModelConfigs":
        path = directory / "model_configs.toml"
        doc, where = load_data(path, ("model", "fit"))
        problems: list[str] = []
        models = []
        for key, table in (doc.get("model") or {}).items():
            at = lambda k, msg: where(k, f"[model.{key}].{k}", msg, table=f"model.{key}")  # noqa: E731
            if not isinstance(table, dict):
                problems.append(where(key, f"[model.{key}]", "must be a table"))
                continue
            ok = check(table, MODEL, at, problems)
            try:
                shape = Shape.from_config({k: v for k, v in table.items() if k in CONFIG_KEYS}, name=key)
            except UsageError as exc:
                problems.append(at("hidden_size", str(exc)))
                continue
            if ok:
                models.append(
                    ModelConfig(
                        key,
                        table.get("title", key),
                        tuple(table.get("sizes", ())),
                        shape,
                        tuple(table["sources"]),
                        table.get("parameters"),
                        tuple(table.get("names", ())),
                        {k: v for k, v in table.items() if k in CONFIG_KEYS},
                    )
                )
        fit = doc.get("fit") if isinstance(doc.get("fit"), dict) else {}
        check(fit, FIT, lambda k, msg: where(k, f"[fit].{k}", msg, table="fit"), problems)
        if problems:
            raise MatrixError(problems)
        return cls(
            path,
            tuple(models),
            frozenset(fit["calibration"]),
            float(fit["cuda_context_mib"]) * 2**20,
            tuple(fit["cuda_context_sources"]),
        )

    def calibrate(self, records: list[dict], gpu: bool = False):
        """compat fit's constants: on a CPU fitted on the records of this file's calibration models
        (matrix/fit-cpu.toml); on a GPU none: every term is counted phase by phase (phases.py), and
        CUDA records check the count rather than fit it."""
        if not gpu:
            return fit.calibrate(fit.sweep_records(records, self.calibration_models))
        return fit.counted_on_gpu()

    def cuda_context(self, records: list[dict], arch: str | None = None) -> "Context":
        """What a process holds on its card besides torch's allocator: measured where GPU records of
        the card's architecture `arch` (sm_90; None: any) have it (the median, over every rank of every
        passing such record, of NVML's used memory of the process less torch's reserved memory at a
        quiet point after training: the context and the libraries' workspaces), else this file's
        cuda_context_mib with its sources. The context grows with the chip and the CUDA release (an
        H200 under CUDA 13 holds about 0.7 GiB), so one architecture's figure is not another's."""
        measured = sorted(
            (float(m["non_torch_after_train_bytes"]), r["id"])
            for r, m in _gpu_ranks(records, arch)
            if isinstance(m.get("non_torch_after_train_bytes"), (int, float)) and m["non_torch_after_train_bytes"] > 0
        )
        if not measured:
            elsewhere = sorted(
                {r["axes"]["hardware"] for r, m in _gpu_ranks(records) if m.get("non_torch_after_train_bytes")}
            )
            return Context(
                self.cuda_context_bytes,
                False,
                (),
                self.cuda_context_sources,
                f"CUDA context and runtime buffers: {self.cuda_context_bytes / 2**20:,.0f} MiB per process"
                + (f" (measured on {', '.join(elsewhere)} only, not on {arch})" if elsewhere and arch else ""),
            )
        median = measured[len(measured) // 2][0]
        ids = tuple(sorted({i for _, i in measured}))
        return Context(
            median,
            True,
            ids,
            (),
            f"CUDA context and library workspaces: {median / 2**20:,.0f} MiB per process, "
            f"the median of {len(measured)} rank(s) of {len(ids)} GPU record(s){' of ' + arch if arch else ''} "
            "(NVML's used memory of the process less torch's reserved memory, after training)",
        )

    def allocator_slack(self, records: list[dict]) -> dict:
        """The caching allocator's slack, measured: per (`expandable_segments`, length regime) the
        median over every rank of a real size (fit.REAL_SIZE_BYTES allocated in training or more)
        of every passing GPU record of (training-phase max reserved - max allocated) / max
        allocated, with the records it comes from; a pair no record has is absent. The regime is
        "variable" where batches are padded to their own longest row and lengths differ from step to
        step (the caching allocator keeps blocks of every size it saw: 29-55% on the Qwen2-0.5B shape,
        210% with lengths climbing to 2,048, 2026-11-26), "fixed" where every batch has one length
        (padded to the maximum, or packed: 11%). A smaller rank's peak is mostly the libraries'
        workspaces, which leave little slack: the H200's test-model cells reserved 3% more."""
        found: dict = {}
        for r, m in _gpu_ranks(records):
            allocated, reserved = m.get("train_max_allocated_bytes"), m.get("train_max_reserved_bytes")
            if (
                all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (allocated, reserved))
                and fit.REAL_SIZE_BYTES <= allocated <= reserved
            ):
                key = (bool(r["axes"].get("expandable_segments")), length_regime(r))
                found.setdefault(key, []).append(((reserved - allocated) / allocated, r["id"]))
        return {
            key: {"slack": sorted(s for s, _ in rows)[len(rows) // 2], "records": sorted({i for _, i in rows})}
            for key, rows in found.items()
        }

    def by_name(self, name: str) -> ModelConfig:
        """A shipped config by its key (llama3_8b) or by a Hugging Face id it lists, with or without
        the organisation, in any case ("Llama-3.1-8B", "meta-llama/llama-3.1-8b-instruct")."""
        found = self.find(name)
        if found is not None:
            return found
        wanted = name.strip().lower()
        known = [m.key for m in self.models] + [n.split("/")[-1].lower() for m in self.models for n in m.names]
        raise UsageError(
            f"unknown model {name!r}{did_you_mean(wanted.split('/')[-1], known)}; compat ships "
            f"{', '.join(m.key for m in self.models)} and the Hugging Face ids they list ({self.path}), "
            "or give a config.json"
        )

    def find(self, name: str) -> ModelConfig | None:
        """by_name's match, or None."""
        wanted = name.strip().lower()
        for m in self.models:
            if m.key == wanted or any(wanted in (n.lower(), n.split("/")[-1].lower()) for n in m.names):
                return m
        return None

    def by_size(self, size: str) -> ModelConfig:
        wanted = size.strip().upper()
        for m in self.models:
            if wanted in (s.upper() for s in m.sizes):
                return m
        sizes = sorted({s for m in self.models for s in m.sizes}, key=lambda s: float(s.rstrip("Bb")))
        raise UsageError(
            f"--model-size {size!r}: compat ships configs for {', '.join(sizes)}; for another "
            "model give --model CONFIG.json"
        )


def length_regime(rec: dict) -> str:
    """A record's batches: "fixed" (padded to the maximum length, or every row one length), else
    "variable" (each batch padded to its own longest row, lengths differing from step to step)."""
    train = (rec.get("settings") or {}).get("train") or {}
    same = train.get("seq_len_min") is not None and train.get("seq_len_min") == train.get("seq_len_max")
    return "fixed" if train.get("padding") == "max_length" or same else "variable"


def _gpu_ranks(records: list[dict], arch: str | None = None):
    """(record, memory entry) of every rank of every passing GPU record (of architecture `arch`,
    where given): what the CUDA context and the allocator's slack are measured on."""
    for r in records:
        hardware = (r.get("axes") or {}).get("hardware", "cpu")
        if r.get("outcome") == "pass" and hardware != "cpu" and arch in (None, hardware):
            for m in r.get("memory") or []:
                yield r, m
