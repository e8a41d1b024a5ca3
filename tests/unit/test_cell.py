import dataclasses
from pathlib import Path

import pytest

from harness.catalog.cell import Cell, Selector, expand_braces
from harness.catalog.matrix import MatrixData, load_matrix
from harness.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "matrix").glob("*.toml"))
DATA_FILES = (
    "axes.toml",
    "defaults.toml",
    "stacks.toml",
    "models.toml",
    "model_configs.toml",
    "gpus.toml",
    "backends.toml",
    "builds.toml",
    "known_issues.toml",
    "preflight.toml",
    "agreement.toml",
)
GRIDS = [p for p in SHIPPED if p.name not in DATA_FILES]


@pytest.mark.parametrize("path", GRIDS, ids=lambda p: p.name)
def test_every_shipped_cell_id_round_trips(path):
    matrix = load_matrix(path, MatrixData.load(ROOT / "matrix"))
    assert matrix.cells
    ids = [c.id for c in matrix.cells]
    assert len(set(ids)) == len(ids)
    for cell in matrix.cells:
        assert Cell.parse(cell.id) == cell
        assert str(Cell.parse(cell.id)) == cell.id


def test_id_grammar():
    cell = Cell("sm_90", "local", "bf16", "none", "lora", "single", grad_ckpt=True, ranks=4)
    assert cell.id == "sm_90-local-bf16-none-lora-single-gc+r4"
    assert Cell.parse("cpu-local-fp32-none-full-single") == Cell("cpu", "local", "fp32", "none", "full", "single")
    assert Cell.parse("cpu-local-fp32-none-full-single-r2").ranks == 2
    every = Cell(
        "sm_90", "hf2026", "bf16", "nf4", "lora", "zero3_offload", grad_ckpt=True, ranks=2, expandable_segments=True
    )
    assert every.id == "sm_90-hf2026-bf16-nf4-lora-zero3_offload-gc+es+r2"
    assert Cell.parse(every.id) == every
    sized = Cell("cpu", "local", "fp32", "none", "full", "ddp", grad_ckpt=True, ranks=2, model="fit_w256_l4")
    assert sized.id == "cpu-local-fp32-none-full-ddp-gc+r2+m_fit_w256_l4"
    assert Cell.parse(sized.id) == sized
    assert Cell.parse("cpu-local-fp32-none-full-single").model == "default"  # ids without m_ keep their meaning
    with pytest.raises(dataclasses.FrozenInstanceError):
        cell.precision = "fp32"
    assert hash(cell) == hash(Cell.parse(cell.id))


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "cpu-local",
            "cell id 'cpu-local' has 2 '-'-separated fields; expected 6 "
            "(hardware-stack-precision-quantization-method-strategy) plus optional options",
        ),
        (
            "cpu-local-fp32-none-full-single-m_default",
            "cell id 'cpu-local-fp32-none-full-single-m_default': bad options field 'm_default'; options are 'gc', "
            "'es', 'rN' (N > 1) and 'm_NAME' (a model of matrix/models.toml), joined by '+' in that order",
        ),
        (
            "cpu-local-fp32-none-full-single-m_a+gc",
            "cell id 'cpu-local-fp32-none-full-single-m_a+gc' is not canonical; write it as "
            "'cpu-local-fp32-none-full-single-gc+m_a'",
        ),
        (
            "cpu-local-fp32-none-full-single-r2+gc",
            "cell id 'cpu-local-fp32-none-full-single-r2+gc' is not canonical; write it as "
            "'cpu-local-fp32-none-full-single-gc+r2'",
        ),
        (
            "cpu-local-fp32-none-full-single-r1",
            "cell id 'cpu-local-fp32-none-full-single-r1': bad options field 'r1'; options are 'gc', 'es', 'rN' (N "
            "> 1) and 'm_NAME' (a model of matrix/models.toml), joined by '+' in that order",
        ),
        (
            "cpu-local-fp32-none-full-single-gc+gc",
            "cell id 'cpu-local-fp32-none-full-single-gc+gc' is not canonical; write it as "
            "'cpu-local-fp32-none-full-single-gc'",
        ),
        (
            "cpu-local-fp32-none-full-zero3-r2+es",
            "cell id 'cpu-local-fp32-none-full-zero3-r2+es' is not canonical; write it as "
            "'cpu-local-fp32-none-full-zero3-es+r2'",
        ),
        (
            "cpu-local-fp32-none-full-single-ex",
            "cell id 'cpu-local-fp32-none-full-single-ex': bad options field 'ex'; options are 'gc', 'es', 'rN' (N "
            "> 1) and 'm_NAME' (a model of matrix/models.toml), joined by '+' in that order",
        ),
        (
            "CPU-local-fp32-none-full-single",
            "cell id 'CPU-local-fp32-none-full-single': hardware 'CPU' is not a valid id field (lower-case "
            "letters, digits, '_' and '.')",
        ),
        (
            "cpu-local-fp32-none-full-single-",
            "cell id 'cpu-local-fp32-none-full-single-': bad options field ''; options are 'gc', 'es', 'rN' (N > "
            "1) and 'm_NAME' (a model of matrix/models.toml), joined by '+' in that order",
        ),
    ],
)
def test_bad_ids_are_rejected_with_the_reason(text, message):
    with pytest.raises(UsageError) as err:
        Cell.parse(text)
    assert str(err.value) == message


def test_braces_expand_including_nested():
    assert expand_braces("a-{x,y}-b") == ["a-x-b", "a-y-b"]
    assert expand_braces("{a,b{1,2}}") == ["a", "b1", "b2"]
    assert expand_braces("plain*") == ["plain*"]


def test_selector_select_then_skip():
    ids = [
        "cpu-local-fp32-none-full-single",
        "cpu-local-fp32-none-full-single-gc",
        "cpu-local-bf16-none-lora-single",
        "sm_90-local-bf16-none-lora-single",
    ]
    sel = Selector(select=("cpu-*-{fp32,bf16}-*",), skip=("*-gc",))
    assert [i for i in ids if sel(i)] == ["cpu-local-fp32-none-full-single", "cpu-local-bf16-none-lora-single"]
    assert [i for i in ids if Selector()(i)] == ids
    assert [i for i in ids if Selector(skip=("cpu-*",))(i)] == ["sm_90-local-bf16-none-lora-single"]
