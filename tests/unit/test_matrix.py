import textwrap
from pathlib import Path

import pytest

from harness.catalog.matrix import MatrixData, cell_settings, load_matrix
from harness.errors import MatrixError

from conftest import ROOT, assert_clean_error

DATA = MatrixData.load(ROOT / "matrix")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "m.toml"
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def test_default_cpu_grid_is_llama_in_40_settings_and_five_more_families_in_10_each():
    matrix = load_matrix(ROOT / "matrix" / "cpu.toml", DATA)
    llama = [c for c in matrix.cells if c.model == "default"]
    assert len(llama) == 40
    assert {c.stack for c in llama} == {"hf2023", "hf2024", "hf2025", "hf2026", "canary"}
    assert {c.precision for c in llama} == {"fp32", "bf16"}  # fp16 excluded on cpu
    assert {c.method for c in llama} == {"full", "lora"}
    assert {c.grad_ckpt for c in llama} == {False, True}
    others = [c for c in matrix.cells if c.model != "default"]
    assert len(others) == 50
    assert {(c.precision, c.grad_ckpt) for c in others} == {("fp32", False)}
    for family in ("mistral", "qwen2", "gemma", "glm4", "qwen2_vl"):
        assert {(c.stack, c.method) for c in others if c.model == family} == {
            (s, m) for s in ("hf2023", "hf2024", "hf2025", "hf2026", "canary") for m in ("full", "lora")
        }
        settings = cell_settings(matrix.settings, matrix.models, family)["model"]
        assert settings["family"] == family and settings["config"]  # the family's own fields, as given
    assert cell_settings(matrix.settings, matrix.models, "default")["model"]["family"] == "llama"
    assert matrix.settings["timeout_s"] == 600


def test_a_family_config_table_is_passed_as_given_and_must_be_a_table(tmp_path):
    import shutil

    for name in ("axes.toml", "defaults.toml", "stacks.toml"):
        shutil.copy(ROOT / "matrix" / name, tmp_path / name)
    (tmp_path / "models.toml").write_text("""
[fam]
family = "gemma"
[fam.config]
head_dim = 256
anything_the_family_takes = { nested = [1, 2] }

[bad]
family = 3
config = "head_dim=256"
""")
    with pytest.raises(MatrixError) as err:
        MatrixData.load(tmp_path)
    assert err.value.problems == [
        f'{tmp_path / "models.toml"}:9: [bad].family: 3 must be a string like the default "llama"',
        f"{tmp_path / 'models.toml'}:10: [bad].config: must be a table",
    ]
    (tmp_path / "models.toml").write_text((tmp_path / "models.toml").read_text().split("[bad]")[0])
    data = MatrixData.load(tmp_path)
    assert data.models["fam"]["model"] == {
        "family": "gemma",
        "config": {"head_dim": 256, "anything_the_family_takes": {"nested": [1, 2]}},
    }


def test_product_with_exclude_lists_and_a_time_limit(tmp_path):
    path = write(
        tmp_path,
        """
        [product]
        hardware = ["cpu", "sm_90"]
        stack = ["local"]
        precision = ["fp32", "fp16", "bf16"]
        quantization = ["none"]
        method = ["full", "lora"]
        strategy = ["single"]

        [[exclude]]
        hardware = "cpu"
        precision = ["fp16", "bf16"]

        [settings]
        timeout_s = 30
    """,
    )
    matrix = load_matrix(path, DATA)
    assert [c.id for c in matrix.cells] == [
        "cpu-local-fp32-none-full-single",
        "cpu-local-fp32-none-lora-single",
        *[f"sm_90-local-{p}-none-{m}-single" for p in ("fp32", "fp16", "bf16") for m in ("full", "lora")],
    ]
    assert matrix.settings["timeout_s"] == 30
    assert {k: matrix.settings[k] for k in ("model", "train")} == {k: DATA.defaults[k] for k in ("model", "train")}


def test_a_grid_file_cannot_change_what_its_cells_measure(tmp_path):
    """The tiny model and its run are named in the cell id (m_NAME, a model of models.toml): a
    grid's [settings.model] or [settings.train] would record another run under the same ids."""
    path = write(
        tmp_path,
        """
        [product]
        hardware = ["cpu"]
        stack = ["local"]
        precision = ["fp32"]
        quantization = ["none"]
        method = ["full"]
        strategy = ["single"]

        [settings.model]
        hidden_size = 128
        [settings.train]
        steps = 3
    """,
    )
    with pytest.raises(MatrixError) as err:
        load_matrix(path, DATA)
    assert err.value.problems == [
        f"{path}:9: [settings.model]: a grid file does not change the tiny model or its run: its cells would record "
        "another run under the same ids as every other grid's. Put these keys in a model of matrix/models.toml "
        "([NAME], "
        "and [NAME.train] for the run) and name it in [product].model: the cell ids then carry it (m_NAME)",
        f"{path}:11: [settings.train]: a grid file does not change the tiny model or its run: its cells would record "
        "another run under the same ids as every other grid's. Put these keys in a model of matrix/models.toml "
        "([NAME], "
        "and [NAME.train] for the run) and name it in [product].model: the cell ids then carry it (m_NAME)",
    ]


def test_a_cell_id_is_one_experiment_across_every_shipped_grid():
    """Every grid of matrix/ loads, and an id in two grids is the same experiment there (the same
    cell, the same settings): the table keeps one record per id and --resume skips an id it has,
    so two grids giving one id different runs would hide a measurement. quick.toml's cells are
    cpu.toml's, by design: its records count there."""
    from harness.catalog.matrix import grid_paths

    owner: dict[str, tuple] = {}
    clashes, shared = [], set()
    grids = grid_paths(ROOT / "matrix")
    assert {p.name for p in grids} >= {
        "cpu.toml",
        "quick.toml",
        "gpu.toml",
        "gpu-alloc.toml",
        "gpu-quant.toml",
        "gpu-dist.toml",
    }
    for path in grids:
        grid = load_matrix(path, DATA)
        for cell in grid.cells:
            first = owner.setdefault(cell.id, (path.name, cell, grid.settings))
            if first[0] != path.name:
                shared.add(cell.id)
                if (first[1], first[2]) != (cell, grid.settings):
                    clashes.append(f"{cell.id}: {first[0]} and {path.name} run it differently")
    assert clashes == []
    quick = {c.id for c in load_matrix(ROOT / "matrix" / "quick.toml", DATA).cells}
    assert quick <= shared and {owner[i][0] for i in quick} == {"cpu.toml"}


def test_every_problem_is_reported_at_once_with_file_line_and_key(tmp_path):
    path = write(
        tmp_path,
        """
        descripton = "typo at top level"

        [product]
        hardware = ["cpu", "gpu"]
        stack = ["locl"]
        precision = ["fp32", "bf61"]
        quantization = ["none"]
        method = "full"
        strategy = ["single"]
        grad_ckpt = [false, "yes"]
        ranks = [1, 1]

        [[exclude]]
        hardware = "cpu"
        precison = "fp16"

        [settings]
        timeout_s = "ten"
        [settings.train]
        step = 3
        seq_len_min = 100
    """,
    )
    with pytest.raises(MatrixError) as err:
        load_matrix(path, DATA)
    assert err.value.problems == [
        f"{path}:1: descripton: unknown key (did you mean 'description'?)",
        f'{path}:4: [product].hardware: "gpu" is not valid: Where the cell runs: `cpu`, or the CUDA architecture '
        "of the GPU, sm_XY (sm_90 for H100).",
        f'{path}:5: [product].stack: "locl" is not one of "bnb046", "bnb047", "bnb048", "bnb049", "canary", '
        '"deepke2023", "hf2023", "hf2023ds", "hf2024", "hf2025", "hf2026", "local" (did you mean \'local\'?)',
        f'{path}:6: [product].precision: "bf61" is not one of "fp32", "fp16", "bf16" (did you mean \'bf16\'?)',
        f"{path}:8: [product].method: must be a non-empty list of values",
        f'{path}:10: [product].grad_ckpt: "yes" is not one of false, true',
        f"{path}:11: [product].ranks: repeated value 1",
        f"{path}:15: [[exclude]] #1.precison: unknown axis (did you mean 'precision'?)",
        f'{path}:18: [settings].timeout_s: "ten" must be an integer like the default 600',
        f"{path}:20: [settings.train].step: unknown setting (did you mean 'steps'?)",
        f"{path}:21: [settings.train].seq_len_min: is larger than seq_len_max",
        f"{path}:19: [settings.train]: a grid file does not change the tiny model or its run: its cells would record "
        "another run under the same ids as every other grid's. Put these keys in a model of matrix/models.toml "
        "([NAME], "
        "and [NAME.train] for the run) and name it in [product].model: the cell ids then carry it (m_NAME)",
    ]
    assert str(err.value).startswith("12 problems in the matrix data:\n  ")


def test_missing_axis_and_empty_exclude(tmp_path):
    path = write(
        tmp_path,
        """
        [product]
        hardware = ["cpu"]
        stack = ["local"]
        precision = ["fp32"]
        quantization = ["none"]
        method = ["full"]

        [[exclude]]
    """,
    )
    with pytest.raises(MatrixError) as err:
        load_matrix(path, DATA)
    assert err.value.problems == [
        f"{path}:1: [product].strategy: missing; every axis needs a list",
        f"{path}:8: [[exclude]] #1: is empty (it would drop every cell)",
    ]


def test_excluding_everything_is_an_error(tmp_path):
    path = write(
        tmp_path,
        """
        [product]
        hardware = ["cpu"]
        stack = ["local"]
        precision = ["fp32"]
        quantization = ["none"]
        method = ["full"]
        strategy = ["single"]
        [[exclude]]
        method = "full"
    """,
    )
    with pytest.raises(MatrixError) as err:
        load_matrix(path, DATA)
    assert err.value.problems == [f"{path}: [[exclude]]: the excludes drop every cell of the product"]


@pytest.mark.parametrize(
    "content, problem",
    [
        (b"x = [\n", "not valid TOML: Invalid value (at end of document)"),
        (b"\xff\xfe\x00garbage", "not UTF-8 text"),
        (b"", "[product]: missing; a matrix needs a [product] table"),
    ],
)
def test_unreadable_files_are_one_clear_problem(tmp_path, content, problem):
    path = tmp_path / "bad.toml"
    path.write_bytes(content)
    with pytest.raises(MatrixError) as err:
        load_matrix(path, DATA)
    assert len(err.value.problems) == 1
    assert err.value.problems[0].startswith(f"{path}")
    assert problem in err.value.problems[0]


def test_cli_broken_matrix_exits_2_naming_file_and_key(tmp_path, compat):
    path = write(
        tmp_path,
        """
        [product]
        hardware = ["cpu"]
        stack = ["local"]
        precision = ["fp32"]
        quantization = ["none"]
        method = ["ful"]
        strategy = ["single"]
    """,
    )
    for command in ("list", "run"):
        proc = compat(command, "--matrix", str(path))
        assert_clean_error(proc, 2)
        assert proc.stderr == (
            "compat: error: 1 problem in the matrix data:\n"
            f'  {path}:6: [product].method: "ful" is not one of "full", "lora" (did you mean \'full\'?)\n'
        )
        assert proc.stdout == ""


def test_cli_missing_matrix_file(tmp_path, compat):
    proc = compat("list", "--matrix", str(tmp_path / "nope.toml"))
    assert_clean_error(proc, 2)
    assert f"{tmp_path / 'nope.toml'}: no such file" in proc.stderr


def test_shipped_stacks_span_2023_to_now_plus_a_canary():
    stacks = DATA.stacks
    pinned = [s for s in stacks.values() if not s.current and not s.canary]
    assert len(pinned) >= 4
    assert ("transformers", "==4.33.0") in stacks["hf2023"].packages
    assert stacks["canary"].canary and all(spec == "" for _, spec in stacks["canary"].packages)
    assert stacks["local"].current
    assert all(s.torch == "inherit" for s in stacks.values())


def test_broken_stacks_file_reports_every_problem(tmp_path):
    import shutil

    for name in ("axes.toml", "defaults.toml"):
        shutil.copy(ROOT / "matrix" / name, tmp_path / name)
    (tmp_path / "stacks.toml").write_text(
        textwrap.dedent("""
        [old]
        transformers = "4.33.0"
        pef = "==0.5.0"

        [new]
        canary = true
        peft = "==0.21.2"
        torch = "latest"

        [here]
        provider = "current"
        transformers = "==5.0.0"

        [Bad-Name]
        provider = "docker"
    """).lstrip()
    )
    with pytest.raises(MatrixError) as err:
        MatrixData.load(tmp_path)
    path = tmp_path / "stacks.toml"
    assert err.value.problems == [
        f'{path}:2: [old].transformers: "4.33.0" is not a version specifier like "==4.33.0" or ">=4.40,<4.41"',
        f"{path}:3: [old].pef: unknown key (did you mean 'peft'?)",
        f'{path}:7: [new].peft: a canary takes the newest release: give a range or "", not an exact pin',
        f'{path}:8: [new].torch: "latest" is not a version specifier like "==4.33.0" or ">=4.40,<4.41" (or "inherit")',
        f'{path}:10: [here]: provider = "current" runs the interpreter as it is: it takes no packages, torch or canary',
        f"{path}:14: [Bad-Name]: a stack name is lower-case letters, digits, '_' and '.' (it goes into cell ids)",
    ]


def test_strategy_and_ranks_must_agree(tmp_path):
    path = write(
        tmp_path,
        """
        [product]
        hardware = ["cpu"]
        stack = ["local"]
        precision = ["fp32"]
        quantization = ["none"]
        method = ["full"]
        strategy = ["single", "ddp", "zero3"]
        ranks = [1, 2]
    """,
    )
    with pytest.raises(MatrixError) as err:
        load_matrix(path, DATA)
    assert err.value.problems == [
        f"{path}:1: [product]: 1 cell(s) such as cpu-local-fp32-none-full-single-r2 pair strategy single with 2 "
        "rank(s); "
        'single takes exactly 1: add [[exclude]] strategy = "single", ranks = 2',
        f"{path}:1: [product]: 1 cell(s) such as cpu-local-fp32-none-full-ddp pair strategy ddp with 1 rank(s); "
        'ddp takes 2 or more: add [[exclude]] strategy = "ddp", ranks = 1',
    ]
    path.write_text(
        path.read_text() + '[[exclude]]\nstrategy = "single"\nranks = 2\n[[exclude]]\nstrategy = "ddp"\nranks = 1\n'
    )
    assert [c.id for c in load_matrix(path, DATA).cells] == [
        "cpu-local-fp32-none-full-single",
        "cpu-local-fp32-none-full-ddp-r2",
        "cpu-local-fp32-none-full-zero3",
        "cpu-local-fp32-none-full-zero3-r2",  # DeepSpeed takes 1 rank too
    ]


def test_the_model_axis_takes_models_of_models_toml_and_their_settings(tmp_path):
    import shutil

    from harness.catalog.matrix import cell_settings

    for name in ("axes.toml", "defaults.toml", "stacks.toml"):
        shutil.copy(ROOT / "matrix" / name, tmp_path / name)
    (tmp_path / "models.toml").write_text(
        textwrap.dedent("""
        [wide]
        hidden_size = 256
        [wide.train]
        seq_len_min = 128
        seq_len_max = 128

        [broken]
        hiden_size = 256
        [broken.train]
        steps = "many"
    """).lstrip()
    )
    with pytest.raises(MatrixError) as err:
        MatrixData.load(tmp_path)
    models = tmp_path / "models.toml"
    assert err.value.problems == [
        f"{models}:8: [broken].hiden_size: unknown setting (did you mean 'hidden_size'?)",
        f'{models}:10: [broken.train].steps: "many" must be an integer like the default 8',
    ]
    models.write_text(models.read_text().split("[broken]")[0])
    data = MatrixData.load(tmp_path)

    def grid(models):
        return write(
            tmp_path,
            "[product]\n"
            + "\n".join(
                f"{k} = {v}"
                for k, v in {
                    "hardware": '["cpu"]',
                    "stack": '["local"]',
                    "precision": '["fp32"]',
                    "quantization": '["none"]',
                    "method": '["full"]',
                    "strategy": '["single"]',
                    "model": models,
                }.items()
            ),
        )

    matrix = load_matrix(grid('["default", "wide"]'), data)
    assert [c.id for c in matrix.cells] == ["cpu-local-fp32-none-full-single", "cpu-local-fp32-none-full-single-m_wide"]
    wide = cell_settings(matrix.settings, matrix.models, "wide")
    assert wide["model"]["hidden_size"] == 256 and wide["model"]["num_hidden_layers"] == 2  # the rest from defaults
    assert wide["train"]["seq_len_max"] == 128 and matrix.settings["train"]["seq_len_max"] == 64  # not changed in place
    with pytest.raises(MatrixError) as err:
        load_matrix(grid('["wdie"]'), data)
    assert '"wdie" is not one of "default", "wide" (did you mean \'wide\'?)' in str(err.value)


def test_every_gpu_grid_covers_every_architecture_of_the_gpu_database():
    """A runner with any CUDA card compat knows finds cells of its architecture in each GPU grid (it
    used to find none on a P100, sm_60, or an RTX 5090, sm_120). Cards of other backends (ROCm, MPS,
    XPU, NPU) have predicted answers only: compat's workload runs on CUDA and the CPU."""
    from harness.catalog.gpus import GpuDb
    from harness.commands.common import matrix_paths
    from harness.run.hardware import Host

    archs = {gpu.arch for gpu in GpuDb.load(ROOT / "matrix").gpus if gpu.cuda}
    assert {"sm_60", "sm_90", "sm_120"} <= archs
    grids = matrix_paths([str(ROOT / "matrix" / "gpu*.toml")], ROOT / "matrix", Host("cpu", (), None, None, ""))
    for path in grids:
        have = {cell.hardware for cell in load_matrix(path, DATA).cells}
        assert archs <= have, f"{path.name} has no cells for {sorted(archs - have)}"


FIRST_GRID = """
    [product]
    hardware = ["sm_75", "sm_90"]
    stack = ["hf2024", "hf2026"]
    precision = ["fp16", "bf16"]
    quantization = ["none", "nf4"]
    method = ["lora"]
    strategy = ["single"]

    [[first]]
    why = "QLoRA on the newer card"
    hardware = "sm_90"
    quantization = "nf4"
    precision = "bf16"

    [[first]]
    why = "fp16 anywhere"
    precision = "fp16"
"""


def test_first_rules_put_their_cells_first_in_rule_order_and_the_rest_keep_product_order(tmp_path):
    grid = load_matrix(write(tmp_path, FIRST_GRID), DATA)
    ids = [c.id for c in grid.cells]
    assert ids[:2] == ["sm_90-hf2024-bf16-nf4-lora-single", "sm_90-hf2026-bf16-nf4-lora-single"]
    assert [c.precision for c in grid.cells[2:10]] == ["fp16"] * 8
    rest = [c for c in grid.cells[10:]]
    assert {c.precision for c in rest} == {"bf16"} and len(rest) == 6
    unordered = load_matrix(write(tmp_path, FIRST_GRID.split("[[first]]")[0]), DATA)
    assert [c.id for c in rest] == [c.id for c in unordered.cells if c in rest]  # product order kept
    assert sorted(ids) == sorted(c.id for c in unordered.cells)  # the same cells, only reordered
    assert grid.why(grid.cells[0]) == "QLoRA on the newer card" and grid.why(grid.cells[-1]) == ""


@pytest.mark.parametrize(
    "rule, message",
    [
        ('why = "x"\nquantization = "int8"', "[[first]] #3: matches no cell the product has left"),
        ('why = "x"\nquantization = "nf5"', "[[first]] #3.quantization: "),
        ('quantization = "nf4"', "[[first]] #3.why: missing or not text"),
        ('why = "x"', "[[first]] #3: names no axis"),
        ('why = "x"\nprecison = "fp16"', "[[first]] #3.precison: unknown axis (did you mean 'precision'?)"),
        ('why = "x"\nprecision = "fp32"', "[[first]] #3: matches no cell the product has left"),
        ('why = "x"\nprecision = "fp16"', "[[first]] #3: matches no cell the product has left"),
    ],
    ids=["value-not-in-product", "no-such-value", "no-why", "no-axis", "typo", "no-cell", "taken-before"],
)
def test_a_first_rule_that_cannot_order_anything_is_an_error_naming_it(tmp_path, rule, message):
    path = write(tmp_path, FIRST_GRID + "\n    [[first]]\n" + textwrap.indent(rule, "    ") + "\n")
    with pytest.raises(MatrixError) as err:
        load_matrix(path, DATA)
    assert any(message in p for p in err.value.problems), err.value.problems
