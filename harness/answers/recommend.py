"""`compat recommend`: a safe stack for a card, each part with its evidence.

    rec = recommend(gpu, gpus=1, method="qlora", data=ResolverData.load(Path("matrix")), records=[...])

Every part of the answer says where it comes from:
  measured   passing records of this card's architecture (record ids, date), or, for library
             versions no record of the card covers, passing records of the same method on the
             CPU (labelled with their hardware: they show the versions train together, not that
             the card runs them);
  predicted  a named rule, with its sources: the GPU database (matrix/gpus.toml), the build
             tables (matrix/builds.toml) and the known-issue base (matrix/known_issues.toml).

Precision comes from the compute capability alone (bf16 from 8.0), never from
torch.cuda.is_bf16_supported(), which answers True through emulation on older cards.
No torch here: this must start fast.
"""

from __future__ import annotations

import dataclasses
import heapq
import re
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from harness import tomldata
from harness.catalog import packages, strategies
from harness.catalog.backends import Backend, Backends
from harness.catalog.gpus import GpuDb, GpuModel, precision_for
from harness.catalog.known_issues import PACKAGES, KnownIssues
from harness.errors import MatrixError, UsageError
from harness.evidence import summary
from harness.evidence.records import packages as record_packages

METHODS = ("full", "lora", "qlora")
TE_MATRIX = "https://nvidia.github.io/TransformerEngine/support_matrix.html"
PYTORCH_INDEX = "https://download.pytorch.org/whl/"


def _cc(text: str) -> tuple[int, int]:
    major, minor = text.replace("+PTX", "").split(".")
    return int(major), int(minor)


@dataclasses.dataclass(frozen=True)
class TorchBuild:
    versions: SpecifierSet
    latest: Version
    variant: str  # cu126
    archs: tuple[str, ...]  # "7.5", ..., "12.0+PTX"
    sources: tuple[str, ...]

    @property
    def cuda(self) -> tuple[int, int]:
        digits = self.variant[2:]
        return int(digits[:-1]), int(digits[-1])

    def runs(self, cc: tuple[int, int]) -> bool:
        """A cubin for sm_XY runs on the same major with minor >= Y; PTX JIT-compiles for newer."""
        for arch in self.archs:
            built = _cc(arch)
            if built[0] == cc[0] and built[1] <= cc[1]:
                return True
            if arch.endswith("+PTX") and built <= cc:
                return True
        return False


@dataclasses.dataclass(frozen=True)
class BnbBuild:
    versions: SpecifierSet
    latest: Version
    min_cc_4bit: tuple[int, int]
    min_cc_int8_fast: tuple[int, int]
    torch: SpecifierSet
    cuda_targets: tuple[tuple[SpecifierSet, tuple[str, ...]], ...]
    sources: tuple[str, ...]

    def targets_for(self, cuda: tuple[int, int]) -> tuple[str, ...]:
        v = Version(f"{cuda[0]}.{cuda[1]}")
        for spec, archs in self.cuda_targets:
            if spec.contains(v):
                return archs
        return ()


@dataclasses.dataclass(frozen=True)
class ResolverData:
    gpus: GpuDb
    torch: tuple[TorchBuild, ...]
    bitsandbytes: tuple[BnbBuild, ...]
    issues: KnownIssues
    driver: dict = dataclasses.field(default_factory=dict)  # CUDA major -> the oldest driver major (builds.toml)
    driver_source: str = ""
    backends: Backends | None = None  # the non-CUDA backends (backends.toml)

    def driver_floor(self, variant: str) -> int | None:
        """The oldest NVIDIA driver (its major number) a build of this CUDA variant runs on."""
        return self.driver.get(int(variant[2:-1]))

    @classmethod
    def load(cls, directory: Path) -> "ResolverData":
        problems: list[str] = []
        gpus = issues = None
        try:
            gpus = GpuDb.load(directory)
        except MatrixError as exc:
            problems += exc.problems
        try:
            issues = KnownIssues.load(directory)
        except MatrixError as exc:
            problems += exc.problems
        torch, bnb, driver, source = _load_builds(directory / "builds.toml", problems)
        backends = None
        try:
            backends = Backends.load(directory)
        except MatrixError as exc:
            problems += exc.problems
        for gpu in gpus.gpus if gpus and backends else ():
            if not gpu.cuda and backends.get(gpu.backend) is None:
                problems.append(f"{gpus.path}: [gpu.{gpu.key}].backend: no [backend.{gpu.backend}] in {backends.path}")
        if problems:
            raise MatrixError(problems)
        return cls(gpus, torch, bnb, issues, driver, source, backends)


_ARCH = tomldata.kind(
    lambda v: isinstance(v, str) and re.fullmatch(r"\d+\.\d(\+PTX)?", v), '{r} is not a compute capability like "8.6"'
)
_LIST = tomldata.kind(lambda v: isinstance(v, list) and v, "must be a non-empty list")
_CUDA_TARGETS = tomldata.Kind(
    lambda v: (
        "must be a table of CUDA specifier = [archs]"
        if not isinstance(v, dict)
        else next(
            (
                f"{spec} = {archs!r}: not a CUDA specifier and a list of compute capabilities"
                for spec, archs in v.items()
                if tomldata.SPECIFIER.problem(spec) or not isinstance(archs, list) or any(map(_ARCH.problem, archs))
            ),
            None,
        )
    )
)
# matrix/builds.toml's [[torch]] and [[bitsandbytes]] entries; every key is required
TORCH_BUILD = tomldata.Table(
    {
        "versions": tomldata.Key.of(tomldata.SPECIFIER, required=True),
        "latest": tomldata.Key.of(tomldata.VERSION, required=True),
        "variant": tomldata.Key.of(
            tomldata.kind(
                lambda v: isinstance(v, str) and re.fullmatch(r"cu\d{3}", v), "{r} is not a CUDA variant like cu126"
            ),
            required=True,
        ),
        "archs": tomldata.Key.of(_LIST, each=_ARCH, required=True),
        "sources": tomldata.Key.of(_LIST, each=tomldata.TEXT, required=True),
    },
    missing="missing",
)
BNB_BUILD = tomldata.Table(
    {
        "versions": tomldata.Key.of(tomldata.SPECIFIER, required=True),
        "latest": tomldata.Key.of(tomldata.VERSION, required=True),
        "min_cc_4bit": tomldata.Key.of(tomldata.CC, required=True),
        "min_cc_int8_fast": tomldata.Key.of(tomldata.CC, required=True),
        "torch": tomldata.Key.of(tomldata.SPECIFIER, required=True),
        "cuda_targets": tomldata.Key.of(_CUDA_TARGETS, required=True),
        "sources": tomldata.Key.of(_LIST, each=tomldata.TEXT, required=True),
    },
    missing="missing",
)


def _load_builds(path: Path, problems: list[str]):
    try:
        doc, where = tomldata.load_data(path, ("torch", "bitsandbytes", "sources", "driver"))
    except MatrixError as exc:
        problems += exc.problems
        return (), (), {}, ""
    sources = doc.get("sources") if isinstance(doc.get("sources"), dict) else {}
    for url in sources.values():
        if tomldata.URL.problem(url):
            problems.append(where("sources", "[sources]", tomldata.URL.problem(url), table="sources"))

    def entries(name: str, table: tomldata.Table):
        for n, t in enumerate(doc.get(name) if isinstance(doc.get(name), list) else []):
            at = lambda k, msg: where(k, f"[[{name}]] #{n + 1}.{k}", msg, table=name, nth=n)  # noqa: E731
            if not tomldata.check(t, table, at, problems):
                continue
            if Version(t["latest"]) not in SpecifierSet(t["versions"]):
                problems.append(at("latest", f"{t['latest']} is not in {t['versions']}"))
            for k in t["sources"]:
                if k not in sources:
                    problems.append(where("sources", f"{path.name}", f"source {k!r} is not a key of [sources]"))
            yield t, tuple(sources.get(k, "") for k in t["sources"])

    torch = tuple(
        TorchBuild(SpecifierSet(t["versions"]), Version(t["latest"]), t["variant"], tuple(t["archs"]), srcs)
        for t, srcs in entries("torch", TORCH_BUILD)
    )
    bnb = tuple(
        BnbBuild(
            SpecifierSet(t["versions"]),
            Version(t["latest"]),
            _cc(t["min_cc_4bit"]),
            _cc(t["min_cc_int8_fast"]),
            SpecifierSet(t["torch"]),
            tuple((SpecifierSet(k), tuple(v)) for k, v in t["cuda_targets"].items()),
            srcs,
        )
        for t, srcs in entries("bitsandbytes", BNB_BUILD)
    )
    if not torch:
        problems.append(f"{path}: no [[torch]] builds")
    driver = doc.get("driver", {})
    if not isinstance(driver, dict) or not all(
        re.fullmatch(r"\d{1,2}", str(k)) and isinstance(v, int) and not isinstance(v, bool) and 0 < v < 10_000
        for k, v in driver.items()
    ):
        problems.append(where("driver", "[driver]", 'must map a CUDA major to a driver major: "13" = 580'))
        driver = {}
    floors = {int(k): v for k, v in driver.items()}
    for b in torch:
        if floors and b.cuda[0] not in floors:
            problems.append(where("driver", "[driver]", f"has no driver for CUDA {b.cuda[0]} ({b.variant})"))
    return torch, bnb, floors, sources.get("cuda-minor-compat", "")


# -- the answer ------------------------------------------------------------------------------


@dataclasses.dataclass
class Evidence:
    about: str  # "precision", "torch", "packages.bitsandbytes", ...
    kind: str  # "measured" | "predicted"
    says: str
    rule: str | None = None
    sources: list[str] = dataclasses.field(default_factory=list)
    records: list[str] = dataclasses.field(default_factory=list)
    hardware: str | None = None
    date: str | None = None
    measured_by: list[str] = dataclasses.field(default_factory=list)  # who (summary.measured_by)

    def as_dict(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if v not in (None, [])}


@dataclasses.dataclass
class Recommendation:
    gpu: GpuModel
    gpus: int
    method: str
    precision: str
    quantization: str
    strategy: str
    torch_version: str
    torch_variant: str
    packages: dict[str, str]
    evidence: list[Evidence]
    notes: list[str]
    memory: str = ""  # the card's memory as the answer took it: "80 GB" (a size named), else every size
    driver_min: int | None = None  # the oldest NVIDIA driver (its major) the torch build runs on
    backend: Backend | None = None  # a non-CUDA card's backend (backends.toml)

    @property
    def torch_pin(self) -> str:
        """torch==2.13.0+cu130 (no local tag where the wheel has none: MPS)."""
        return f"torch=={self.torch_version}" + (f"+{self.torch_variant}" if self.torch_variant else "")

    @property
    def torch_index(self) -> str:
        """The index torch comes from ("" for PyPI's own)."""
        return self.backend.index if self.backend else PYTORCH_INDEX + self.torch_variant

    @property
    def install(self) -> str:
        """The pip command that installs the torch build (and what its backend needs beside it)."""
        if self.backend:
            return self.backend.install()
        return f"pip install torch=={self.torch_version} --index-url {self.torch_index}"

    def as_json(self) -> dict:
        return {
            "gpu": {
                "name": self.gpu.name,
                "key": self.gpu.key,
                "arch": self.gpu.arch,
                "backend": self.gpu.backend,
                "compute_capability": self.gpu.cc_text or None,
                "count": self.gpus,
                "memory": self.memory or self.gpu.memory_text(),
            },
            "method": self.method,
            "precision": self.precision,
            "quantization": self.quantization,
            "strategy": self.strategy,
            "packages": self.packages,
            "torch_variant": self.torch_variant,
            "torch_driver_min": self.driver_min,
            "torch_index_url": self.torch_index or None,
            "torch_install": self.install,
            "device": self.backend.device if self.backend else "cuda",
            "evidence": [e.as_dict() for e in self.evidence],
            "notes": self.notes,
        }


def _qlora(gpu: GpuModel, precision: str, data: ResolverData, ev: list[Evidence], notes: list[str]) -> None:
    """QLoRA's quantization, as evidence, and the note on int8 below compute capability 7.5."""
    ev.append(
        Evidence(
            "quantization",
            "predicted",
            "QLoRA: 4-bit NF4 base weights through BitsAndBytesConfig(load_in_4bit=True, "
            f"bnb_4bit_quant_type='nf4', bnb_4bit_compute_dtype={precision}) and LoRA adapters",
            rule="qlora-nf4",
            sources=list(data.bitsandbytes[0].sources[:1]) if data.bitsandbytes else [],
        )
    )
    if gpu.cc and gpu.cc < (7, 5):
        notes.append(
            "avoid int8 (LLM.int8) on this card: below compute capability 7.5 bitsandbytes runs it through a "
            "slow fallback"
        )


class Passes:
    """The passing records an answer reads, gathered once: by architecture, and for a package, each
    version's records (of a method, where asked), in the records' order. An answer for every card
    (per_card) reads one Passes: a results folder of 100k rows is then gone through once, not once
    a card and package."""

    def __init__(self, records):
        self.by_arch: dict[str, list[dict]] = {}
        for r in records:
            if r.get("outcome") == "pass":
                self.by_arch.setdefault((r.get("axes") or {}).get("hardware"), []).append(r)
        self._versions: dict[tuple, dict[str, list[dict]]] = {}

    def versions(
        self, arch: str, name: str, method_axes: tuple | None = None, method: str | None = None
    ) -> dict[str, list[dict]]:
        """Version of package `name` -> the passing records of `arch` that have it (of these
        (method, quantization) axes, or of `method` as of_method reads it, where given), in the order
        of their first record."""
        k = (arch, name, method_axes, method)
        if k not in self._versions:
            out: dict[str, list[dict]] = {}
            for r in self.by_arch.get(arch, ()):
                axes = r.get("axes") or {}
                if method is not None and not of_method(r, method):
                    continue
                if method_axes is None or (axes.get("method"), axes.get("quantization")) == method_axes:
                    v = record_packages(r).get(name)
                    if v:
                        out.setdefault(v, []).append(r)
            self._versions[k] = out
        return self._versions[k]


def recommend(
    gpu: GpuModel,
    gpus: int,
    method: str,
    data: ResolverData,
    records: list[dict] | Passes,
    chosen: tuple[str, Evidence] | None = None,
    edges=(),
    memory: str = "",
    driver: int | None = None,
) -> Recommendation:
    """`records`: the records (or their Passes, made once for many answers); `chosen`: a strategy
    and its evidence picked by `compat fit` for a model size, used instead of the card-count rules
    below; `edges`: compat bisect's boundaries (lastgood.Edge)."""
    if method not in METHODS:
        raise ValueError(f"method {method!r}")
    passes = records if isinstance(records, Passes) else Passes(records)
    if not gpu.cuda:
        return _other_backend(gpu, gpus, method, data, passes, chosen, memory)
    ev: list[Evidence] = []
    notes: list[str] = []
    arch_passes = passes.by_arch.get(gpu.arch, [])
    precision = _precision(gpu, data, arch_passes, ev)

    # -- quantization and strategy ------------------------------------------------------------
    quantization = "nf4" if method == "qlora" else "none"
    if method == "qlora":
        _qlora(gpu, precision, data, ev, notes)
    if chosen is not None:
        strategy = chosen[0]
        ev.append(chosen[1])
    else:
        strategy = _strategy(gpus, method, data, ev)

    # -- torch and its CUDA build, then the other packages ---------------------------------------
    torch_version, variant = _pick_torch(gpu, data, passes, ev, driver)
    _driver(gpu, data, variant, driver, ev, notes)
    pins: dict[str, str] = {"torch": f"=={torch_version}"}
    need = packages.needed(method, strategies.get(strategy).deepspeed)
    if "bitsandbytes" in need:
        pins["bitsandbytes"] = _pick_bnb(gpu, torch_version, variant, data, arch_passes, ev)
    axes = {
        "precision": precision,
        "quantization": quantization,
        "method": "lora" if method == "qlora" else method,
        "strategy": strategy,
    }
    for name in need:
        if name != "bitsandbytes":
            pins[name] = _pick_package(name, gpu, method, axes, torch_version, data, passes, ev, pins, notes)
    _below_bisected(gpu, method, pins, edges, ev, notes)
    said = (memory, data.driver_floor(variant))
    return Recommendation(
        gpu, gpus, method, precision, quantization, strategy, torch_version, variant, pins, ev, notes, *said
    )


def _driver(gpu: GpuModel, data: ResolverData, variant: str, driver: int | None, ev, notes: list[str]) -> None:
    """The NVIDIA driver the torch build needs, as evidence; without --driver, the build for an
    older driver as a note (issue 43, item 2: a T4 host's older driver cannot start a cu130 torch)."""
    floor = data.driver_floor(variant)
    if floor is None:
        return
    major = variant[2:-1]
    says = f"the {variant} build needs NVIDIA driver >= {floor} (CUDA {major}.x runs on drivers from {floor})"
    ev.append(
        Evidence(
            "torch.driver",
            "predicted",
            says + (f"; the driver given, {driver}, runs it" if driver else ""),
            rule="cuda-driver-floor",
            sources=[data.driver_source] if data.driver_source else [],
        )
    )
    if driver is not None:
        return
    older = [b for b in data.torch if b.runs(gpu.cc) and (data.driver_floor(b.variant) or floor) < floor]
    if older:
        b = max(older, key=lambda b: (b.latest, b.cuda))
        notes.append(
            f"torch +{variant} needs NVIDIA driver >= {floor} (nvidia-smi shows yours); with an older driver: torch "
            f"{b.latest}+{b.variant} (driver >= {data.driver_floor(b.variant)}), or `--driver VERSION` for the "
            "answer for your driver"
        )


def _below_bisected(
    gpu: GpuModel, method: str, pins: dict[str, str], edges, ev: list[Evidence], notes: list[str]
) -> None:
    """Each bisected boundary of a recommended package for this method, as measured evidence. One
    measured on this card's architecture with no settings of its own moves the pin below it (to
    its last good release, measured to pass); one measured elsewhere, or with settings (a loader's
    keyword), is shown with where it holds and leaves the pin as it is."""
    for e in edges:
        pin = pins.get(e.package, "")
        if (
            e.package not in pins
            or (method == "qlora") != (e.quantization != "none")
            or (method != "qlora" and e.method != method)
        ):
            continue
        common = dict(records=[e.good_record, e.bad_record], hardware=e.hardware, date=e.date or None)
        current = Version(pin[2:]) if pin.startswith("==") else None
        if e.hardware == gpu.arch and e.settings == "{}":
            if current is None or current >= Version(e.first_bad):
                pins[e.package] = f"=={e.last_good}"
                ev.append(
                    Evidence(
                        f"packages.{e.package}", "measured", f"{e.says()}: pinned to its last good release", **common
                    )
                )
            else:
                ev.append(Evidence(f"packages.{e.package}", "measured", f"{e.says()}: the pin is below it", **common))
            continue
        why = (
            f"measured on {e.hardware}, not on {gpu.arch}: the pin is not moved for this card"
            if e.hardware != gpu.arch
            else "with those settings only: the pin is not moved"
        )
        if e.package == "bitsandbytes" and e.hardware == "cpu" != gpu.arch:
            why += " (on a CPU bitsandbytes runs its CPU backend, not the CUDA kernels this card runs)"
        ev.append(Evidence(f"packages.{e.package}", "measured", f"{e.says()}; {why}", **common))
        if e.settings != "{}" and (current is None or current >= Version(e.first_bad)):
            what, fix = e.settings_words
            notes.append(
                f"if your code {what}, {e.package} {pin or ''} breaks it: {e.package} {e.first_bad} is the first "
                f"release that does (bisected on {e.hardware}, {e.bisections[-1]}); {fix}, or pin "
                f"{e.package}<={e.last_good}"
            )


def _with_bitsandbytes(versions: dict, pin: str, name: str, gpu: GpuModel, hardware: str, notes) -> dict:
    """For QLoRA, only the records of the bitsandbytes recommended are evidence for the other
    packages (issue 43, item 3: transformers 5.23.0 was cited from bitsandbytes 0.48.2's records
    beside a recommended 0.50.2). Where that leaves no CPU record, the answer says why: 4-bit cells
    on a CPU run bitsandbytes' CPU backend, not the CUDA kernels the card runs."""
    if not pin.startswith("=="):
        return versions
    want = pin[2:]
    kept = {v: [r for r in recs if record_packages(r).get("bitsandbytes") == want] for v, recs in versions.items()}
    kept = {v: recs for v, recs in kept.items() if recs}
    others = sorted(
        {record_packages(r).get("bitsandbytes") or "" for recs in versions.values() for r in recs} - {want, ""}
    )
    if not kept and others and hardware == "cpu" and notes is not None:
        note = (
            f"no QLoRA cell with bitsandbytes {want} passed on cpu (those of {', '.join(others)} did): on a CPU "
            f"bitsandbytes runs its CPU backend, not the CUDA kernels a {gpu.name} runs, so the CPU records say "
            f"nothing of {want} on {gpu.arch}; the table's cpu section says why they failed"
        )
        if note not in notes:
            notes.append(note)
    return kept


def _precision(gpu: GpuModel, data: ResolverData, arch_passes: list[dict], ev: list[Evidence]) -> str:
    """From the compute capability, never from is_bf16_supported(); with the records that passed
    in it on the card's architecture."""
    precision = precision_for(gpu)
    if precision == "bf16":
        rule = "bf16-needs-cc-8.0"
        says = f"compute capability {gpu.cc_text} >= 8.0: bf16 is native"
    elif precision == "fp16":
        rule = "fp16-below-cc-8.0"
        says = (
            f"compute capability {gpu.cc_text} < 8.0: no native bf16 (torch.cuda.is_bf16_supported() "
            "may still answer True through emulation); fp16 mixed precision on its tensor cores"
        )
    else:
        rule = "fp32-without-tensor-cores"
        says = (
            f"compute capability {gpu.cc_text}: no bf16 and no fp16 tensor cores (fp16 runs at a "
            "fraction of fp32 speed on this chip); train in fp32, with 4-bit weights to save memory"
        )
    emulation = data.issues.get("torch-is-bf16-supported-emulation")
    ev.append(
        Evidence(
            "precision",
            "predicted",
            says,
            rule=rule,
            sources=[TE_MATRIX, *gpu.sources[:2], *(emulation.sources[:1] if emulation and gpu.cc < (8, 0) else [])],
        )
    )
    measured = [r for r in arch_passes if (r.get("axes") or {}).get("precision") == precision]
    if measured:
        ev.append(_measured("precision", f"{precision} passed on {gpu.arch}", measured))
    return precision


def _strategy(gpus: int, method: str, data: ResolverData, ev: list[Evidence], unit: str = "cards") -> str:
    """The card-count rules: one process on one card; a full fine-tune sharded; adapters in DDP.
    `unit`: what `gpus` counts (devices, where a card is several to torch)."""
    if gpus <= 1:
        ev.append(Evidence("strategy", "predicted", "one card: one process", rule="one-card-one-process"))
        return strategies.one_process().name
    if method == "full":
        issue = data.issues.get("ddp-oom-no-sharding")
        ev.append(
            Evidence(
                "strategy",
                "predicted",
                f"{gpus} {unit}, full fine-tune: shard weights, gradients and optimizer state with ZeRO-3 "
                "(plain DDP keeps a whole copy on every card)",
                rule="shard-full-fine-tunes",
                sources=list(issue.sources[:3]) if issue else [],
            )
        )
        return strategies.full_shard().name
    ev.append(
        Evidence(
            "strategy",
            "predicted",
            f"{gpus} {unit}, {method}: DDP, one copy of the (frozen{', 4-bit' if method == 'qlora' else ''}) "
            "base per card and only the adapters' gradients synchronised; if one card cannot hold the "
            "base, use ZeRO-3 instead",
            rule="ddp-for-adapters",
        )
    )
    return strategies.data_parallel(gpus).name


def _measured(about: str, says: str, recs: list[dict]) -> Evidence:
    """Measured evidence from records: the five newest (nlargest: the first five of a stable sort,
    newest first, without sorting them all), their hardware, the newest date."""
    newest = heapq.nlargest(5, recs, key=lambda r: r.get("finished_at") or "")
    hw = sorted({(r.get("axes") or {}).get("hardware", "?") for r in recs})
    return Evidence(
        about,
        "measured",
        says,
        records=[r["id"] for r in newest],
        hardware=", ".join(hw),
        date=(newest[0].get("finished_at") or "")[:10] or None,
        measured_by=sorted({summary.measured_by(r) for r in newest}),
    )


def of_method(rec: dict, method: str) -> bool:
    """Whether a record is a cell of `method` as recommend means it: full or LoRA on an unquantized
    base, QLoRA (LoRA on a quantized one)."""
    axes = rec.get("axes") or {}
    quantized = axes.get("quantization", "none") != "none"
    return axes.get("method") == ("full" if method == "full" else "lora") and quantized == (method == "qlora")


def _pick_torch(
    gpu: GpuModel, data: ResolverData, passes: Passes, ev: list[Evidence], driver: int | None = None
) -> tuple[str, str]:
    """The torch build: measured on this architecture first, else the newest in the table whose
    kernels run on the card; with `driver` (the NVIDIA driver's major), only builds it runs."""
    runs_here = lambda variant: driver is None or (data.driver_floor(variant) or 0) <= driver  # noqa: E731
    # measured first: the newest torch build that passed on this architecture
    by_version = {
        v: recs for v, recs in passes.versions(gpu.arch, "torch").items() if "+cu" in v and runs_here(v.split("+")[1])
    }
    if by_version:
        best = max(by_version, key=lambda v: Version(v.split("+")[0]))
        version, variant = best.split("+")
        ev.append(
            _measured("torch", f"torch {best} passed {len(by_version[best])} cell(s) on {gpu.arch}", by_version[best])
        )
        return version, variant
    fits = [b for b in data.torch if b.runs(gpu.cc) and runs_here(b.variant)]
    if not fits and driver is not None:
        least = min((data.driver_floor(b.variant) or 0) for b in data.torch if b.runs(gpu.cc))
        raise UsageError(
            f"--driver {driver}: no torch build compat knows with kernels for {gpu.arch} runs on it (the oldest "
            f"driver one needs is {least}, {data.driver_source}); update the NVIDIA driver"
        )
    if not fits:
        raise LookupError(f"no torch build in the build table has kernels for {gpu.arch}")
    best = max(fits, key=lambda b: (b.latest, b.cuda))
    ev.append(
        Evidence(
            "torch",
            "predicted",
            f"torch {best.latest}+{best.variant}: the newest build in the table whose kernels "
            f"({', '.join('sm_' + a.replace('.', '') for a in best.archs)}) "
            f"run on {gpu.arch} (a cubin runs on its major with an equal or higher minor; PTX JIT-compiles for "
            "newer cards)",
            rule="torch-build-covers-arch",
            sources=list(best.sources),
        )
    )
    return str(best.latest), best.variant


def _pick_bnb(gpu: GpuModel, torch_version: str, variant: str, data: ResolverData, arch_passes, ev) -> str:
    measured = {}
    for r in arch_passes:
        if (r.get("axes") or {}).get("quantization", "none") != "none":
            v = record_packages(r).get("bitsandbytes")
            if v:
                measured.setdefault(v, []).append(r)
    if measured:
        best = max(measured, key=Version)
        ev.append(
            _measured(
                "packages.bitsandbytes", f"bitsandbytes {best} passed quantized cells on {gpu.arch}", measured[best]
            )
        )
        return f"=={best}"
    cuda = (int(variant[2:-1]), int(variant[-1]))
    for b in sorted(data.bitsandbytes, key=lambda b: b.latest, reverse=True):
        targets = b.targets_for(cuda)
        runs = any(_cc(t)[0] == gpu.cc[0] and _cc(t)[1] <= gpu.cc[1] for t in targets)
        if gpu.cc >= b.min_cc_4bit and runs and Version(torch_version) in b.torch:
            ev.append(
                Evidence(
                    "packages.bitsandbytes",
                    "predicted",
                    f"bitsandbytes {b.latest}: 4-bit needs compute capability >= {b.min_cc_4bit[0]}.{b.min_cc_4bit[1]} "
                    f"(this card: {gpu.cc_text}); its CUDA {cuda[0]}.{cuda[1]} build targets {', '.join(targets)}; "
                    f"needs torch {b.torch}",
                    rule="bnb-4bit-covers-arch",
                    sources=list(b.sources),
                )
            )
            return f"=={b.latest}"
    raise LookupError(
        f"no bitsandbytes in the build table supports 4-bit on {gpu.arch} with torch {torch_version}+{variant}"
    )


def _pick_package(name, gpu, method, axes, torch_version, data, passes: Passes, ev, picked=None, notes=None) -> str:
    # pins the known issues ask for, where their conditions hold for this card, these axes and
    # the torch chosen (conditions on the other packages are left open: they are what we pick)
    spec = SpecifierSet()
    pins = []
    for issue in data.issues.issues:
        others = [k for k in issue.when if k in PACKAGES and k not in ("torch", name)]
        if name in issue.pins and not others and issue.applies({"torch": torch_version}, gpu.cc_text, axes):
            spec &= issue.pins[name]
            pins.append(
                Evidence(
                    f"packages.{name}",
                    "predicted",
                    f"{issue.pins[name]}: avoids {issue.id} ({issue.title})",
                    rule=issue.id,
                    sources=list(issue.sources[:3]),
                )
            )
    # measured versions: this card's passing records first, else the same method on the CPU
    method_axes = {"full": ("full", "none"), "lora": ("lora", "none"), "qlora": ("lora", "nf4")}[method]
    own = passes.versions(gpu.arch, name, method=method)
    cpu = passes.versions("cpu", name, method_axes)
    for pool, hardware in ((own, gpu.arch), (cpu, "cpu")):
        versions = {v: recs for v, recs in pool.items() if spec.contains(Version(v), prereleases=True)}
        versions = _with_bitsandbytes(versions, (picked or {}).get("bitsandbytes", ""), name, gpu, hardware, notes)
        if versions:
            best = max(versions, key=Version)
            says = f"{name} {best} passed {method} cells on {hardware}"
            if hardware == "cpu":
                says += (
                    f" (no record of {gpu.arch} yet: this shows the versions train together, not that "
                    f"{gpu.name} runs them)"
                )
            ev.append(_measured(f"packages.{name}", says, versions[best]))
            ev.extend(pins)
            return f"=={best}"
    ev.extend(
        pins
        or [
            Evidence(
                f"packages.{name}",
                "predicted",
                f"no known issue constrains {name} for this card and method",
                rule="no-known-issue",
            )
        ]
    )
    return str(spec) or ""


# -- cards of other backends than CUDA ------------------------------------------------------


def _other_backend(gpu: GpuModel, gpus: int, method: str, data, passes, chosen=None, memory: str = ""):
    """The Recommendation for a card torch reaches through another backend than CUDA (ROCm, MPS, XPU,
    an Ascend NPU): the same answer's parts, each predicted from matrix/backends.toml and the card's
    facts in matrix/gpus.toml, with their sources (compat has run nothing on these yet). Library
    versions besides torch and bitsandbytes are read from the CPU's records, labelled as such, as for
    a CUDA card no record covers (recommend()'s arguments)."""
    backend = data.backends.get(gpu.backend)
    ev: list = []
    notes: list[str] = []
    precision = _other_precision(gpu, backend, ev)
    if method == "qlora" and not backend.qlora_on(gpu.arch):
        notes.append(
            f"QLoRA on {gpu.name}: {backend.bitsandbytes_says}; this answer is LoRA on a {precision} base instead"
        )
        method = "lora"
    quantization = "nf4" if method == "qlora" else "none"
    if method == "qlora":
        _qlora(gpu, precision, data, ev, notes)
    gpus, devices = _devices(gpu, gpus, backend, ev, notes)
    if chosen is not None:
        strategy = chosen[0]
        ev.append(chosen[1])
    else:
        strategy = _other_strategy(gpu, devices, method, backend, data, ev)
    pins = _other_torch(gpu, backend, ev, notes)
    need = packages.needed(method, strategies.get(strategy).deepspeed)
    if "bitsandbytes" in need:
        pins["bitsandbytes"] = backend.bitsandbytes
        rule, sources = f"bitsandbytes-on-{backend.key}", list(backend.bitsandbytes_sources)
        ev.append(Evidence("packages.bitsandbytes", "predicted", backend.bitsandbytes_says, rule=rule, sources=sources))
    axes = {"precision": precision, "quantization": quantization, "method": "lora" if method == "qlora" else method}
    axes["strategy"] = strategy
    for name in need:
        if name != "bitsandbytes":
            pins[name] = _pick_package(name, gpu, method, axes, backend.torch, data, passes, ev, pins, notes)
    for known in backend.known_on(gpu.arch):
        ev.append(
            Evidence("known", "predicted", known.says, rule=f"{backend.key}-known-issue", sources=list(known.sources))
        )
    parts = (precision, quantization, strategy, backend.torch, backend.variant, pins, ev, notes, memory)
    return Recommendation(gpu, gpus, method, *parts, backend=backend)


def _other_precision(gpu: GpuModel, backend, ev: list) -> str:
    precision = precision_for(gpu)
    says = {
        "bf16": f"{gpu.name} ({gpu.architecture}) runs bf16 on {backend.name}: bf16 mixed precision",
        "fp16": f"{gpu.name} ({gpu.architecture}) has no bf16 on {backend.name}: fp16 mixed precision",
        "fp32": f"{gpu.name} ({gpu.architecture}) has neither bf16 nor fp16 matrix units: fp32",
    }[precision]
    if backend.key == "mps":
        says += " (bf16 on MPS needs macOS 14 or newer)"
    ev.append(Evidence("precision", "predicted", says, rule=f"{backend.key}-precision", sources=list(gpu.sources)))
    return precision


def _devices(gpu: GpuModel, gpus: int, backend, ev: list, notes: list[str]) -> tuple[int, int]:
    """(cards, devices torch sees): one device where the backend has no distributed library."""
    devices = gpus * gpu.devices
    if devices > 1 and not backend.distributed:
        notes.append(f"{backend.name} has no distributed training: one process on one device (--gpus {gpus} not used)")
        ev.append(
            Evidence(
                "strategy",
                "predicted",
                f"{backend.name}: torch.distributed has no backend for it, so training runs on one device",
                rule=f"{backend.key}-one-device",
                sources=list(backend.distributed_sources),
            )
        )
        return 1, 1
    if gpu.devices > 1:
        notes.append(
            f"torch sees each {gpu.name} as {gpu.devices} devices: {gpus} card(s) are {devices} processes of "
            f"{gpu.memory_gb[0] / gpu.devices:g} GB each (torchrun --nproc_per_node {devices})"
        )
    return gpus, devices


def _other_strategy(gpu: GpuModel, devices: int, method: str, backend, data, ev: list) -> str:
    """The card-count rules over the devices torch sees; a full fine-tune sharded by DeepSpeed ZeRO-3
    where DeepSpeed says it is validated on the chip, else by torch's FSDP."""
    strategy = _strategy(devices, method, data, ev, "devices" if gpu.devices > 1 else "cards")
    if devices > 1:
        ev.append(
            Evidence(
                "strategy",
                "predicted",
                f"several devices talk through {backend.distributed}",
                rule=f"{backend.key}-distributed",
                sources=list(backend.distributed_sources),
            )
        )
    if not strategies.get(strategy).deepspeed:
        return strategy
    says = backend.deepspeed_says
    if not backend.deepspeed_on(gpu.arch):
        strategy = strategies.for_trainer_fsdp(1).name
        says = (
            f"DeepSpeed is not validated on {gpu.arch} ({says}): shard with torch's FSDP (full shard) through the "
            "Trainer instead"
        )
    rule, sources = f"{backend.key}-deepspeed", list(backend.deepspeed_sources)
    ev.append(Evidence("strategy", "predicted", says, rule=rule, sources=sources))
    return strategy


def _other_torch(gpu: GpuModel, backend, ev: list, notes: list[str]) -> dict[str, str]:
    """torch's pin and the packages the backend installs beside it, with the build's and the host's evidence."""
    ev.append(
        Evidence(
            "torch", "predicted", backend.torch_says, rule=f"torch-on-{backend.key}", sources=backend.torch_sources
        )
    )
    ev.append(
        Evidence("torch.host", "predicted", backend.host, rule=f"{backend.key}-host", sources=backend.host_sources)
    )
    if not backend.builds_for(gpu.arch):
        notes.append(
            f"torch {backend.torch}'s {backend.name} wheels carry no kernels for {gpu.arch} (they carry "
            f"{', '.join(backend.targets)})"
        )
    pins = {"torch": f"=={backend.torch}"}
    for text in backend.also:
        req = Requirement(text)
        pins[req.name] = str(req.specifier)
    return pins


def choose_by_fit(
    gpu: GpuModel,
    gpus: int,
    methods: list[str],
    entry,
    cal,
    context,
    seq_len: int = 2048,
    capacity: float | None = None,
):
    """The first (method, strategy) whose predicted per-card peak fits the card with the margin:
    methods in the order given (full before lora before qlora: the most faithful that fits),
    strategies from fastest to leanest (one card: single; several: ddp, zero2, zero3), and ZeRO-3
    with CPU offload only when nothing fits on the cards alone (it needs host memory and is slow;
    not with 4-bit weights). `capacity`: bytes of one card (fit.card_capacity: the size the user's
    card name gives, or --gpu-memory), else the card's smallest. Returns (method, strategy,
    Evidence), or None when nothing fits."""
    from harness.answers import fit

    precision = precision_for(gpu)
    capacity = capacity or fit.card_capacity(gpu, "", None)
    candidates = [(m, s) for m in methods for s in strategies.recommendable(gpus, offload=False)] + [
        (m, s) for m in methods if m != "qlora" for s in strategies.recommendable(gpus, offload=True)
    ]
    tried = []
    for method, strategy in candidates:
        run = fit.Run(
            method=method,
            precision=precision,
            quantization="nf4" if method == "qlora" else "none",
            strategy=strategy,
            cards=gpus,
            seq_len=seq_len,
            batch=1,
            grad_ckpt=True,
        )
        p = fit.predict(entry.shape, run, cal, capacity, context.bytes)
        tried.append(f"{method}/{strategy} {p.total / fit.GIB:,.1f} GiB")
        if p.verdict == "fits":
            host = f"; host memory per process {sum(p.host.values()) / fit.GIB:,.1f} GiB" if p.host else ""
            says = (
                f"{entry.title} with {method} under {strategy} on {gpus} x {gpu.name}: predicted "
                f"{p.total / fit.GIB:,.1f} "
                f"GiB per card of {capacity / fit.GIB:,.0f} (sequence {seq_len}, batch 1, gradient checkpointing "
                f"on{host}); "
                f"tried first: {', '.join(tried[:-1]) or 'nothing'}. {p.why}"
            )
            return (
                method,
                strategy,
                Evidence(
                    "strategy",
                    "predicted",
                    says,
                    rule="compat-fit",
                    sources=list(context.sources[:1]) + list(entry.sources[:1]),
                ),
            )
    return None


def render_text(rec: Recommendation) -> str:
    g = rec.gpu
    what = f"compute capability {g.cc_text}" if g.cuda else rec.backend.name
    lines = [
        f"{g.name} ({g.architecture}, {what}, {rec.memory or g.memory_text()}) x{rec.gpus}, method {rec.method}",
        "",
        f"  precision     {rec.precision}",
        f"  quantization  {rec.quantization}",
        f"  strategy      {rec.strategy}",
        f"  torch         {rec.torch_pin[7:]}   ({rec.install})"
        + (f"; needs NVIDIA driver >= {rec.driver_min}" if rec.driver_min else ""),
    ]
    if rec.backend:
        lines.insert(
            1, f"predicted only: compat has not run on {g.arch} yet; torch's device here is {rec.backend.device!r}"
        )
    for name, spec in rec.packages.items():
        if name != "torch":
            lines.append(f"  {name:<13} {spec or 'any'}")
    lines += ["", "Evidence:"]
    for e in rec.evidence:
        head = f"  [{e.kind}] {e.about}: {e.says}"
        lines.append(head)
        if e.kind == "measured":
            lines.append(
                f"      records {', '.join(r[:8] for r in e.records)} on {e.hardware}, {e.date}, measured "
                f"{', '.join(e.measured_by) or 'by compat bisect'}"
            )
        else:
            if e.rule:
                lines.append(f"      rule {e.rule}")
            for s in e.sources:
                lines.append(f"      {s}")
    if rec.notes:
        lines += ["", "Notes:"] + [f"  - {n}" for n in rec.notes]
    return "\n".join(lines) + "\n"


def render_constraints(rec: Recommendation, command: str) -> str:
    lines = [
        f"# {command}",
        f"# {rec.gpu.name} ({rec.gpu.arch}) x{rec.gpus}, method {rec.method}: precision {rec.precision}, "
        f"quantization {rec.quantization}, strategy {rec.strategy}",
        f"# torch's {rec.torch_variant} build is on its own index: pip install -c THIS_FILE torch "
        f"--index-url {rec.torch_index}"
        if rec.torch_index
        else "# torch from PyPI: pip install -c THIS_FILE torch",
        rec.torch_pin,
    ]
    for name, spec in rec.packages.items():
        if name != "torch" and spec:
            lines.append(f"{name}{spec}")
    return "\n".join(lines) + "\n"


def per_card(data: ResolverData, recs: list[dict]) -> list[dict]:
    """For each card in the GPU database, `compat recommend --gpu CARD --method qlora`'s answer
    and its evidence, with the number of records of the card's architecture. `recs`: the rows
    the page shows (a cell run many times counts once). What the page's per-card answers show."""
    out = []
    passes = Passes(recs)
    counts: dict[str, int] = {}
    for r in recs:
        counts[r["axes"]["hardware"]] = counts.get(r["axes"]["hardware"], 0) + 1
    for gpu in data.gpus.gpus:
        rec = recommend(gpu, 1, "qlora", data, passes)
        out.append(
            {
                "gpu": gpu.name,
                "cc": gpu.cc_text,
                "backend": rec.backend.name if rec.backend else "CUDA",
                "arch": gpu.arch,
                "measured": counts.get(gpu.arch, 0),
                "precision": rec.precision,
                "torch": rec.torch_pin[7:],
                "bitsandbytes": rec.packages.get("bitsandbytes"),
                "evidence": [e.as_dict() for e in rec.evidence],
            }
        )
    return out
