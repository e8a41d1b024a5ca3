"""The GPU database (matrix/gpus.toml): cards, their aliases and the facts the resolver uses.

    db = GpuDb.load(Path("matrix"))
    db.find("tesla-p4")     # GpuModel(key="p4", name="Tesla P4", cc=(6, 1), ...)
    db.find("P5")           # UsageError: unknown GPU 'P5'; did you mean: P4, P40, P100?

Names are matched case-insensitively with spaces, '-' and '_' ignored, and an optional "NVIDIA"
/ "GeForce" / "Tesla" prefix, so "Tesla P4", "tesla-p4", "p4" and "NVIDIA Tesla P4" are one card.
No torch: this is read by `compat recommend`, which must start fast.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from harness.errors import MatrixError, UsageError
from harness.tomldata import CC, TEXT, URL, Key, Table, check, kind, load_data

FLAGS = ("bf16", "fp16_tensor_cores", "tf32", "fp8")
# how torch reaches a card: CUDA (NVIDIA), else a backend of matrix/backends.toml; a non-CUDA card's
# `target` is its hardware axis value, of the form its backend's pattern gives
BACKENDS = ("cuda", "rocm", "mps", "xpu", "npu")
TARGETS = {
    "rocm": (
        r"gfx[0-9a-f]{3,4}",
        "an LLVM target like gfx942 (rocminfo, torch.cuda.get_device_properties().gcnArchName)",
    ),
    "mps": (r"mps", '"mps"'),
    "xpu": (r"xpu-[a-z0-9]+", "xpu- and Intel's device family like xpu-pvc (torch.xpu.get_arch_list() names)"),
    "npu": (r"npu-[a-z0-9]+", "npu- and the chip like npu-910b"),
}
# a [gpu.KEY] table; every key is required
GPU = Table(
    {
        "name": Key.of(TEXT, required=True),
        "aliases": Key.of(
            kind(
                lambda v: isinstance(v, list) and v and all(isinstance(a, str) and a.strip() for a in v),
                "must be a non-empty list of names",
            ),
            required=True,
        ),
        "architecture": Key.of(TEXT, required=True),
        "backend": Key.of(kind(lambda v: v in BACKENDS, f"must be one of {', '.join(BACKENDS)}, not {{r}}")),
        "cc": Key.of(CC),
        "target": Key.of(TEXT),
        "devices": Key.of(kind(lambda v: type(v) is int and 1 <= v <= 8, "must be a whole number of devices, 1 to 8")),
        "unified_memory": Key.of(kind(lambda v: isinstance(v, bool), "must be true or false, not {r}")),
        "memory_gb": Key.of(
            kind(
                lambda v: (
                    isinstance(v, list)
                    and v
                    and all(isinstance(m, (int, float)) and not isinstance(m, bool) and m > 0 for m in v)
                ),
                "must be a non-empty list of sizes in GB",
            ),
            required=True,
        ),
        "alias_memory_gb": Key.of(
            kind(
                lambda v: (
                    isinstance(v, dict)
                    and all(isinstance(m, (int, float)) and not isinstance(m, bool) for m in v.values())
                ),
                "must be a table of alias = size in GB",
            )
        ),
        "memory_mib": Key.of(
            kind(
                lambda v: (
                    isinstance(v, list)
                    and v
                    and all(isinstance(m, int) and not isinstance(m, bool) and m >= 0 for m in v)
                ),
                "must be a list of MiB, one per memory_gb size (0 where not known)",
            )
        ),
        **{
            flag: Key.of(kind(lambda v: isinstance(v, bool), "must be true or false, not {r}"), required=True)
            for flag in FLAGS
        },
        "sources": Key.of(
            kind(lambda v: isinstance(v, list) and v, "must list at least one URL"), each=URL, required=True
        ),
    }
)
KEYS = tuple(GPU.keys)
_PREFIXES = ("nvidia", "geforce", "tesla", "amd", "instinct", "radeon", "intel", "apple", "huawei")


def normalize(name: str) -> str:
    """'NVIDIA GeForce RTX-4090' -> 'rtx4090': what two spellings of one card have in common."""
    key = re.sub(r"[\s\-_]+", "", name.lower())
    changed = True
    while changed:
        changed = False
        for prefix in _PREFIXES:
            if key.startswith(prefix) and len(key) > len(prefix):
                key, changed = key[len(prefix) :], True
    return key


# NVIDIA's product names carry the architecture: a GeForce's first digits are its series (10
# Pascal, 16 and 20 Turing, 30 Ampere, 40 Ada, 50 Blackwell), a workstation RTX A card is Ampere
# and an "RTX N000 Ada" Ada, and a data-center card's letter is its architecture's (P Pascal, V
# Volta, T Turing, A Ampere, L Ada, H Hopper, B and GB Blackwell). Matched against normalize()d
# names; the first that matches wins. Used only to keep "did you mean" within an architecture.
_NAMING = (
    # other vendors first where a name could read as NVIDIA's: Intel's A770 is no Ampere A-card, its B580 no B200
    (r"^mi2\d\d", "CDNA2"),
    (r"^mi3\d\d", "CDNA3"),
    (r"^(rx)?7\d00(xtx?)?$", "RDNA3"),
    (r"^m\d", "Apple"),
    (r"^(arc)?a[357]\d0$", "Xe-HPG"),
    (r"^(arc)?b[57]\d0$", "Xe2"),
    (r"^(datacenter)?(gpu)?max1\d{3}|^pontevecchio", "Xe-HPC"),
    (r"^(ascend)?9\d\d[a-z]?$", "Ascend"),
    (r"^(gtx|rtx)?10[5-8]0", "Pascal"),
    (r"^(gtx|rtx)?(16[5-6]0|20[6-8]0)", "Turing"),
    (r"^(rtx)?30[5-9]0", "Ampere"),
    (r"^(rtx)?40[5-9]0", "Ada"),
    (r"^(rtx)?50[5-9]0", "Blackwell"),
    (r"^rtxpro", "Blackwell"),
    (r"^rtx\d000ada", "Ada"),
    (r"^(rtx)?a\d", "Ampere"),
    (r"^(quadro)?rtx[4-8]000$", "Turing"),
    (r"^p\d", "Pascal"),
    (r"^v\d", "Volta"),
    (r"^t\d", "Turing"),
    (r"^l\d", "Ada"),
    (r"^([hd]gx)?h\d", "Hopper"),
    (r"^([hd]gx)?g?b\d", "Blackwell"),
)


def architecture_of(normalized: str) -> str | None:
    """The architecture a card name says it is of ("rtx5050" -> "Blackwell"), or None."""
    for pattern, arch in _NAMING:
        if re.match(pattern, normalized):
            return arch
    return None


@dataclasses.dataclass(frozen=True)
class GpuModel:
    key: str
    name: str
    aliases: tuple[str, ...]
    architecture: str
    cc: tuple[int, int] | None  # CUDA compute capability; None on a card of another backend
    memory_gb: tuple[float, ...]
    bf16: bool
    fp16_tensor_cores: bool
    tf32: bool
    fp8: bool
    sources: tuple[str, ...]  # URLs that state these facts
    # what each memory_gb size exposes to software (nvidia-smi's total, NVML's memory.total), MiB; 0: not known
    memory_mib: tuple[int, ...] = ()
    # an alias that names one size without saying it ("H20-3e": 141): normalized alias -> GB
    alias_memory_gb: dict = dataclasses.field(default_factory=dict)
    # what a size without a memory_mib is taken to expose: the smallest share of its size as sold (GB
    # read as GiB) that any card of the database with one exposes (the safe side); set by GpuDb.load
    unknown_share: float = 1.0
    backend: str = "cuda"  # or a backend of matrix/backends.toml
    target: str = ""  # a non-CUDA card's hardware axis value (gfx942, mps, xpu-pvc, npu-910b)
    devices: int = 1  # devices torch sees for one card (an MI250 is two of 64 GB)
    unified_memory: bool = False  # memory_gb is the system's, shared (an Apple M chip): up to that much

    def variant(self, name: str) -> int | None:
        """The index in memory_gb of the size `name` names, whatever command it was typed to: a size
        the card is sold in, written in the name ("A100 80GB", "V100-PCIE-32GB", "4060 Ti 16 GB"),
        or an alias that stands for one ("H20-3e"); None where the name names none (callers then
        take the smallest: the safe side)."""
        norm = normalize(name)
        if norm in self.alias_memory_gb:
            return self.memory_gb.index(self.alias_memory_gb[norm])
        for number in reversed(re.findall(r"(\d+)\s*GB", name, re.IGNORECASE)):
            if float(number) in self.memory_gb:
                return self.memory_gb.index(float(number))
        return None

    def memory_text(self, name: str = "") -> str:
        """The card's memory as an answer states it: the size `name` names, else every size (with
        how torch sees a card of several devices, and "up to" where the memory is the system's)."""
        i = self.variant(name) if name else None
        sizes = [self.memory_gb[i]] if i is not None else self.memory_gb
        text = "/".join(f"{m:g}" for m in sizes) + " GB"
        if self.unified_memory:
            return f"up to {text} unified memory, shared with the system"
        if self.devices > 1:
            each = "/".join(f"{m / self.devices:g}" for m in sizes)
            return f"{text}: {self.devices} devices of {each} GB as torch sees it"
        return text

    @property
    def arch(self) -> str:
        """The hardware axis value: sm_61 for compute capability 6.1; a non-CUDA card's target."""
        return self.target or f"sm_{self.cc[0]}{self.cc[1]}"

    @property
    def cc_text(self) -> str:
        """ "6.1"; "" for a card without a CUDA compute capability."""
        return f"{self.cc[0]}.{self.cc[1]}" if self.cc else ""

    @property
    def cuda(self) -> bool:
        return self.backend == "cuda"


def precision_for(gpu: GpuModel) -> str:
    """bf16 from compute capability 8.0, fp16 on older cards with tensor cores, else fp32; on a
    card of another backend, from its bf16 and fp16 flags alike."""
    bf16 = gpu.cc >= (8, 0) if gpu.cc else gpu.bf16
    return "bf16" if bf16 else "fp16" if gpu.fp16_tensor_cores else "fp32"


def _backend(key: str, table: dict, at) -> str | None:
    """What is wrong with a card's backend keys: a CUDA card has a compute capability and no
    target; another has a target of its backend's form and no compute capability."""
    backend = table.get("backend", "cuda")
    if backend == "cuda":
        if "cc" not in table:
            return at("cc", "missing key 'cc' (a CUDA card's compute capability)")
        if "target" in table:
            return at("target", "a CUDA card's hardware axis value comes from its cc; no target")
        return None
    if "cc" in table:
        return at("cc", f"a {backend} card has no CUDA compute capability; its target says what it is")
    pattern, form = TARGETS[backend]
    if not re.fullmatch(pattern, str(table.get("target", ""))):
        return at("target", f"a {backend} card needs a target: {form}")
    return None


def _sizes(key: str, table: dict, where, problems: list[str]) -> dict[str, float] | None:
    """A card's alias_memory_gb, normalized: each an alias of the card and one of its sizes (a
    problem named where not; left out). None, the problem named, where memory_mib does not give
    one figure a size."""
    if "memory_mib" in table and len(table["memory_mib"]) != len(table["memory_gb"]):
        problems.append(
            where(
                "memory_mib",
                f"[gpu.{key}].memory_mib",
                f"has {len(table['memory_mib'])} sizes, memory_gb {len(table['memory_gb'])}: one MiB figure a size",
                table=f"gpu.{key}",
            )
        )
        return None
    names = {normalize(a) for a in [table["name"], *table["aliases"]]}
    out = {}
    for alias, gb in (table.get("alias_memory_gb") or {}).items():
        if normalize(alias) in names and gb in table["memory_gb"]:
            out[normalize(alias)] = float(gb)
        else:
            problems.append(
                where(
                    "alias_memory_gb",
                    f"[gpu.{key}].alias_memory_gb",
                    f"{normalize(alias)!r} = {gb}: an alias of this card and one of its memory_gb sizes",
                    table=f"gpu.{key}",
                )
            )
    return out


@dataclasses.dataclass(frozen=True)
class GpuDb:
    path: Path
    gpus: tuple[GpuModel, ...]

    @classmethod
    def load(cls, directory: Path) -> "GpuDb":
        path = directory / "gpus.toml"
        doc, where = load_data(path, ("gpu",))
        problems: list[str] = []
        gpus, seen_alias = [], {}
        for key, table in (doc.get("gpu") or {}).items():
            if not isinstance(table, dict):
                problems.append(where(key, f"gpu.{key}", "must be a table"))
                continue
            at_table = lambda msg: where(key, f"[gpu.{key}]", msg, table=f"gpu.{key}")  # noqa: E731
            if not check(
                table, GPU, lambda k, msg: where(k, f"[gpu.{key}].{k}", msg, table=f"gpu.{key}"), problems, at_table
            ):
                continue
            sized = _sizes(key, table, where, problems)
            wrong = _backend(key, table, lambda k, msg: where(k, f"[gpu.{key}].{k}", msg, table=f"gpu.{key}"))
            if wrong:
                problems.append(wrong)
            if sized is None or wrong:
                continue
            for alias in [table["name"], *table["aliases"]]:
                norm = normalize(alias)
                if norm in seen_alias and seen_alias[norm] != key:
                    problems.append(
                        where(
                            "aliases",
                            f"[gpu.{key}].aliases",
                            f"{alias!r} already names gpu.{seen_alias[norm]}",
                            table=f"gpu.{key}",
                        )
                    )
                seen_alias[norm] = key
            cc = tuple(int(n) for n in table["cc"].split(".")) if "cc" in table else None
            gpus.append(
                GpuModel(
                    key=key,
                    name=table["name"],
                    aliases=tuple(table["aliases"]),
                    architecture=table["architecture"],
                    cc=cc,
                    backend=table.get("backend", "cuda"),
                    target=table.get("target", ""),
                    devices=table.get("devices", 1),
                    unified_memory=table.get("unified_memory", False),
                    memory_gb=tuple(table["memory_gb"]),
                    memory_mib=tuple(table.get("memory_mib") or ()),
                    alias_memory_gb=sized,
                    sources=tuple(table["sources"]),
                    **{flag: table[flag] for flag in FLAGS},
                )
            )
        if not gpus and not problems:
            problems.append(f"{path}: no [gpu.KEY] tables")
        shares = [mib / (gb * 1024) for g in gpus for gb, mib in zip(g.memory_gb, g.memory_mib) if mib]
        if shares:
            gpus = [dataclasses.replace(g, unknown_share=min(shares)) for g in gpus]
        if problems:
            raise MatrixError(problems)
        return cls(path, tuple(gpus))

    def find(self, name: str) -> GpuModel:
        wanted = normalize(name)
        names: dict[str, GpuModel] = {}
        for gpu in self.gpus:
            for alias in (gpu.key, gpu.name, *gpu.aliases):
                names[normalize(alias)] = gpu
        if wanted in names:
            return names[wanted]
        # a similar name of another architecture is another card, not a typo of this one: an
        # "RTX 5050" is no RTX 4050; where the name tells no architecture, nothing is suggested
        import difflib  # only for a name compat does not know

        arch = architecture_of(wanted)
        near = difflib.get_close_matches(wanted, list(names), n=12, cutoff=0.5)
        close = [c for c in near if arch is not None and names[c].architecture.split()[0] == arch]
        suggestions = list(dict.fromkeys(names[c].aliases[0] for c in close))[:3]
        hint = f"; did you mean: {', '.join(suggestions)}?" if suggestions else ""
        from harness import home

        installed = home.PACKAGED in self.path.parents  # never ask a user to edit an installed package
        add = (
            "a card compat lacks goes into matrix/gpus.toml of a checkout of compat (COMPAT_HOME=CHECKOUT), or "
            "`compat recommend --gpu` of a card of the same architecture with --gpu-memory"
            if installed
            else f"add one to {self.path}"
        )
        raise UsageError(
            f"unknown GPU {name!r}{hint} (compat knows {len(self.gpus)} cards: "
            f"{', '.join(g.aliases[0] for g in self.gpus)}; {add})"
        )

    def by_arch(self, arch: str) -> list[GpuModel]:
        return [g for g in self.gpus if g.arch == arch]
