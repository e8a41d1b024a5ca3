"""What this host has, found without importing torch: CPU name, and CUDA GPUs through NVML
(nvidia-ml-py) with `nvidia-smi` as the fallback.

Which card is which: NVML numbers cards in PCI bus order; CUDA numbers them fastest first unless
CUDA_DEVICE_ORDER=PCI_BUS_ID. So compat names a card by its UUID wherever it can: a cell's
CUDA_VISIBLE_DEVICES lists the UUIDs of its cards (and CUDA_DEVICE_ORDER=PCI_BUS_ID is set for
anything inside that counts), and a runner's own CUDA_VISIBLE_DEVICES (a shared host that lends
this job some cards) is read as CUDA reads it: indices, UUIDs or unique UUID prefixes, up to the
first entry that names no card. A card in MIG mode, or a MIG slice named there, is refused with
the reason: a slice has a fraction of the card's memory and compute, and its records would
misstate the card.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import platform
import re
import shutil
import subprocess

from harness.errors import UsageError

MIG_REFUSAL = (
    "compat runs cells on whole cards only: a MIG slice has a fraction of the card's memory and compute, so "
    "its records would misstate the card"
)


@dataclasses.dataclass(frozen=True)
class Gpu:
    index: int  # NVML's index: PCI bus order, whatever CUDA_VISIBLE_DEVICES says
    name: str
    compute_capability: str  # "9.0"
    memory_bytes: int
    uuid: str = ""  # "GPU-5f1c…": what a cell's CUDA_VISIBLE_DEVICES names it by
    pci_bus_id: str = ""

    @property
    def arch(self) -> str:
        """The hardware axis value: sm_90 for compute capability 9.0."""
        major, minor = self.compute_capability.split(".")
        return f"sm_{major}{minor}"

    @property
    def cuda_id(self) -> str:
        """How CUDA_VISIBLE_DEVICES names this card: its UUID, else its index in PCI bus order."""
        return self.uuid or str(self.index)


@dataclasses.dataclass(frozen=True)
class Host:
    cpu: str
    gpus: tuple[Gpu, ...]  # the cards compat may use (visible to it, not in MIG mode)
    driver: str | None
    cuda_driver: str | None  # the CUDA version the driver supports, e.g. "12.8"
    gpu_probe: str  # how GPUs were looked for, and what that said
    refused: tuple[str, ...] = ()  # cards present but not used, each with the reason
    cpu_flags: tuple[str, ...] = ()  # the CPU's instruction-set flags that choose a library's kernels (CPU_FLAGS)

    @property
    def archs(self) -> set[str]:
        return {"cpu"} | {g.arch for g in self.gpus}

    def gpu(self, index: int) -> Gpu:
        return next(g for g in self.gpus if g.index == index)

    def fingerprint(self) -> dict:
        return {
            "cpu": self.cpu,
            "cpu_flags": list(self.cpu_flags),
            "gpus": [dataclasses.asdict(g) | {"arch": g.arch} for g in self.gpus],
            "driver": self.driver,
            "cuda_driver": self.cuda_driver,
        }


def runner_identity(environ=os.environ) -> dict:
    """Who made a record, kept in it so merged results say where each came from: the name
    $COMPAT_RUNNER_NAME gives, else the GitHub Actions runner's name, else the host name; and
    the CI run's address when GitHub Actions ran it. A name that is not plain text (not UTF-8,
    markup, a path) is a UsageError before any cell runs: its records could not be written, or
    would carry it into every table."""
    from harness.evidence.records import CI_RUN, RUNNER_NAME

    source = next((k for k in ("COMPAT_RUNNER_NAME", "RUNNER_NAME") if environ.get(k)), None)
    name = environ[source] if source else (platform.node() or "unnamed")
    if not re.match(RUNNER_NAME, name):
        where = f"${source}" if source else "this host's name (set COMPAT_RUNNER_NAME to another)"
        raise UsageError(
            f"{where} = {name.encode('utf-8', 'backslashreplace').decode()!r} is not a runner name compat "
            "records: 1 to 100 letters, digits, spaces and ._@+()-, starting with a letter or digit"
        )
    from harness.evidence.trust import RESERVED_NAME

    if RESERVED_NAME.search(name):
        raise UsageError(
            f"runner name {name!r} is a label compat writes beside runner names (merged, from FILE, unnamed "
            "runner); set COMPAT_RUNNER_NAME to another"
        )
    out = {"name": name}
    server, repo, run = (environ.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    ci_run = f"{server}/{repo}/actions/runs/{run}"
    if server and repo and run and re.match(CI_RUN, ci_run):
        out["ci_run"] = ci_run
    return out


@functools.cache
def detect() -> Host:
    return probe(os.environ)


def probe(environ, nvml=None) -> Host:
    """The host as compat may use it: every card NVML (else nvidia-smi) finds, less those the
    runner's CUDA_VISIBLE_DEVICES hides and those in MIG mode. `nvml` stands in for pynvml in
    tests. A CUDA_VISIBLE_DEVICES that names cards by index on a host of mixed cards, without
    CUDA_DEVICE_ORDER=PCI_BUS_ID, is a UsageError: CUDA and NVML would mean different cards."""
    cards, driver, cuda, how = _nvml(nvml)
    if not cards:
        smi = _nvidia_smi()
        if smi[0]:
            cards, driver, cuda, how = smi
        else:
            how = f"{how}; {smi[3]}"
    gpus, refused = visible(cards, environ.get("CUDA_VISIBLE_DEVICES"), environ.get("CUDA_DEVICE_ORDER"))
    for gpu, mig in list(gpus):
        if mig:
            refused.append(
                f"GPU {gpu.index} ({gpu.name}) is in MIG mode: {MIG_REFUSAL}; turn MIG off on it "
                f"(nvidia-smi -i {gpu.index} -mig 0) or leave it out with CUDA_VISIBLE_DEVICES"
            )
    usable = tuple(g for g, mig in gpus if not mig)
    if refused:
        how += "; " + "; ".join(refused)
    return Host(cpu_name(), usable, driver, cuda, how, tuple(refused), cpu_flags())


def visible(
    cards: list[tuple[Gpu, bool]], value: str | None, order: str | None
) -> tuple[list[tuple[Gpu, bool]], list[str]]:
    """The (card, in MIG mode) pairs CUDA_VISIBLE_DEVICES `value` lets this process use, in its
    order, and why any named card is not used. Unset: every card. CUDA reads the list up to its
    first entry that names no card (the ones after it are hidden too); an entry is an index, a
    GPU UUID or a unique prefix of one; a MIG slice's UUID is refused."""
    if value is None:
        return list(cards), []
    if not value.strip():
        return [], ["CUDA_VISIBLE_DEVICES is set and empty: the runner lets this job use no card"]
    chosen: list[tuple[Gpu, bool]] = []
    refused: list[str] = []
    by_index = False
    for entry in (e.strip() for e in value.split(",")):
        if entry.startswith("MIG-"):
            refused.append(f"CUDA_VISIBLE_DEVICES names the MIG slice {entry}: {MIG_REFUSAL}")
            continue
        if entry.isdigit() and int(entry) < len(cards):
            found = [cards[int(entry)]]
            by_index = True
        else:
            found = [c for c in cards if entry.startswith("GPU-") and c[0].uuid.startswith(entry)] if entry else []
        if len(found) != 1:
            refused.append(
                f"CUDA_VISIBLE_DEVICES={value}: {entry!r} names no card of this host, and CUDA uses no "
                "card listed after it"
            )
            break
        if found[0] not in chosen:
            chosen.append(found[0])
    names = {c[0].name for c in cards}
    if by_index and len(names) > 1 and (order or "FASTEST_FIRST") != "PCI_BUS_ID":
        raise UsageError(
            f"CUDA_VISIBLE_DEVICES={value} names cards by index on a host of different cards "
            f"({', '.join(sorted(names))}): "
            "CUDA numbers them fastest first and NVML by PCI bus, so an index may mean two cards. Set "
            "CUDA_DEVICE_ORDER=PCI_BUS_ID, or name the cards by UUID (nvidia-smi -L lists them)"
        )
    return chosen, refused


# The flags that decide which CPU kernels torch and bitsandbytes take: two CPU runners can
# legitimately disagree where one has them (bitsandbytes >= 0.49 repacks 4-bit weights for a
# fused kernel only on AVX512-BF16, issue 25).
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "avx512_vnni", "amx_bf16", "amx_int8", "amx_tile")


def cpu_flags(path: str = "/proc/cpuinfo") -> tuple[str, ...]:
    """CPU_FLAGS this host's CPU has, in that order; () where /proc/cpuinfo cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            have = next((set(line.split(":", 1)[1].split()) for line in f if line.startswith("flags")), set())
    except OSError:
        return ()
    return tuple(flag for flag in CPU_FLAGS if flag in have)


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _nvml(nvml=None):
    """([(Gpu, in MIG mode)], driver, CUDA version of the driver, what was found)."""
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            return [], None, None, "NVML: nvidia-ml-py is not installed"
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...
        return [], None, None, f"NVML: {exc}"
    try:
        cards = []
        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(h)
            uuid = bus = ""
            try:
                uuid = _text(nvml.nvmlDeviceGetUUID(h))
                bus = _text(nvml.nvmlDeviceGetPciInfo(h).busId)
            except Exception:  # an old driver: the card is still there, named by index
                pass
            try:
                mig = nvml.nvmlDeviceGetMigMode(h)[0] == getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1)
            except Exception:  # NVMLError_NotSupported: a card without MIG
                mig = False
            gpu = Gpu(
                i,
                _text(nvml.nvmlDeviceGetName(h)),
                f"{major}.{minor}",
                int(nvml.nvmlDeviceGetMemoryInfo(h).total),
                uuid,
                bus,
            )
            cards.append((gpu, mig))
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        cuda = nvml.nvmlSystemGetCudaDriverVersion_v2()
        return cards, driver, f"{cuda // 1000}.{cuda % 1000 // 10}", f"NVML: {len(cards)} GPU(s)"
    except Exception as exc:
        return [], None, None, f"NVML: {exc}"
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass


def _nvidia_smi():
    exe = shutil.which("nvidia-smi")
    if not exe:
        return [], None, None, "nvidia-smi: not found"
    try:
        out = subprocess.run(
            [
                exe,
                "--query-gpu=index,name,compute_cap,memory.total,driver_version,uuid,pci.bus_id,mig.mode.current",
                "--format=csv,noheader,nounits",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError) as exc:
        return [], None, None, f"nvidia-smi: {exc}"
    cards, driver = [], None
    for line in out.strip().splitlines():
        idx, name, cc, mem_mib, driver, uuid, bus, mig = [x.strip() for x in line.split(",")]
        cards.append((Gpu(int(idx), name, cc, int(float(mem_mib)) * 2**20, uuid, bus), mig == "Enabled"))
    return cards, driver, None, f"nvidia-smi: {len(cards)} GPU(s)"


class NvmlSampler:
    """Samples NVML's used memory of some cards, by physical index, from before a cell starts
    until it ends: the peak includes the CUDA context, allocator slack and any other process on
    the card (another rank's stray context shows up as a second process). Without NVML it
    samples nothing and `problem` says why; the cell still runs.

        with NvmlSampler([2, 3]) as sampler:
            run the cell
        sampler.report()  # {2: {"nvml_baseline_used_bytes": ..., "nvml_peak_used_bytes": ...}, ...}
    """

    def __init__(self, indices: list[int], interval_s: float = 0.05, nvml=None):
        self.indices = list(indices)
        self._module = nvml  # pynvml, or a stand-in in tests
        self.interval_s = interval_s
        self.problem = ""
        self.process_problem = ""  # the process list could not be read (memory readings still count)
        self._stats: dict[int, dict] = {}
        self._stop = None
        self._thread = None
        self._nvml = None

    def __enter__(self) -> "NvmlSampler":
        import threading

        if not self.indices:
            return self
        try:
            nvml = self._module
            if nvml is None:
                import pynvml as nvml

            nvml.nvmlInit()
            self._nvml = nvml
            handles = {i: nvml.nvmlDeviceGetHandleByIndex(i) for i in self.indices}
            baseline = {i: int(nvml.nvmlDeviceGetMemoryInfo(h).used) for i, h in handles.items()}
        except Exception as exc:  # ImportError, NVMLError_*: no sampling, said in the record
            self.problem = f"NVML: {exc}"
            return self
        for i, used in baseline.items():
            self._stats[i] = {
                "nvml_baseline_used_bytes": used,
                "nvml_peak_used_bytes": used,
                "nvml_processes_max": 0,
                "nvml_samples": 0,
            }
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, args=(handles,), daemon=True)
        self._thread.start()
        return self

    def _loop(self, handles: dict) -> None:
        while True:
            self.sample(handles)
            if self._stop.wait(self.interval_s):
                self.sample(handles)  # one last reading as the cell ends
                return

    def sample(self, handles: dict) -> None:
        """One reading of each card. Used memory and the process list are read apart: where the
        process query is refused (vGPU, a container without the host's PID namespace) the memory
        reading still counts, and the problem is said once."""
        for i, h in handles.items():
            s = self._stats[i]
            try:
                used = int(self._nvml.nvmlDeviceGetMemoryInfo(h).used)
            except Exception as exc:
                self.problem = f"NVML memory reading: {exc}"
            else:
                s["nvml_peak_used_bytes"] = max(s["nvml_peak_used_bytes"], used)
                s["nvml_samples"] += 1
            try:
                procs = len(self._nvml.nvmlDeviceGetComputeRunningProcesses(h))
            except Exception as exc:
                self.process_problem = f"NVML process list: {exc}"
                s["nvml_processes_max"] = None
            else:
                if s["nvml_processes_max"] is not None:
                    s["nvml_processes_max"] = max(s["nvml_processes_max"], procs)

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass

    def report(self) -> dict[int, dict]:
        """Per card: the baseline before the cell, the peak while it ran, and the peak less the
        baseline (what the cell added, CUDA contexts included; None where no reading was taken)."""
        out = {}
        for i, s in self._stats.items():
            rise = s["nvml_peak_used_bytes"] - s["nvml_baseline_used_bytes"] if s["nvml_samples"] else None
            out[i] = {**s, "nvml_peak_minus_baseline_bytes": rise, "nvml_interval_s": self.interval_s}
        return out
