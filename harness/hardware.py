"""What this host has, found without importing torch: CPU name, and CUDA GPUs through NVML
(nvidia-ml-py) with `nvidia-smi` as the fallback."""

from __future__ import annotations

import dataclasses
import functools
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

