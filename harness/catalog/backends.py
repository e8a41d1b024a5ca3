"""The backends of cards that are not NVIDIA's (matrix/backends.toml): how torch reaches them, and
what QLoRA, several devices and DeepSpeed need there. Every fact is predicted, with its sources.

    backends = Backends.load(Path("matrix"))
    rocm = backends.get("rocm")       # Backend(name="ROCm", torch="2.13.0", index=".../rocm7.2", ...)
    rocm.qlora_on("gfx1100")          # True: bitsandbytes' ROCm wheels are built for it
    rocm.known_on("gfx942")           # what is known to break on that target

No torch: read by `compat recommend`.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from pathlib import Path

from harness.catalog.gpus import BACKENDS
from harness.errors import MatrixError
from harness.tomldata import SPECIFIER, TEXT, URL, Key, Table, check, kind, load_data

_TEXTS = kind(lambda v: isinstance(v, list) and all(isinstance(x, str) and x.strip() for x in v), "must list text")
_URLS = kind(lambda v: isinstance(v, list) and v, "must list at least one URL")
_MAYBE_SPEC = kind(lambda v: v == "" or SPECIFIER.problem(v) is None, '{r} is not a version specifier (or "")')
_SAYS = Key.of(TEXT, required=True)
BACKEND = Table(
    {
        "name": Key.of(TEXT, required=True),
        "device": Key.of(
            kind(lambda v: v in ("cuda", "mps", "xpu", "npu"), "{r}: cuda, mps, xpu or npu"), required=True
        ),
        "torch": Key.of(TEXT, required=True),
        "variant": Key.of(TEXT, required=True),
        "index": Key.of(
            kind(lambda v: v == "" or URL.problem(v) is None, '{r} is not a URL (or "" for PyPI)'), required=True
        ),
        "also": Key.of(_TEXTS, required=True),
        "torch_says": _SAYS,
        "torch_sources": Key.of(_URLS, each=URL, required=True),
        "targets": Key.of(_TEXTS, required=True),
        "host": _SAYS,
        "host_sources": Key.of(_URLS, each=URL, required=True),
        "bitsandbytes": Key.of(_MAYBE_SPEC, required=True),
        "bitsandbytes_targets": Key.of(_TEXTS, required=True),
        "bitsandbytes_says": _SAYS,
        "bitsandbytes_sources": Key.of(_URLS, each=URL, required=True),
        "distributed": Key.of(TEXT, required=True),
        "distributed_sources": Key.of(_URLS, each=URL, required=True),
        "deepspeed_targets": Key.of(_TEXTS, required=True),
        "deepspeed_says": _SAYS,
        "deepspeed_sources": Key.of(_URLS, each=URL, required=True),
        "known": Key.of(
            kind(lambda v: isinstance(v, list) and all(isinstance(k, dict) for k in v), "must be [[known]] tables")
        ),
    }
)
KNOWN = Table({"says": _SAYS, "sources": Key.of(_URLS, each=URL, required=True), "targets": Key.of(_TEXTS)})


@dataclasses.dataclass(frozen=True)
class Known:
    says: str
    sources: tuple[str, ...]
    targets: tuple[str, ...] = ()  # fnmatch patterns; () for every card of the backend


def _on(target: str, patterns) -> bool:
    return any(fnmatch.fnmatchcase(target, p) for p in patterns)


@dataclasses.dataclass(frozen=True)
class Backend:
    """A [backend.KEY] table (its keys are the fields; matrix/backends.toml says what each is)."""

    key: str  # rocm, mps, xpu, npu: a card's backend in matrix/gpus.toml
    name: str
    device: str
    torch: str
    variant: str
    index: str
    also: list
    torch_says: str
    torch_sources: list
    targets: list
    host: str
    host_sources: list
    bitsandbytes: str
    bitsandbytes_targets: list
    bitsandbytes_says: str
    bitsandbytes_sources: list
    distributed: str
    distributed_sources: list
    deepspeed_targets: list
    deepspeed_says: str
    deepspeed_sources: list
    known: tuple[Known, ...] = ()

    def builds_for(self, target: str) -> bool:
        """Whether the torch wheels carry kernels for the target (True where they do not say per chip)."""
        return not self.targets or _on(target, self.targets)

    def qlora_on(self, target: str) -> bool:
        """Whether a bitsandbytes release runs 4-bit on this target."""
        return bool(self.bitsandbytes) and (not self.bitsandbytes_targets or _on(target, self.bitsandbytes_targets))

    def deepspeed_on(self, target: str) -> bool:
        return _on(target, self.deepspeed_targets)

    def known_on(self, target: str) -> list[Known]:
        return [k for k in self.known if not k.targets or _on(target, k.targets)]

    def install(self) -> str:
        """The pip command that installs torch (and what the backend needs beside it)."""
        index = f" --index-url {self.index}" if self.index else ""
        also = "".join(f" && pip install '{a}'" for a in self.also)
        return f"pip install torch=={self.torch}{index}{also}"


def _known(key: str, entries: list, where, problems: list[str]) -> tuple[Known, ...]:
    """A backend's [[known]] tables, checked (a problem named at its table)."""
    label, out = f"backend.{key}.known", []
    for n, entry in enumerate(entries):

        def at(k, msg, n=n):
            return where(k, f"[[{label}]] #{n + 1}.{k}", msg, table=label, nth=n)

        if check(entry, KNOWN, at, problems, lambda msg, at=at: at("says", msg)):
            out.append(Known(entry["says"], tuple(entry["sources"]), tuple(entry.get("targets", ()))))
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class Backends:
    path: Path
    by_key: dict

    @classmethod
    def load(cls, directory: Path) -> "Backends":
        path = directory / "backends.toml"
        doc, where = load_data(path, ("backend",))
        problems: list[str] = []
        found = {}
        for key, table in (doc.get("backend") or {}).items():
            at = lambda k, msg, key=key: where(k, f"[backend.{key}].{k}", msg, table=f"backend.{key}")  # noqa: E731
            at_table = lambda msg, key=key: where(key, f"[backend.{key}]", msg, table=f"backend.{key}")  # noqa: E731
            if key not in BACKENDS[1:]:
                problems.append(at_table(f"not a backend of a card: {', '.join(BACKENDS[1:-1])} or {BACKENDS[-1]}"))
                continue
            if not isinstance(table, dict) or not check(table, BACKEND, at, problems, at_table):
                continue
            known = _known(key, table.get("known", []), where, problems)
            found[key] = Backend(key, **{k: v for k, v in table.items() if k != "known"}, known=known)
        if problems:
            raise MatrixError(problems)
        return cls(path, found)

    def get(self, key: str) -> Backend | None:
        return self.by_key.get(key)
