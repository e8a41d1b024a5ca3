"""What this host has, found without importing torch: CPU name, and CUDA GPUs through NVML
(nvidia-ml-py) with `nvidia-smi` as the fallback."""

from __future__ import annotations

import dataclasses
import functools
import os
import platform
import shutil
import subprocess


@dataclasses.dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    compute_capability: str  # "9.0"
    memory_bytes: int

    @property
    def arch(self) -> str:
        """The hardware axis value: sm_90 for compute capability 9.0."""
        major, minor = self.compute_capability.split(".")
        return f"sm_{major}{minor}"


@dataclasses.dataclass(frozen=True)
class Host:
    cpu: str
    gpus: tuple[Gpu, ...]
    driver: str | None
    cuda_driver: str | None  # the CUDA version the driver supports, e.g. "12.8"
    gpu_probe: str  # how GPUs were looked for, and what that said

    @property
    def archs(self) -> set[str]:
        return {"cpu"} | {g.arch for g in self.gpus}

    def fingerprint(self) -> dict:
        return {
            "cpu": self.cpu,
            "gpus": [dataclasses.asdict(g) | {"arch": g.arch} for g in self.gpus],
            "driver": self.driver,
            "cuda_driver": self.cuda_driver,
        }


def runner_identity(environ=os.environ) -> dict:
    """Who made a record, kept in it so merged results say where each came from: the name
    $COMPAT_RUNNER_NAME gives, else the GitHub Actions runner's name, else the host name; and
    the CI run's address when GitHub Actions ran it."""
    name = environ.get("COMPAT_RUNNER_NAME") or environ.get("RUNNER_NAME") or platform.node() or "unnamed"
    out = {"name": name[:200]}
    server, repo, run = (environ.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    if server and repo and run:
        out["ci_run"] = f"{server}/{repo}/actions/runs/{run}"
    return out


@functools.cache
def detect() -> Host:
    gpus, driver, cuda, probe = _nvml()
    if not gpus:
        smi = _nvidia_smi()
        if smi[0]:
            gpus, driver, cuda, probe = smi
        else:
            probe = f"{probe}; {smi[3]}"
    return Host(cpu_name(), tuple(gpus), driver, cuda, probe)


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _nvml():
    try:
        import pynvml
    except ImportError:
        return [], None, None, "NVML: nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...
        return [], None, None, f"NVML: {exc}"
    try:
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h).total
            gpus.append(Gpu(i, name.decode() if isinstance(name, bytes) else name, f"{major}.{minor}", int(mem)))
        driver = pynvml.nvmlSystemGetDriverVersion()
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        return (
            gpus,
            driver.decode() if isinstance(driver, bytes) else driver,
            f"{cuda // 1000}.{cuda % 1000 // 10}",
            f"NVML: {len(gpus)} GPU(s)",
        )
    except Exception as exc:
        return [], None, None, f"NVML: {exc}"
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _nvidia_smi():
    exe = shutil.which("nvidia-smi")
    if not exe:
        return [], None, None, "nvidia-smi: not found"
    try:
        out = subprocess.run(
            [exe, "--query-gpu=index,name,compute_cap,memory.total,driver_version",
             "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError) as exc:
        return [], None, None, f"nvidia-smi: {exc}"
    gpus, driver = [], None
    for line in out.strip().splitlines():
        idx, name, cc, mem_mib, driver = [x.strip() for x in line.split(",")]
        gpus.append(Gpu(int(idx), name, cc, int(float(mem_mib)) * 2**20))
    return gpus, driver, None, f"nvidia-smi: {len(gpus)} GPU(s)"



class NvmlSampler:
    """Samples NVML's used memory of some cards, by physical index, from before a cell starts
    until it ends: the peak includes the CUDA context, allocator slack and any other process on
    the card (another rank's stray context shows up as a second process). Without NVML it
    samples nothing and `problem` says why; the cell still runs.

        with NvmlSampler([2, 3]) as sampler:
            run the cell
        sampler.report()  # {2: {"nvml_baseline_used_bytes": ..., "nvml_peak_used_bytes": ...}, ...}
    """

    def __init__(self, indices: list[int], interval_s: float = 0.05):
        self.indices = list(indices)
        self.interval_s = interval_s
        self.problem = ""
        self._stats: dict[int, dict] = {}
        self._stop = None
        self._thread = None
        self._nvml = None

    def __enter__(self) -> "NvmlSampler":
        import threading

        if not self.indices:
            return self
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            handles = {i: pynvml.nvmlDeviceGetHandleByIndex(i) for i in self.indices}
            baseline = {i: int(pynvml.nvmlDeviceGetMemoryInfo(h).used) for i, h in handles.items()}
        except Exception as exc:  # ImportError, NVMLError_*: no sampling, said in the record
            self.problem = f"NVML: {exc}"
            return self
        for i, used in baseline.items():
            self._stats[i] = {"nvml_baseline_used_bytes": used, "nvml_peak_used_bytes": used,
                              "nvml_processes_max": 0, "nvml_samples": 0}
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
        for i, h in handles.items():
            try:
                used = int(self._nvml.nvmlDeviceGetMemoryInfo(h).used)
                procs = len(self._nvml.nvmlDeviceGetComputeRunningProcesses(h))
            except Exception as exc:
                self.problem = f"NVML: {exc}"
                continue
            s = self._stats[i]
            s["nvml_peak_used_bytes"] = max(s["nvml_peak_used_bytes"], used)
            s["nvml_processes_max"] = max(s["nvml_processes_max"], procs)
            s["nvml_samples"] += 1

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
        return {i: {**s, "nvml_interval_s": self.interval_s} for i, s in self._stats.items()}
