"""compat run --ray's planning, without Ray (issue 23): which architecture each node of a cluster
has (its compat-arch label, else Ray's accelerator_type name of its cards read through
matrix/gpus.toml), which cells the cluster runs, records unsupported or leaves to other runners,
and the task options that place a cell. The nodes are written as `ray.nodes()` gives them (Ray
2.60.0, seen on a local cluster on 2026-11-26). tests/raycluster runs cells on a real local cluster."""

import sys

from harness import cli
from harness.catalog.cell import Cell
from harness.catalog.gpus import GpuDb
from harness.run import raydispatch

from conftest import ROOT

GPUDB = GpuDb.load(ROOT / "matrix")


def node(i, gpus=0, accelerator=None, label=None, alive=True):
    resources = {
        "CPU": 1.0,
        "memory": 2.0**34,
        **({"GPU": float(gpus)} if gpus else {}),
        **({f"accelerator_type:{accelerator}": float(gpus)} if accelerator else {}),
    }
    labels = {"ray.io/node-id": f"{i:056x}", **({"compat-arch": label} if label else {})}
    return {
        "NodeID": f"{i:056x}",
        "Alive": alive,
        "NodeManagerHostname": f"host{i}",
        "Resources": resources,
        "Labels": labels,
    }


def test_each_node_s_architecture_comes_from_its_label_else_its_cards_name():
    nodes = raydispatch.cluster_nodes(
        [
            node(1),
            node(2, 1, "T4"),
            node(3, 2, "A100"),
            node(4, 1, "GeForce-RTX-4090"),
            node(5, 4, label="sm_90"),
            node(6, 1, "Z9"),
            node(7, 8, "A100", alive=False),
            node(8, 1, "T4", label="sm_86"),
        ],
        GPUDB,
    )
    # a dead node is not planned on; a label outranks the name
    assert [(n.host, n.arch, n.gpus) for n in nodes] == [
        ("host1", None, 0),
        ("host2", "sm_75", 1),
        ("host3", "sm_80", 2),
        ("host4", "sm_89", 1),
        ("host5", "sm_90", 4),
        ("host6", None, 1),
        ("host8", "sm_86", 1),
    ]


def test_the_cluster_runs_what_one_of_its_nodes_can_and_says_why_not_for_the_rest():
    nodes = raydispatch.cluster_nodes([node(1), node(2, 1, "T4"), node(3, 2, "A100")], GPUDB)
    cells = [
        Cell("cpu", "local", "fp32", "none", "lora", "single"),
        Cell("cpu", "local", "fp32", "none", "full", "single", expandable_segments=True),
        Cell("sm_75", "local", "fp16", "none", "lora", "single"),
        Cell("sm_75", "local", "fp16", "none", "lora", "ddp", ranks=2),
        Cell("sm_80", "local", "bf16", "none", "lora", "ddp", ranks=2),
        Cell("sm_90", "local", "bf16", "none", "lora", "single"),
    ]
    got = [(p.here, p.unsupported, p.reason) for p in raydispatch.plan(cells, nodes)]
    assert got[0] == (True, False, "")
    assert got[1][:2] == (False, True) and "expandable_segments" in got[1][2]  # a CPU cell's rules are runner.plan's
    assert got[2] == (True, False, "")
    assert got[3] == (False, True, "needs 2 sm_75 cards on one node; the Ray cluster's largest sm_75 node has 1")
    assert got[4] == (True, False, "")
    # another runner's
    assert got[5] == (False, False, "needs 1 sm_90 card on one node; the Ray cluster has sm_75, sm_80")
    # a cluster with no GPU compat can name records its GPU cells unsupported, and says how to name the cards
    bare = raydispatch.cluster_nodes([node(1), node(6, 1, "Z9")], GPUDB)
    (p,) = raydispatch.plan([cells[2]], bare)
    assert p.unsupported and p.reason == (
        "needs 1 sm_75 card on one node; the Ray cluster has no GPU compat can name "
        "(Z9: start such a node with `ray start --labels compat-arch=sm_XY`)"
    )


def test_a_cell_asks_ray_for_its_cards_by_label_or_by_accelerator_type():
    nodes = raydispatch.cluster_nodes(
        [node(1), node(2, 1, "T4"), node(3, 1, "T4"), node(4, 1, "Tesla-T4"), node(5, 2, label="sm_80")], GPUDB
    )
    assert raydispatch.placement(Cell("cpu", "local", "fp32", "none", "lora", "single"), nodes) == {"num_cpus": 1}
    # the name most sm_75 nodes carry
    assert raydispatch.placement(Cell("sm_75", "local", "fp16", "none", "lora", "single"), nodes) == {
        "num_cpus": 1,
        "num_gpus": 1,
        "accelerator_type": "T4",
    }
    assert raydispatch.placement(Cell("sm_80", "local", "bf16", "none", "lora", "ddp", ranks=2), nodes) == {
        "num_cpus": 1,
        "num_gpus": 2,
        "label_selector": {"compat-arch": "sm_80"},
    }


def test_without_ray_the_option_says_how_to_install_it(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    assert cli.main(["run", "--ray", "--matrix", "quick"]) == 2
    err = capsys.readouterr().err
    assert "--ray needs Ray here and on every node of the cluster: pip install 'compat[ray]'" in err
    assert "Traceback" not in err


def test_an_address_no_head_answers_is_an_error_at_once_not_a_wait(capsys):
    """ray.init keeps retrying an address nobody answers for minutes (seen: still waiting after 2
    minutes for 127.0.0.1:1 on 2026-11-26); compat checks the head accepts a connection first."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    assert cli.main(["run", "--ray", f"127.0.0.1:{port}", "--matrix", "quick"]) == 2
    assert f"--ray 127.0.0.1:{port}: no Ray head answers there" in capsys.readouterr().err
    assert cli.main(["run", "--ray", "ray://head", "--matrix", "quick"]) == 2
    assert "not an address of a Ray head (host:6379, ray://host:10001, auto)" in capsys.readouterr().err


def test_what_a_node_sends_back_is_checked_before_it_is_appended(tmp_path):
    """TEST INPUT made from a real record (results/records.jsonl's first CPU record), given this
    run's id and log name: as sent, it is this cell's; another cell's record, a log named outside
    the run's logs, a record the schema refuses and something that is not a record are refused."""
    import json
    from types import SimpleNamespace

    real = json.loads((ROOT / "results" / "records.jsonl").read_text().splitlines()[0])
    cell = Cell(**{k: v for k, v in real["axes"].items()})
    assert cell.id == real["cell"]
    ctx = SimpleNamespace(run_id=real["run_id"], results_dir=tmp_path, log_dir=tmp_path / "logs" / real["run_id"])
    rec = dict(real, log=f"logs/{real['run_id']}/{cell.id}.log")
    assert raydispatch._refused({"record": rec, "log": "a log"}, cell, ctx) == ""
    assert raydispatch._refused({"record": dict(rec, cell="cpu-other"), "log": ""}, cell, ctx).startswith(
        "a record of cell 'cpu-other'"
    )
    assert "not this run's log of the cell" in raydispatch._refused(
        {"record": dict(rec, log="../../etc/x.log"), "log": ""}, cell, ctx
    )
    assert raydispatch._refused({"record": dict(rec, outcome="fine"), "log": ""}, cell, ctx)
    assert raydispatch._refused(["not", "a", "dict"], cell, ctx) == "not a record and a log"


def test_a_preflight_override_reaches_a_node_without_the_drivers_files(tmp_path):
    """compat preflight's DeepSpeed config is a file on the driver; a node gets its text, written
    into the cell's own folder there, with the FSDP settings and the record's fields as given."""
    from harness.run import context

    given = tmp_path / "ds_z3_config.json"
    given.write_text('{"zero_optimization": {"stage": 3}, "bf16": {"enabled": "auto"}}')
    override = context.Override(
        deepspeed_config=given, fsdp_args={"fsdp": "full_shard"}, record_extra={"preflight": {"variant": None}}
    )
    shipped = raydispatch.ship(override)
    given.unlink()  # the node has none of the driver's files
    node_dir = tmp_path / "node"
    node_dir.mkdir()
    back = raydispatch._unship(shipped, node_dir)
    assert back.deepspeed_config == node_dir / "deepspeed.json"
    assert back.deepspeed_config.read_text() == '{"zero_optimization": {"stage": 3}, "bf16": {"enabled": "auto"}}'
    assert (back.fsdp_args, back.record_extra) == (override.fsdp_args, override.record_extra)
    assert raydispatch._unship(None, node_dir) is context.NO_OVERRIDE
    assert raydispatch.ship(context.NO_OVERRIDE)["deepspeed"] is None


def test_preflight_on_a_cluster_runs_on_the_asked_cards_else_the_most_on_a_node():
    from harness.commands.preflight import cluster_arch

    nodes = raydispatch.cluster_nodes([node(1), node(2, 1, "T4"), node(3, 2, "A100"), node(4, 4, label="sm_86")], GPUDB)
    # the card the configs are for, where there is one
    assert cluster_arch(nodes, "T4", ROOT / "matrix") == ("sm_75", 1)
    assert cluster_arch(nodes, "", ROOT / "matrix") == ("sm_86", 4)
    assert cluster_arch(nodes, "P4", ROOT / "matrix") == ("sm_86", 4)  # no sm_61 node: the most cards on one
    assert cluster_arch(nodes, "no such card", ROOT / "matrix") == ("sm_86", 4)
    assert cluster_arch(raydispatch.cluster_nodes([node(1)], GPUDB), "T4", ROOT / "matrix") == ("cpu", 0)


def test_warm_is_for_a_cluster_and_for_one_process_cells(capsys):
    assert cli.main(["run", "--warm", "--matrix", "quick"]) == 2
    assert "--warm is for a Ray cluster's workers: give --ray too" in capsys.readouterr().err
    assert raydispatch.can_run_warm(Cell("cpu", "local", "fp32", "none", "lora", "single"))
    assert not raydispatch.can_run_warm(Cell("cpu", "local", "fp32", "none", "lora", "ddp", ranks=2))  # torchrun
    assert not raydispatch.can_run_warm(Cell("cpu", "local", "fp32", "none", "lora", "zero2"))  # the deepspeed launcher
