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
import difflib
import re
from pathlib import Path

from harness.errors import MatrixError, UsageError
from harness.tomldata import did_you_mean, load_data

FLAGS = ("bf16", "fp16_tensor_cores", "tf32", "fp8")
KEYS = ("name", "aliases", "architecture", "cc", "memory_gb", *FLAGS, "sources")
_PREFIXES = ("nvidia", "geforce", "tesla")


def normalize(name: str) -> str:
    """'NVIDIA GeForce RTX-4090' -> 'rtx4090': what two spellings of one card have in common."""
    key = re.sub(r"[\s\-_]+", "", name.lower())
    changed = True
    while changed:
        changed = False
        for prefix in _PREFIXES:
            if key.startswith(prefix) and len(key) > len(prefix):
                key, changed = key[len(prefix):], True
    return key


@dataclasses.dataclass(frozen=True)
class GpuModel:
    key: str
    name: str
    aliases: tuple[str, ...]
    architecture: str
    cc: tuple[int, int]
    memory_gb: tuple[float, ...]
    bf16: bool
    fp16_tensor_cores: bool
    tf32: bool
    fp8: bool
    sources: tuple[str, ...]  # URLs that state these facts

    @property
    def arch(self) -> str:
        """The hardware axis value: sm_61 for compute capability 6.1."""
        return f"sm_{self.cc[0]}{self.cc[1]}"

    @property
    def cc_text(self) -> str:
        return f"{self.cc[0]}.{self.cc[1]}"


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
            at = lambda k, msg: where(k, f"[gpu.{key}].{k}", msg, table=f"gpu.{key}")  # noqa: E731
            if not isinstance(table, dict):
                problems.append(where(key, f"gpu.{key}", "must be a table"))
                continue
            for k in table:
                if k not in KEYS:
                    problems.append(at(k, "unknown key" + did_you_mean(k, KEYS)))
            for k in KEYS:
                if k not in table:
                    problems.append(where(key, f"[gpu.{key}]", f"missing key {k!r}", table=f"gpu.{key}"))
            if any(k not in table for k in KEYS):
                continue
            cc = re.fullmatch(r"(\d+)\.(\d)", str(table["cc"]))
            if not isinstance(table["cc"], str) or not cc:
                problems.append(at("cc", f"{table['cc']!r} is not a compute capability like \"8.6\""))
                continue
            for k in FLAGS:
                if not isinstance(table[k], bool):
                    problems.append(at(k, f"must be true or false, not {table[k]!r}"))
            mem = table["memory_gb"]
            if not isinstance(mem, list) or not mem or not all(isinstance(m, (int, float)) and not isinstance(m, bool) and m > 0 for m in mem):
                problems.append(at("memory_gb", "must be a non-empty list of sizes in GB"))
            aliases = table["aliases"]
            if not isinstance(aliases, list) or not aliases or not all(isinstance(a, str) and a.strip() for a in aliases):
                problems.append(at("aliases", "must be a non-empty list of names"))
                aliases = []
            for alias in [table["name"], *aliases]:
                norm = normalize(str(alias))
                if norm in seen_alias and seen_alias[norm] != key:
                    problems.append(at("aliases", f"{alias!r} already names gpu.{seen_alias[norm]}"))
                seen_alias[norm] = key
            srcs = table["sources"]
            if not isinstance(srcs, list) or not srcs:
                problems.append(at("sources", "must list at least one URL"))
                srcs = []
            for url in srcs:
                if not isinstance(url, str) or not re.match(r"^https?://\S+$", url):
                    problems.append(at("sources", f"{url!r} is not a URL"))
            gpus.append(GpuModel(
                key=key, name=str(table["name"]), aliases=tuple(aliases), architecture=str(table["architecture"]),
                cc=(int(cc[1]), int(cc[2])), memory_gb=tuple(mem) if isinstance(mem, list) else (),
                bf16=table["bf16"] is True, fp16_tensor_cores=table["fp16_tensor_cores"] is True,
                tf32=table["tf32"] is True, fp8=table["fp8"] is True,
                sources=tuple(srcs),
            ))
        if not gpus and not problems:
            problems.append(f"{path}: no [gpu.KEY] tables")
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
        close = difflib.get_close_matches(wanted, list(names), n=6, cutoff=0.5)
        suggestions = list(dict.fromkeys(names[c].aliases[0] for c in close))[:3]
        hint = f"; did you mean: {', '.join(suggestions)}?" if suggestions else ""
        raise UsageError(
            f"unknown GPU {name!r}{hint} (compat knows {len(self.gpus)} cards: "
            f"{', '.join(g.aliases[0] for g in self.gpus)}; add one to {self.path})"
        )

    def by_arch(self, arch: str) -> list[GpuModel]:
        return [g for g in self.gpus if g.arch == arch]
