import sys
import time
from pathlib import Path
from types import SimpleNamespace

from harness.catalog.cell import Cell
from harness.run.cellrecord import merge_nvml
from harness.run.envs import StackEnv
from harness.run.hardware import Gpu, Host, NvmlSampler
from harness.run.launch import WORKLOAD, cell_environment, launch_command
from harness.run.runner import plan

CPU_HOST = Host("Test CPU", (), None, None, "NVML: not found")
ONE_H100 = Host("Test CPU", (Gpu(0, "NVIDIA H100 80GB HBM3", "9.0", 80 * 2**30),), "580.1", "13.0", "NVML: 1 GPU(s)")


def cell(hardware, strategy="single", ranks=1):
    return Cell(hardware, "local", "bf16", "none", "lora", strategy, ranks=ranks)


def test_cpu_cells_run_here_whatever_their_ranks():
    assert [p.status for p in plan([cell("cpu"), cell("cpu", "ddp", 2)], CPU_HOST)] == ["runs here", "runs here"]


def test_a_cell_needing_more_cards_than_the_host_has_is_unsupported():
    two = cell("sm_90", "ddp", 2)
    (p,) = plan([two], ONE_H100)
    assert (p.here, p.unsupported, p.reason) == (False, True, "needs 2 sm_90 cards; this host has 1")
    (p,) = plan([two], CPU_HOST)
    assert (p.here, p.unsupported, p.reason) == (False, True, "needs 2 sm_90 cards; this host has no CUDA GPU")
    (p,) = plan([cell("sm_90")], ONE_H100)
    assert p.here and p.status == "runs here"


def test_another_architecture_on_a_gpu_host_is_left_to_its_runner():
    (p,) = plan([cell("sm_75")], ONE_H100)
    assert (p.here, p.unsupported) == (False, False)
    assert p.status == "other runner: needs 1 sm_75 card; this host has sm_90"


def test_expandable_segments_is_a_cuda_setting():
    es = Cell("cpu", "local", "fp32", "none", "full", "single", expandable_segments=True)
    (p,) = plan([es], CPU_HOST)
    assert (p.here, p.unsupported) == (False, True)
    assert p.status.startswith("unsupported: needs CUDA: expandable_segments")
    (p,) = plan([Cell("sm_90", "local", "bf16", "none", "lora", "single", expandable_segments=True)], ONE_H100)
    assert p.here


STACK = StackEnv("s", "/envs/s/bin/python", Path("/envs/s"), "k", {})


def test_launchers_are_the_ones_users_use():
    spec, res = Path("/w/spec.json"), Path("/w/result")
    launcher, cmd = launch_command(cell("cpu"), "py", spec, res)
    assert (launcher, cmd) == ("python", ["py", str(WORKLOAD), str(spec), str(res)])
    launcher, cmd = launch_command(cell("cpu", "fsdp", 2), "py", spec, res)
    assert launcher == "torchrun"
    assert cmd[:5] == ["py", "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    # DeepSpeed: its own launcher for any rank count; told the process count on CPU only (on GPU
    # it takes the cell's CUDA_VISIBLE_DEVICES); a port of its own, so cells can run side by side
    launcher, cmd = launch_command(cell("cpu", "zero3_offload", 2), "py", spec, res)
    assert launcher == "deepspeed"
    assert cmd[:4] == ["py", "-m", "deepspeed.launcher.runner", "--master_port"]
    assert int(cmd[4]) > 0 and cmd[5:7] == ["--num_gpus", "2"] and cmd[7:] == [str(WORKLOAD), str(spec), str(res)]
    launcher, cmd = launch_command(cell("sm_90", "zero2", 1), "py", spec, res)
    assert launcher == "deepspeed" and "--num_gpus" not in cmd


def card(index, uuid=""):
    return Gpu(index, "NVIDIA H100 80GB HBM3", "9.0", 80 * 2**30, uuid)


def test_cell_environment_sets_cards_and_allocator_and_drops_the_runners_own(monkeypatch):
    # a runner's own allocator settings, under the old name and the new one
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "garbage_collection_threshold:0.6")
    monkeypatch.setenv("PYTORCH_ALLOC_CONF", "expandable_segments:True")
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    es = Cell("sm_90", "local", "bf16", "none", "lora", "ddp", ranks=2, expandable_segments=True)
    env = cell_environment(es, [card(2, "GPU-aaa"), card(3, "GPU-bbb")], STACK)
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-aaa,GPU-bbb"  # by UUID: no index can mean another card
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert env["PYTORCH_CUDA_ALLOC_CONF"] == env["PYTORCH_ALLOC_CONF"] == "expandable_segments:True"
    assert env["HF_HUB_OFFLINE"] == "1"
    assert env["TORCH_EXTENSIONS_DIR"] == "/envs/s/torch_extensions"
    env = cell_environment(cell("sm_90"), [card(1)], STACK)  # no UUID known (nvidia-smi without it): the index
    assert env["CUDA_VISIBLE_DEVICES"] == "1"
    # the deepspeed launcher parses the list as integers: indices, in PCI bus order
    env = cell_environment(cell("sm_90", "zero3", 2), [card(2, "GPU-aaa"), card(3, "GPU-bbb")], STACK)
    assert (env["CUDA_VISIBLE_DEVICES"], env["CUDA_DEVICE_ORDER"]) == ("2,3", "PCI_BUS_ID")
    assert "PYTORCH_CUDA_ALLOC_CONF" not in env and "PYTORCH_ALLOC_CONF" not in env
    assert "CUDA_VISIBLE_DEVICES" not in cell_environment(cell("cpu"), [], StackEnv("l", "py", None, "current", {}))


def test_nvml_readings_join_the_rank_on_that_card():
    # a 2-rank cell on physical cards 2 and 3: torch calls them cuda:0 and cuda:1
    ranks = [
        {"rank": 0, "device": "cuda:0", "torch_max_allocated_bytes": 10},
        {"rank": 1, "device": "cuda:1", "torch_max_allocated_bytes": 11},
    ]
    nvml = {2: {"nvml_peak_used_bytes": 500}, 3: {"nvml_peak_used_bytes": 700}, 5: {"nvml_peak_used_bytes": 1}}
    merged = merge_nvml(ranks, [2, 3], nvml)
    assert merged[0] == {**ranks[0], "physical_index": 2, "nvml_peak_used_bytes": 500}
    assert merged[1] == {**ranks[1], "physical_index": 3, "nvml_peak_used_bytes": 700}
    assert merged[2] == {"rank": None, "device": "nvml:5", "physical_index": 5, "nvml_peak_used_bytes": 1}
    cpu = [{"rank": 0, "device": "cpu", "peak_rss_bytes": 1}]
    assert merge_nvml(cpu, [], {}) == cpu


class FakeNvml:
    """Stands in for pynvml to drive the sampler's bookkeeping; readings come from a script."""

    def __init__(self, used: dict, procs: dict):
        self.used, self.procs, self.calls = used, procs, {i: 0 for i in used}

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetMemoryInfo(self, h):
        seq = self.used[h]
        value = seq[min(self.calls[h], len(seq) - 1)]
        self.calls[h] += 1
        return SimpleNamespace(used=value)

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [object()] * self.procs[h]


def test_sampler_keeps_the_baseline_and_the_peak_per_card(monkeypatch):
    fake = FakeNvml({0: [100, 300, 900, 200], 1: [50, 60]}, {0: 1, 1: 2})
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    sampler = NvmlSampler([0, 1], interval_s=0.001)
    with sampler:
        give_up = time.monotonic() + 30  # a guard against a sampler that never samples, not a timing
        while fake.calls[0] < 4 and time.monotonic() < give_up:  # let it read the whole script
            time.sleep(0.001)
    got = sampler.report()
    assert got[0]["nvml_baseline_used_bytes"] == 100 and got[0]["nvml_peak_used_bytes"] == 900
    assert got[1]["nvml_baseline_used_bytes"] == 50 and got[1]["nvml_peak_used_bytes"] == 60
    assert (got[0]["nvml_processes_max"], got[1]["nvml_processes_max"]) == (1, 2)
    assert sampler.problem == ""


def test_sampler_without_nvml_samples_nothing_and_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    with NvmlSampler([0]) as sampler:
        pass
    assert sampler.report() == {} and sampler.problem.startswith("NVML: ")


def test_the_deepspeed_ops_a_config_builds_are_read_from_its_optimizer(tmp_path):
    import json

    from harness.run.deepspeed_ops import ops_for as deepspeed_ops

    def ops(config):
        path = tmp_path / "ds.json"
        path.write_text(json.dumps(config))
        return deepspeed_ops(path)

    root = Path(__file__).resolve().parents[2] / "matrix" / "deepspeed"
    assert [deepspeed_ops(root / f"{s}.json") for s in ("zero2", "zero3", "zero3_offload")] == [
        ["FusedAdamBuilder"],
        ["FusedAdamBuilder"],
        ["CPUAdamBuilder"],
    ]
    assert ops({"optimizer": {"type": "AdamW", "params": {"torch_adam": True}}}) == []  # torch's own AdamW
    assert ops({"optimizer": {"type": "Lamb"}}) == [] and ops({"zero_optimization": {"stage": 3}}) == []
    assert ops({"optimizer": {"type": "Adam"}, "zero_optimization": {"offload_optimizer": {"device": "nvme"}}}) == [
        "CPUAdamBuilder"
    ]
    assert deepspeed_ops(tmp_path / "missing.json") == [] and ops([1, 2]) == []
