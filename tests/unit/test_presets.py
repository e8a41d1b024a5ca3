"""The presets of matrix/presets/: each loads, cites its sources, and maps to the cells its variants
name (checked here for a CPU host and for a one-card GPU host); a broken preset file is reported
with file:line and exit code 2; the FSDP settings of an accelerate config are handed on as given."""

import shutil

import pytest

from harness.answers import preflight
from harness.catalog.matrix import MatrixData
from harness.errors import MatrixError, UsageError
from harness.run import runner
from harness.run.hardware import Gpu, Host

from conftest import ROOT, assert_clean_error

MATRIX = ROOT / "matrix"
DATA = MatrixData.load(MATRIX)
FIELDS = preflight.Fields.load(MATRIX)

# preset -> {variant: cell on a CPU host}
CPU_CELLS = {
    "llama31-8b-staircase": {
        "dynamic": "cpu-local-bf16-none-lora-single-gc",
        "dynamic-es": "cpu-local-bf16-none-lora-single-gc+es",
        "padded": "cpu-local-bf16-none-lora-single-gc",
        "padded-es": "cpu-local-bf16-none-lora-single-gc+es",
    },
    "llamafactory-fsdp-qlora-fp16": {"as-given": "cpu-bnb048-fp16-nf4-lora-fsdp-gc+r2"},
    "glm4-lora-zero3-offload": {
        "zero3-offload": "cpu-local-fp16-none-lora-zero3_offload-gc+r2+m_glm4",
        "zero3": "cpu-local-fp16-none-lora-zero3-gc+r2+m_glm4",
        "zero3-1card": "cpu-local-fp16-none-lora-zero3-gc+m_glm4",
        "zero3-1card-bf16": "cpu-local-bf16-none-lora-zero3-gc+m_glm4",
    },
    "qwen2vl-8cards-replicated": {
        "ddp": "cpu-local-bf16-none-lora-ddp-gc+r2+m_qwen2_vl",
        "fsdp": "cpu-local-bf16-none-lora-fsdp-gc+r2+m_qwen2_vl",
        "zero3": "cpu-local-bf16-none-lora-zero3-gc+r2+m_qwen2_vl",
    },
    "deepke-llama2-4bit": {
        "deepke-pins": "cpu-deepke2023-fp16-nf4dq-lora-ddp-gc+r2",
        "newer": "cpu-bnb048-fp16-nf4dq-lora-ddp-gc+r2",
        "newer-fixed": "cpu-bnb048-fp16-nf4dq-lora-ddp-gc+r2",
    },
}


def jobs(name: str, hardware: str = "cpu", cards_here: int = 0, gpus=None, matrix=MATRIX):
    preset = preflight.load_preset(matrix, name, DATA)
    return preset, preflight.jobs_for(preset, [], FIELDS, hardware, "local", gpus, cards_here)


def test_the_five_presets_are_shipped():
    assert preflight.preset_names(MATRIX) == sorted(CPU_CELLS)


@pytest.mark.parametrize("name", sorted(CPU_CELLS))
def test_each_preset_maps_to_its_cells_on_a_cpu_host(name):
    preset, found = jobs(name)
    assert {j.variant.name: j.cell.id for j in found} == CPU_CELLS[name]
    assert preset.sources and all(url.startswith("https://github.com/") for url in preset.sources)
    assert (MATRIX / "presets" / name / "SOURCES.md").is_file()
    for job in found:  # every field of every file is accounted for
        fields = sum(len(s.data) for s in job.sources)
        assert len(job.req.used) + len(job.req.not_modelled) + len(job.req.unknown) >= fields


def test_on_a_gpu_host_with_fewer_cards_the_cell_runs_on_the_cards_there():
    _, found = jobs("qwen2vl-8cards-replicated", hardware="sm_90", cards_here=1)
    assert [j.cell.id for j in found] == [
        "sm_90-local-bf16-none-lora-single-gc+m_qwen2_vl",
        "sm_90-local-bf16-none-lora-fsdp-gc+r2+m_qwen2_vl",
        "sm_90-local-bf16-none-lora-zero3-gc+m_qwen2_vl",
    ]
    assert found[0].notes == [
        "8 cards asked for: this host has 1 sm_90 card, so the cell runs 1 rank; memory per card "
        "is measured at 1, not 8, ways of sharding"
    ]
    # FSDP on one card is no FSDP: it keeps 2 ranks, and the planner records it unsupported on this host
    assert found[1].notes == [
        "8 cards asked for: this host has 1 sm_90 card; FSDP shards over 2 or more, so the cell "
        "asks for 2 and is recorded as unsupported here"
    ]
    h100 = Gpu(index=0, name="NVIDIA H100 80GB HBM3", compute_capability="9.0", memory_bytes=80 * 2**30)
    planned = runner.plan(
        [j.cell for j in found], Host(cpu="test", gpus=(h100,), driver=None, cuda_driver=None, gpu_probe="test")
    )
    assert [(p.here, p.unsupported, p.reason) for p in planned][1] == (
        False,
        True,
        "needs 2 sm_90 cards; this host has 1",
    )
    assert planned[0].here and planned[2].here
    _, found = jobs("qwen2vl-8cards-replicated", hardware="sm_90", cards_here=8)
    assert [j.cell.ranks for j in found] == [8, 8, 8] and found[0].notes == []


def test_gpus_given_on_the_command_line_win_over_the_variants():
    _, found = jobs("glm4-lora-zero3-offload")
    assert [j.cell.ranks for j in found] == [2, 2, 1, 1]
    _, found = jobs("glm4-lora-zero3-offload", gpus=2)
    assert [j.cell.ranks for j in found] == [2, 2, 2, 2]


def test_the_training_yaml_s_fp16_wins_over_accelerate_s_mixed_precision_as_at_run_time():
    _, (job,) = jobs("llamafactory-fsdp-qlora-fp16")
    assert job.req.why["precision"] == "llama3_lora_sft.yaml: fp16 = True"
    assert (
        "precision: llama3_lora_sft.yaml: fp16 = True overrides fsdp_config.yaml: mixed_precision = bf16"
        in job.req.notes
    )
    assert job.req.train == {"gradient_accumulation_steps": 8}


def test_an_accelerate_fsdp_config_is_handed_to_the_trainer_as_given():
    _, (job,) = jobs("llamafactory-fsdp-qlora-fp16")
    assert preflight.fsdp_args(job.req) == {
        "fsdp": "full_shard offload auto_wrap",
        "fsdp_config": {
            "fsdp_backward_prefetch": "BACKWARD_PRE",
            "fsdp_forward_prefetch": False,
            "fsdp_cpu_ram_efficient_loading": True,
            "fsdp_state_dict_type": "FULL_STATE_DICT",
            "fsdp_sync_module_states": True,
            "fsdp_use_orig_params": True,
        },
    }


def test_variants_change_settings_of_the_tiny_run():
    preset, found = jobs("llama31-8b-staircase")
    by_name = {j.variant.name: j.variant for j in found}
    assert by_name["dynamic"].settings["train"]["padding"] == "longest"
    assert by_name["padded"].settings["train"]["padding"] == "max_length"
    assert by_name["padded"].changes == ("train.padding = 'max_length'",)
    assert by_name["padded"].settings["model"]["vocab_size"] == 8192  # the preset's own [settings.model]
    preset, found = jobs("deepke-llama2-4bit")
    assert [j.variant.settings["train"]["load_in_kbit_kwarg"] for j in found] == [True, True, False]
    assert found[0].req.why["quantization"] == "preset deepke-llama2-4bit, variant deepke-pins: quantization = nf4dq"
    assert "fine_llama_args.yaml: bits" in found[0].req.unknown  # DeepKE's own flag: no format compat reads has it


def broken(tmp_path, text: str, name: str = "mine"):
    matrix = tmp_path / "matrix"
    shutil.copytree(MATRIX, matrix, ignore=shutil.ignore_patterns("presets"))
    folder = matrix / "presets" / name
    folder.mkdir(parents=True)
    shutil.copy(MATRIX / "presets" / "llama31-8b-staircase" / "llama31_lora_sft.yaml", folder)
    (folder / "preset.toml").write_text(text)
    return tmp_path


GOOD = """description = "x"
configs = ["llama31_lora_sft.yaml"]
sources = ["https://github.com/o/r/issues/1"]
"""


@pytest.mark.parametrize(
    "text, problems",
    [
        (GOOD + "soruces = []\n", ["preset.toml:4: soruces: unknown key (did you mean 'sources'?)"]),
        (
            'description = "x"\nconfigs = ["nope.yaml"]\n',
            [
                "preset.toml:2: configs: no such file in",
                "preset.toml: sources: must list the reports the preset mirrors, as https:// addresses",
            ],
        ),
        (
            GOOD + '[[variant]]\nname = "a"\nstack = "hf2099"\n[[variant]]\nname = "a"\ngpus = 0\n',
            [
                'preset.toml:6: [[variant]] #1.stack: "hf2099" is not one of',
                "preset.toml:8: [[variant]] #2.name: 'a' is the name of an earlier variant",
                "preset.toml:9: [[variant]] #2.gpus: 0 must be a whole number of cards, 1 or more",
            ],
        ),
        (
            GOOD + '[settings.train]\npading = "max_length"\n',
            ["preset.toml:5: [settings.train].pading: unknown setting (did you mean 'padding'?)"],
        ),
        (
            GOOD + '[[variant]]\nname = "b"\n[variant.settings.train]\npadding = "packed"\n',
            ['[variant.settings.train].padding: "packed" is not one of "longest", "max_length"'],
        ),
        ('description = "x"\nconfigs = [\n', ["preset.toml: not valid TOML"]),
    ],
)
def test_a_broken_preset_lists_every_problem_with_file_and_line(tmp_path, text, problems):
    home = broken(tmp_path, text)
    with pytest.raises(MatrixError) as exc:
        jobs("mine", matrix=home / "matrix")
    for problem in problems:
        assert problem in str(exc.value), str(exc.value)


def test_a_broken_preset_through_the_cli_is_exit_code_2(compat, tmp_path):
    home = broken(tmp_path, GOOD + "soruces = []\n")
    proc = compat("preflight", "--preset", "mine", "--plan", env={"COMPAT_HOME": str(home)})
    assert_clean_error(proc, 2)
    assert "preset.toml:4: soruces: unknown key (did you mean 'sources'?)" in proc.stderr


def test_an_unknown_preset_says_which_there_are(compat):
    proc = compat("preflight", "--preset", "glm4-lora-zero3", "--plan")
    assert_clean_error(proc, 2)
    assert proc.stderr == (
        "compat: error: no preset 'glm4-lora-zero3' (did you mean 'glm4-lora-zero3-offload'?); "
        f"matrix/presets/ has {', '.join(sorted(CPU_CELLS))}\n"
    )


def test_configs_and_a_preset_together_or_neither_is_a_usage_error(compat):
    proc = compat("preflight", "--preset", "deepke-llama2-4bit", "x.yaml", "--plan")
    assert_clean_error(proc, 2)
    assert "give your config files, or --preset NAME" in proc.stderr
    proc = compat("preflight", "--plan")
    assert_clean_error(proc, 2)
    assert "nothing to read: give your config files, or --preset NAME" in proc.stderr


def test_the_plan_of_a_preset_reads_as_a_report(compat):
    proc = compat("preflight", "--preset", "qwen2vl-8cards-replicated", "--plan")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("Preset qwen2vl-8cards-replicated: Qwen2-VL-72B LoRA (LLaMA-Factory) on 8 cards")
    assert (
        "  reported on 8 cards of A100 80GB; sources:\n    https://github.com/hiyouga/LlamaFactory/issues/5589\n" in out
    )
    assert out.count("== variant ") == 3
    # the first variant lists every field; the later ones only the files they add
    assert out.count("qwen2vl_lora_sft.yaml: dataset") == 1
    assert (
        "Read, besides the first variant's files: \n  " in out
        and "fsdp_config.yaml  (accelerate config, 16 fields)" in out
    )
    # the real model's size, predicted by compat fit for the strategies of the variants, labelled so
    assert "Predicted for the real model (Qwen/Qwen2-VL-72B-Instruct, 72B), not measured: compat fit" in out
    # an A100 80GB exposes 81,920 MiB (matrix/gpus.toml's memory_mib)
    assert "on 8 x A100 (80.0 GiB per card, as the card exposes it; 'fits' leaves 10% free)" in out
    table = out[out.index("  strategy  per card") :].splitlines()[1:4]
    assert [row.split()[0] for row in table] == ["ddp", "fsdp", "zero3"]
    assert "does not fit" in table[0] and table[2].split()[3:5] == ["backward", "fits"]

    # the FSDP variant's accelerate config turns cpu_ram_efficient_loading on: rank 0 alone loads the
    # whole model in host memory (72.7 B x 2 bytes, 135.4 GiB), where DDP's 8 processes each do; it
    # offloads (fsdp_offload_params), so training keeps a little more there than loading did
    def explained(strategy):  # its line of what it does, not its line of allocated/reserved/nvidia-smi
        (line,) = [
            row
            for row in out.splitlines()
            if row.startswith(f"    {strategy}: ") and not row.startswith(f"    {strategy}: allocated ")
        ]
        return line

    fsdp = explained("fsdp")
    assert "with parameters, gradients and optimizer state in host memory" in fsdp
    assert "loading: rank 0 materialises the whole model in host memory" in fsdp
    assert "host memory at most 136.6 GiB for its 8 processes (while training)" in fsdp
    assert "host memory at most 1,083.4 GiB for its 8 processes (while loading)" in explained("ddp")


def test_fit_takes_the_memory_a_card_s_name_gives(compat):
    proc = compat("fit", "--model-size", "7B", "--gpu", "A100 80GB")
    assert proc.returncode == 0, proc.stderr
    assert "on 1 x A100 (80.0 GiB per card" in proc.stdout
    proc = compat("fit", "--model-size", "7B", "--gpu", "A100")
    assert "on 1 x A100 (40.0 GiB per card" in proc.stdout


def test_cutting_a_preset_folder_loose_from_its_files_is_caught(tmp_path):
    home = broken(tmp_path, GOOD)
    (home / "matrix" / "presets" / "mine" / "llama31_lora_sft.yaml").unlink()
    with pytest.raises(MatrixError, match="configs: no such file in"):
        jobs("mine", matrix=home / "matrix")
    with pytest.raises(UsageError, match="no preset 'other'"):
        jobs("other", matrix=home / "matrix")


def test_model_size_gives_the_fit_prediction_where_the_model_s_name_has_no_size(compat, tmp_path):
    yaml = tmp_path / "mine.yaml"
    yaml.write_text("model_name_or_path: /data/models/my-llama\nfinetuning_type: lora\nbf16: true\ncutoff_len: 1024\n")
    proc = compat("preflight", str(yaml), "--plan", "--gpu", "4090")
    assert proc.returncode == 0, proc.stderr
    assert "Predicted for the real model" not in proc.stdout  # no size in the name, none given: no guess
    proc = compat("preflight", str(yaml), "--plan", "--gpu", "4090", "--model-size", "7B")
    assert proc.returncode == 0, proc.stderr
    assert "Predicted for the real model (/data/models/my-llama, 7B), not measured: compat fit" in proc.stdout
    assert (
        "sequence 1024 x batch 1 per card" in proc.stdout
        and "on 1 x GeForce RTX 4090 (24.0 GiB per card" in proc.stdout
    )
    proc = compat("preflight", str(yaml), "--plan", "--model-size", "5B")
    assert proc.returncode == 0, proc.stderr
    assert (
        "Predicted for the real model (/data/models/my-llama, 5B), not measured: compat fit\n  no prediction; "
        "compat fit says: --model-size '5B'" in proc.stdout
    )


def test_a_preset_s_sequence_lengths_are_checked_as_a_matrix_s_are(tmp_path):
    home = broken(tmp_path, GOOD + '[[variant]]\nname = "a"\n[variant.settings.train]\nseq_len_min = 2048\n')
    with pytest.raises(MatrixError, match=r"\[variant.settings.train\].seq_len_min: is larger than seq_len_max"):
        jobs("mine", matrix=home / "matrix")
