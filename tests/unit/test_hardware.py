"""Which card is which, on hosts this machine does not have: NVML is replaced by a stand-in that
answers as pynvml does for a described set of cards, so the mapping from NVML's cards to what a
cell may use (the runner's CUDA_VISIBLE_DEVICES, MIG, UUIDs) and the sampler's readings are
checked without a GPU."""

import time
from types import SimpleNamespace

import pytest

from harness.errors import UsageError
from harness.run.hardware import NvmlSampler, probe

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"


class NVMLError(Exception):
    pass


class FakeNvml:
    """pynvml's calls compat makes, answered for `cards` (dicts of name, cc, uuid, bus, mig, and
    a script of used-memory readings); `refuse` names calls that raise, as on a vGPU or in a
    container without the host's PID namespace."""

    NVML_DEVICE_MIG_ENABLE = 1

    def __init__(self, cards, refuse=(), memory_reads=None):
        self.cards, self.refuse, self.reads = cards, set(refuse), [0] * len(cards)
        self.memory_reads = memory_reads  # how many memory readings succeed before they are refused

    def _check(self, call):
        if call in self.refuse:
            raise NVMLError(f"{call}: Not Supported")

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetCount(self):
        return len(self.cards)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetName(self, h):
        return self.cards[h]["name"]

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return self.cards[h].get("cc", (9, 0))

    def nvmlDeviceGetUUID(self, h):
        return self.cards[h]["uuid"]

    def nvmlDeviceGetPciInfo(self, h):
        return SimpleNamespace(busId=self.cards[h]["bus"].encode())  # bytes, as older pynvml gives it

    def nvmlDeviceGetMigMode(self, h):
        self._check("nvmlDeviceGetMigMode")
        return [1 if self.cards[h].get("mig") else 0, 0]

    def nvmlDeviceGetMemoryInfo(self, h):
        self._check("nvmlDeviceGetMemoryInfo")
        if self.memory_reads is not None and self.reads[h] >= self.memory_reads:
            self.reads[h] += 1
            raise NVMLError("nvmlDeviceGetMemoryInfo: Unknown Error")
        script = self.cards[h].get("used", [0])
        value = script[min(self.reads[h], len(script) - 1)]
        self.reads[h] += 1
        return SimpleNamespace(total=80 * 2**30, used=value)

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        self._check("nvmlDeviceGetComputeRunningProcesses")
        return [SimpleNamespace(pid=1, usedGpuMemory=None)]

    def nvmlSystemGetDriverVersion(self):
        return "580.82.07"

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return 13000


def cards(*names, mig=()):
    return [
        {"name": n, "uuid": f"GPU-{i}a2b3c4d-{i:04d}", "bus": f"00000000:{0x18 + i:02X}:00.0", "mig": i in mig}
        for i, n in enumerate(names)
    ]


def host(environ, nvml):
    return probe(environ, nvml)


def test_every_card_by_nvml_index_with_its_uuid_when_nothing_restricts_them():
    h = host({}, FakeNvml(cards(H100, H100)))
    assert [(g.index, g.uuid, g.pci_bus_id, g.arch) for g in h.gpus] == [
        (0, "GPU-0a2b3c4d-0000", "00000000:18:00.0", "sm_90"),
        (1, "GPU-1a2b3c4d-0001", "00000000:19:00.0", "sm_90"),
    ]
    assert [g.cuda_id for g in h.gpus] == ["GPU-0a2b3c4d-0000", "GPU-1a2b3c4d-0001"]
    assert (h.driver, h.cuda_driver, h.refused) == ("580.82.07", "13.0", ())


def test_the_runners_cuda_visible_devices_is_honoured_as_cuda_reads_it():
    nvml = FakeNvml(cards(H100, H100, H100, H100))
    assert [g.index for g in host({"CUDA_VISIBLE_DEVICES": "2,3"}, nvml).gpus] == [2, 3]
    # by UUID, and by a unique prefix of one, in the order given
    assert [g.index for g in host({"CUDA_VISIBLE_DEVICES": "GPU-3a2b3c4d-0003,GPU-1a2"}, nvml).gpus] == [3, 1]
    # CUDA stops at the first entry that names no card: the cards after it are not used either
    h = host({"CUDA_VISIBLE_DEVICES": "1,7,2"}, nvml)
    assert [g.index for g in h.gpus] == [1]
    assert h.refused == (
        "CUDA_VISIBLE_DEVICES=1,7,2: '7' names no card of this host, and CUDA uses no card listed after it",
    )
    assert host({"CUDA_VISIBLE_DEVICES": "-1"}, nvml).gpus == ()
    h = host({"CUDA_VISIBLE_DEVICES": ""}, nvml)
    assert h.gpus == () and h.refused == (
        "CUDA_VISIBLE_DEVICES is set and empty: the runner lets this job use no card",
    )
    assert "CUDA_VISIBLE_DEVICES is set and empty" in h.gpu_probe  # what --require-gpu then says


def test_indices_on_a_host_of_mixed_cards_need_pci_bus_order_or_uuids():
    nvml = FakeNvml(cards(A100, H100))
    with pytest.raises(UsageError) as err:
        host({"CUDA_VISIBLE_DEVICES": "1"}, nvml)
    assert str(err.value).startswith(
        "CUDA_VISIBLE_DEVICES=1 names cards by index on a host of different cards "
        f"({A100}, {H100}): CUDA numbers them fastest first"
    )
    assert [g.name for g in host({"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, nvml).gpus] == [H100]
    assert [g.name for g in host({"CUDA_VISIBLE_DEVICES": "GPU-1a2b"}, nvml).gpus] == [H100]


def test_mig_is_refused_with_the_reason():
    h = host({}, FakeNvml(cards(A100, A100, mig={0})))
    assert [g.index for g in h.gpus] == [1]
    assert h.refused == (
        f"GPU 0 ({A100}) is in MIG mode: compat runs cells on whole cards only: a MIG slice has a "
        "fraction of the card's memory and compute, so its records would misstate the card; turn MIG "
        "off on it (nvidia-smi -i 0 -mig 0) or leave it out with CUDA_VISIBLE_DEVICES",
    )
    h = host({"CUDA_VISIBLE_DEVICES": "MIG-5c3e0a1d-aaaa,1"}, FakeNvml(cards(A100, A100)))
    assert [g.index for g in h.gpus] == [1]
    assert h.refused[0].startswith(
        "CUDA_VISIBLE_DEVICES names the MIG slice MIG-5c3e0a1d-aaaa: compat runs cells on whole cards only"
    )
    # a card that cannot say (NVML: Not Supported, cards before Ampere) is a whole card
    assert len(host({}, FakeNvml(cards(H100), refuse={"nvmlDeviceGetMigMode"})).gpus) == 1


def wait_for(nvml, reads):
    give_up = time.monotonic() + 30  # a guard against a sampler that never samples, not a timing
    while min(nvml.reads) < reads and time.monotonic() < give_up:
        time.sleep(0.001)


def test_the_sampler_reads_memory_and_processes_apart():
    """Where the process query is refused, the memory readings still count (they used to be lost
    with it, and the baseline was recorded as the peak)."""
    spec = cards(H100)
    spec[0]["used"] = [1000, 5000, 9000, 3000]
    nvml = FakeNvml(spec, refuse={"nvmlDeviceGetComputeRunningProcesses"})
    with NvmlSampler([0], interval_s=0.001, nvml=nvml) as sampler:
        wait_for(nvml, 4)
    got = sampler.report()[0]
    assert (got["nvml_baseline_used_bytes"], got["nvml_peak_used_bytes"], got["nvml_peak_minus_baseline_bytes"]) == (
        1000,
        9000,
        8000,
    )
    assert got["nvml_processes_max"] is None
    assert sampler.problem == "" and sampler.process_problem.startswith("NVML process list: ")


def test_the_sampler_without_memory_readings_reports_no_rise():
    nvml = FakeNvml(cards(H100), memory_reads=1)  # the baseline, then every reading fails
    with NvmlSampler([0], interval_s=0.001, nvml=nvml) as sampler:
        wait_for(nvml, 3)
    got = sampler.report()[0]
    assert got["nvml_samples"] == 0 and got["nvml_peak_minus_baseline_bytes"] is None
    assert sampler.problem.startswith("NVML memory reading: ")
