from harness.cell import Cell
from harness.hardware import Gpu, Host
from harness.runner import plan

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
