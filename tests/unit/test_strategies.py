"""A strategy has one home, harness/catalog/strategies.py (issue 19): no harness module names a strategy
outside it (the workloads' own branches aside), and a strategy added to the table reaches
`compat list`, `compat fit` and a cell's spec with nothing else edited."""

import dataclasses
import io
import json
import tokenize

import pytest

from harness import cli
from harness.catalog import strategies
from harness.catalog.cell import Cell
from harness.catalog.matrix import MatrixData
from harness.run import context, launch, runner
from harness.run.hardware import Host

from conftest import ROOT

# a string literal that is not a strategy's name, though it spells one
NOT_A_STRATEGY = {("preflight.py", "FSDP_KEY = \"fsdp\"  # TrainingArguments' own argument (not a strategy's name)")}


def strategy_literals(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every string literal in Python source that is a strategy's name."""
    names, lines = set(strategies.names()), text.splitlines()
    return [
        (t.start[0], lines[t.start[0] - 1].strip())
        for t in tokenize.generate_tokens(io.StringIO(text).readline)
        if t.type == tokenize.STRING and t.string.strip("\"'") in names
    ]


def test_no_harness_module_names_a_strategy_outside_the_table():
    """Every module of the harness, its commands/ included; the workloads' branches are theirs."""
    modules = [
        p for p in sorted((ROOT / "harness").rglob("*.py")) if p.name != "strategies.py" and "workloads" not in p.parts
    ]
    assert any(p.parent.name == "commands" for p in modules)
    found = [
        f"{path.name}:{n}: {line}"
        for path in modules
        for n, line in strategy_literals(path.read_text(encoding="utf-8"))
        if (path.name, line) not in NOT_A_STRATEGY
    ]
    assert not found, "\n".join(found)


def test_the_check_finds_a_strategy_literal_and_not_prose():
    source = 'strategy = "zero3" if full else \'ddp\'\nnote = "plain DDP keeps a copy: use zero3"\n'
    assert strategy_literals(source) == [(1, "strategy = \"zero3\" if full else 'ddp'")] * 2


DUMMY = strategies.Strategy(
    "zero1",
    1,
    None,
    strategies.TRAINER,
    zero_stage=1,
    shards=("optimizer",),
    fit_why="ZeRO-1 divides optimizer state over {n} cards",
)


@pytest.fixture
def with_dummy(monkeypatch):
    """The table with one more strategy (a TEST INPUT: compat has no zero1 cells)."""
    monkeypatch.setattr(strategies, "TABLE", (*strategies.TABLE, DUMMY))
    monkeypatch.setattr(strategies, "BY_NAME", {**strategies.BY_NAME, DUMMY.name: DUMMY})
    return DUMMY


def test_a_strategy_added_to_the_table_reaches_list_fit_and_the_spec(with_dummy, tmp_path, capsys):
    grid = tmp_path / "grid.toml"
    grid.write_text(
        '[product]\nhardware = ["cpu"]\nstack = ["local"]\nprecision = ["fp32"]\nquantization = ["none"]\n'
        'method = ["full"]\nstrategy = ["zero1"]\nranks = [1, 2]\n'
    )
    assert cli.main(["list", "--json", "--matrix", str(grid)]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [c["axes"]["strategy"] for c in listed] == ["zero1", "zero1"] and {c["axes"]["ranks"] for c in listed} == {
        1,
        2,
    }

    assert cli.main(["fit", "--model-size", "7B", "--gpus", "2", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (dummy,) = [p for p in report["predictions"] if p["strategy"] == "zero1"]
    (ddp,) = [p for p in report["predictions"] if p["strategy"] == "ddp"]
    assert dummy["why"].startswith("ZeRO-1 divides optimizer state over 2 cards; loading: ")
    assert dummy["per_card_bytes"]["optimizer"] * 2 == pytest.approx(ddp["per_card_bytes"]["optimizer"], rel=0.01)

    data = MatrixData.load(ROOT / "matrix")
    ctx = context.RunContext(
        results_dir=tmp_path,
        records_path=tmp_path / "records.jsonl",
        settings=data.defaults,
        host=Host("cpu", (), None, None, ""),
        stacks=data.stacks,
        envs=None,
    )
    cell = Cell(
        hardware="cpu", stack="local", precision="fp32", quantization="none", method="full", strategy="zero1", ranks=2
    )
    spec, settings = runner.cell_spec(cell, ctx, tmp_path, 60.0)
    assert spec["strategy_facts"] == {"workload": "finetune", "zero_stage": 1, "offload": False, "fsdp_version": None}
    assert spec["deepspeed_config"].endswith("deepspeed/zero1.json")  # the config users would write for it
    assert launch.launch_command(cell, "python", tmp_path / "s.json", tmp_path)[0] == "deepspeed"


def test_every_strategy_is_an_axis_value_and_takes_the_ranks_its_cells_have():
    data = MatrixData.load(ROOT / "matrix")
    assert data.allowed("strategy") == strategies.names()
    for s in strategies.TABLE:
        assert s.fit_as == "" or not strategies.get(s.fit_as).fit_as, s.name  # a fit model of its own
        assert s.recommend_rank is None or not s.fit_as, s.name
        assert dataclasses.asdict(s)["workload"] in (strategies.TRAINER, strategies.NATIVE)


def test_the_tracked_packages_are_named_once():
    """harness/catalog/packages.py is the one list: the stack keys, the known issues' conditions, the
    table's columns and a reader's view of a record are it, not copies of it."""
    from harness.catalog import known_issues, packages, stacks
    from harness.evidence import records, summary
    from harness.render import table

    assert stacks.STACK_PACKAGES is packages.STACK
    assert known_issues.PACKAGES is table.TRACKED is summary.TRACKED is packages.TRACKED
    assert records._view()["properties"]["fingerprint"]["properties"]["packages"]["properties"].keys() == set(
        packages.TRACKED
    )


def test_the_resolver_pins_what_a_run_imports_and_deepspeed_only_under_a_deepspeed_strategy():
    from harness.catalog import packages

    assert packages.needed("full", deepspeed=False) == ("transformers", "accelerate")
    assert packages.needed("lora", deepspeed=False) == ("transformers", "peft", "accelerate")
    assert packages.needed("qlora", deepspeed=True) == (
        "transformers",
        "peft",
        "accelerate",
        "bitsandbytes",
        "deepspeed",
    )
    zero = [s.name for s in strategies.TABLE if s.deepspeed]
    assert zero and all(packages.needed("full", strategies.get(z).deepspeed)[-1] == "deepspeed" for z in zero)
