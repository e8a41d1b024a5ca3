"""The known-issue base: every entry is well-formed, cites sources, and its signatures match its
own example (a log excerpt from a cited report) and not unrelated logs; `compat explain` ranks,
reads any bytes, and says so when nothing matches; failed records get tagged."""

import json
import re
import textwrap

import pytest

from harness.catalog import known_issues
from harness.catalog.known_issues import KnownIssues, error_signature, read_log
from harness.errors import MatrixError
from harness.evidence import summary

from conftest import ROOT, call_compat

BASE = KnownIssues.load(ROOT / "matrix")
IDS = [i.id for i in BASE.issues]

# Logs no entry is about: a clean run, and failures of other kinds.
UNRELATED = {
    "clean-run": textwrap.dedent("""\
        {'loss': 4.292, 'grad_norm': 1.647, 'learning_rate': 0.005, 'epoch': 0.875}
        {'loss': 3.993, 'grad_norm': 1.922, 'learning_rate': 0.005, 'epoch': 1.0}
        {'train_runtime': 0.2554, 'train_samples_per_second': 250.6, 'train_loss': 4.528, 'epoch': 1.0}
        Writing model shards: 100%|##########| 1/1 [00:00<00:00, 1083.24it/s]
        """),
    "key-error": textwrap.dedent("""\
        Traceback (most recent call last):
          File "train.py", line 12, in <module>
            value = config["learning_rate"]
        KeyError: 'learning_rate'
        """),
    "file-not-found": textwrap.dedent("""\
        Traceback (most recent call last):
          File "train.py", line 40, in <module>
            dataset = load_dataset("json", data_files="data/train.jsonl")
        FileNotFoundError: Unable to find '/home/user/data/train.jsonl'
        """),
    "compat-check": "CheckFailed: saving changed the trained model in memory (the saved copy is right): max |logit "
    "diff| 0.032 before vs after save_model\n",
}


def test_the_base_has_at_least_200_cited_entries_each_with_its_report_count():
    assert len(BASE.issues) >= 200
    # 0: compat's own finding
    assert all(isinstance(i.reports, int) and (i.reports >= 1 or i.found_by) for i in BASE.issues)
    assert len(set(IDS)) == len(IDS)
    for issue in BASE.issues:
        assert issue.sources and all(s.startswith(("https://", "http://")) for s in issue.sources), issue.id
        assert issue.fix and issue.cause and issue.title


@pytest.mark.parametrize("issue_id", IDS)
def test_signature_matches_its_own_example_and_ranks_it_first(issue_id):
    issue = BASE.get(issue_id)
    assert issue.hits(issue.example), f"{issue_id}: no signature matches its example"
    ranked = BASE.explain(issue.example)
    best = ranked[0].score
    # first, or tied for first with entries that share its wording (e.g. the same TypeError
    # raised by transformers < 4.30 and >= 5 for different reasons)
    assert issue_id in [m.issue.id for m in ranked if m.score == best]


def test_every_entry_matches_its_example_as_a_launcher_prefixes_it():
    """torchrun writes "[rank3]:" before each line a worker prints (and "[default0]:" with --tee),
    Ray "(WorkerActor pid=6490, ip=...)": an entry whose signature spans lines of a traceback, or
    starts at a line's beginning, must still find its error in such a paste, and rank first."""
    missed = []
    for prefix in ("[rank3]: ", "[default0]:", "(TemporaryActor pid=6490) ", "(RayWorker pid=12, ip=10.0.0.2) "):
        for issue in BASE.issues:
            log = "\n".join(prefix + line for line in known_issues.clean(issue.example).split("\n"))
            ranked = BASE.explain(log)
            if not ranked or issue.id not in [m.issue.id for m in ranked if m.score == ranked[0].score]:
                missed.append((prefix, issue.id))
    assert missed == []


@pytest.mark.parametrize("issue_id", IDS)
def test_signature_does_not_match_unrelated_logs(issue_id):
    issue = BASE.get(issue_id)
    for name, log in UNRELATED.items():
        assert not issue.hits(log), f"{issue_id} matches the unrelated log {name!r}"


def test_required_failure_families_are_covered():
    families = {
        "bf16 triu on old torch": "torch-bf16-triu-missing-causal-mask",
        "load_in_4bit next to quantization_config": "bnb-kwarg-with-quantization-config",
        "bf16 on pre-Ampere": "transformers-bf16-unsupported-pre-ampere",
        "tf32 on pre-Ampere": "transformers-tf32-requires-ampere",
        "is_bf16_supported emulation": "torch-is-bf16-supported-emulation",
        "bitsandbytes on old cards": "bnb-int8-igemmlt-unsupported-pre-turing",
        "bitsandbytes on new cards": "bnb-int8-cublaslt-error-hopper",
        "ZeRO-3 with LoRA": "zero3-lora-empty-adapter",
        "ZeRO-3 with QLoRA": "zero3-qlora-sharded-load",
        "FSDP with QLoRA": "fsdp-qlora-integer-dtype",
        "DDP OOM where sharding was needed": "ddp-oom-no-sharding",
        "no kernel image / sm_61 not compatible": "torch-pascal-maxwell-dropped-cu128",
        "flash-attention needs Ampere": "flash-attn2-requires-ampere",
        "gradient checkpointing with peft": "gradckpt-no-grad-fn",
        "removed peft API": "peft-prepare-int8-removed",
        "removed transformers API": "trainingargs-evaluation-strategy-removed",
    }
    missing = {f: i for f, i in families.items() if BASE.get(i) is None}
    assert not missing


TRIU_LOG = textwrap.dedent("""\
    [INFO|trainer.py:2128] >> ***** Running training *****
      File "/opt/conda/lib/python3.10/site-packages/transformers/models/llama/modeling_llama.py", line 1095, in _update_causal_mask
        causal_mask = torch.triu(causal_mask, diagonal=1)
    RuntimeError: "triu_tril_cuda_template" not implemented for 'BFloat16'
    """)  # noqa: E501  (a log line as torch prints it)


def compat(*args, stdin: bytes | None = None):
    return call_compat(*args, input=stdin)


def test_explain_names_the_old_torch_cause_and_both_fixes(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(TRIU_LOG)
    proc = compat("explain", str(log))
    out = proc.stdout
    assert proc.returncode == 0, proc.stderr
    assert out.splitlines()[0].endswith("best first:")
    assert out.splitlines()[1] == "Confidence: a known issue matches, and what the log shows meets its conditions."
    first = out.split("\n\n")[1]
    assert first.startswith("1. torch-bf16-triu-missing-causal-mask")
    assert "torch before 2.1" in first
    assert "Upgrade torch to 2.1 or newer" in first  # fix 1
    assert "pin transformers<=4.38.2" in first  # fix 2
    data = json.loads(compat("explain", str(log), "--format", "json").stdout)
    assert data["matches"][0]["id"] == "torch-bf16-triu-missing-causal-mask"
    assert data["matches"][0]["pins"] == {"torch": ">=2.1"}


def test_explain_reads_stdin_and_any_bytes():
    garbage = bytes(range(256)) * 1000 + b"\xff\xfe" + TRIU_LOG.encode() + b"\x00\x80\x81"
    proc = compat("explain", "-", "--format", "json", stdin=garbage)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["matches"][0]["id"] == "torch-bf16-triu-missing-causal-mask"


def test_explain_with_no_match_shows_the_normalized_signature(tmp_path):
    log = tmp_path / "other.log"
    log.write_text(UNRELATED["file-not-found"])
    proc = compat("explain", str(log))
    assert proc.returncode == 0
    assert proc.stdout.startswith(
        f"No known issue matches {log}.\n"
        "Its error signature: FileNotFoundError: Unable to find '<path>'\n"
        "Confidence: a failure family compat recognises, not a specific known issue.\n\n"
        "A family-level answer, not a matched known issue: file-missing\n"
        "   matched: FileNotFoundError: Unable to find '/home/user/data/train.jsonl'\n"
    )


def test_explain_bad_input_is_a_clear_error(tmp_path):
    proc = compat("explain", str(tmp_path / "missing.log"))
    assert proc.returncode == 2
    assert proc.stderr == f"compat: error: {tmp_path / 'missing.log'}: cannot be read: No such file or directory\n"
    proc = compat("explain", str(tmp_path))
    assert proc.returncode == 2 and "is a folder, not a log file" in proc.stderr


def test_a_huge_log_keeps_its_start_and_end(tmp_path):
    import io

    big = b"START torch 2.0.1\n" + b"step\n" * 2_000_000 + TRIU_LOG.encode()
    text = read_log(io.BytesIO(big))
    assert text.startswith("START torch 2.0.1") and "triu_tril_cuda_template" in text
    assert "bytes skipped" in text and len(text) < 5 * 2**20


def test_error_signature_of_a_launcher_log():
    log = (
        "Traceback (most recent call last):\n  File \"x.py\", line 9\nImportError: cannot import name 'log' from "
        "'a.b' (/x/y.py)\n"
    )
    assert error_signature(log) == "ImportError: cannot import name 'log' from 'a.b' (<path>)"


def test_tag_needs_signature_and_conditions():
    record = {
        "outcome": "fail",
        "axes": {"hardware": "cpu", "strategy": "zero2", "precision": "fp32", "quantization": "none", "method": "full"},
        "error": {
            "type": "ImportError",
            "message": "cannot import name 'log' from 'torch.distributed.elastic.agent.server.api' (/x/api.py)",
            "excerpt": "",
        },
        "fingerprint": {
            "packages": {"deepspeed": "0.10.3"},
            "torch": {"version": "2.13.0+cpu"},
            "hardware": {"gpus": []},
        },
    }
    assert summary.issues_shown(BASE, record) == ["deepspeed-old-vs-torch24-elastic-import"]
    record["fingerprint"]["packages"]["deepspeed"] = "0.19.8"  # a DeepSpeed that has the fix
    assert summary.issues_shown(BASE, record) == []
    assert summary.issues_shown(BASE, {"outcome": "pass", "error": None}) == []


def write(tmp_path, text):
    (tmp_path / "known_issues.toml").write_text(textwrap.dedent(text))
    return tmp_path / "known_issues.toml"


def test_malformed_entries_are_reported_with_file_and_line(tmp_path):
    path = write(
        tmp_path,
        """\
        [[issue]]
        id = "ok-entry"
        title = "t"
        cause = "c"
        signatures = ['boom']
        example = "boom happened"
        fix = ["f"]
        sources = ["https://example.org/1"]
        reports = 1

        [[issue]]
        id = "Bad Id"
        title = "t"
        cause = "c"
        signatures = ['unclosed(']
        example = "x"
        fix = ["f"]
        sources = ["not a url"]
        [issue.when]
        torch = "=>2"
        precison = ["bf16"]
        """,
    )
    with pytest.raises(MatrixError) as err:
        KnownIssues.load(tmp_path)
    p = str(path)
    assert err.value.problems == [
        f"{p}:12: [[issue]] #2 (Bad Id).id: 'Bad Id': an id is lower-case words joined by '-'",
        f"{p}:15: [[issue]] #2 (Bad Id).signatures: 'unclosed(' is not a regex RE2 takes (no lookaround, no "
        "backreference): missing ): unclosed(",
        f"{p}:18: [[issue]] #2 (Bad Id).sources: 'not a url' is not a URL",
        f"{p}:11: [[issue]] #2 (Bad Id): missing key 'reports'",
        f"{p}:20: [[issue]] #2 (Bad Id).when.torch: '=>2' is not a version specifier",
        f"{p}:21: [[issue]] #2 (Bad Id).when.precison: unknown condition (did you mean 'precision'?)",
    ]


def test_an_example_its_signature_does_not_match_is_an_error(tmp_path):
    write(
        tmp_path,
        """\
        [[issue]]
        id = "mismatch"
        title = "t"
        cause = "c"
        signatures = ['boom']
        example = "nothing to see"
        fix = ["f"]
        sources = ["https://example.org/1"]
        reports = 1
        """,
    )
    with pytest.raises(MatrixError, match="no signature of this entry matches its own example"):
        KnownIssues.load(tmp_path)


def test_no_entry_matches_another_entrys_example_without_a_declared_relation():
    """Two entries whose signatures find each other's examples must say why (`related`): else a
    user's log gets two answers and nothing tells which is theirs."""
    undeclared = [
        (a.id, b.id)
        for a in BASE.issues
        for b in BASE.issues
        if a.id != b.id and a.hits(b.example) and b.id not in a.related and a.id not in b.related
    ]
    assert undeclared == []


def load_edited(tmp_path, old: str, new: str) -> str:
    """The base with its first `old` replaced by `new`, loaded: the MatrixError's text (the
    replacement must have happened and the load must fail)."""
    text = (ROOT / "matrix" / "known_issues.toml").read_text()
    assert old in text
    (tmp_path / "known_issues.toml").write_text(text.replace(old, new, 1))
    with pytest.raises(MatrixError) as err:
        KnownIssues.load(tmp_path)
    return str(err.value)


def test_a_finding_of_compats_own_has_no_public_report_and_says_how_it_was_found(tmp_path):
    found = BASE.get("bnb-cpu-4bit-eval-forward-repacks-weights")
    # the bisection committed in results/bisect
    assert found.reports == 0 and "bisect-20261126T061911Z-a246de" in found.found_by
    text = (ROOT / "matrix" / "known_issues.toml").read_text()
    entry = text[text.index('id = "bnb-cpu-4bit-eval-forward-repacks-weights"') :]
    bad = tmp_path / "known_issues.toml"
    bad.write_text("[[issue]]\n" + entry.replace(f'found_by = "{found.found_by}"\n', ""))
    with pytest.raises(MatrixError, match="0 public reports: say how compat found it"):
        KnownIssues.load(tmp_path)


def test_a_relation_names_another_entry(tmp_path):
    err = load_edited(tmp_path, "related = { gradckpt-use-reentrant-warning = ", "related = { no-such-entry = ")
    assert "(gradckpt-no-grad-fn).related: 'no-such-entry' is not another entry's id" in err


def test_shown_names_a_condition_of_the_entry(tmp_path):
    """`shown` lists `when` keys the log must show; one the entry does not condition on is an error
    naming the place, not an entry that can never answer."""
    err = load_edited(
        tmp_path,
        'shown = ["strategy"]\n[issue.when]\nstrategy = ["ddp"]',
        'shown = ["precision"]\n[issue.when]\nstrategy = ["ddp"]',
    )
    assert "(ddp-oom-no-sharding).shown: 'precision' is not one of this entry's `when` conditions" in err


def test_pins_only_raise_a_floor():
    """`compat recommend` applies the pins of every entry whose conditions hold for a card: an
    upper bound would hold every user on an old release to dodge a break that only some code hits
    (a fix that says "pin X<N" belongs in `fix`, for the users it concerns)."""
    ceilings = {
        i.id: str(spec)
        for i in BASE.issues
        for spec in i.pins.values()
        if any(s.operator in ("<", "<=", "==", "~=", "===") for s in spec)
    }
    assert ceilings == {}


# TEST INPUTS: the last frame of transformers' model-type lookup as three traceback styles print it.
# The plain one is the end of QwenLM/Qwen3#434's log (the entry's example); the IPython and rich
# ones put the code lines that bitsandbytes-foundation/bitsandbytes#413 quotes (transformers 4.27's
# configuration_auto.py, lines 576-581) into those tools' layouts. The last is the standard
# library's configparser raising the same statement (Damian89/extended-ssrf-search#8).
MODEL_TYPE_FRAMES = [
    (
        "  File "
        '"/home/anaconda3/envs/qwen/lib/python3.11/site-packages/transformers/models/auto/configuration_auto.py", '
        "line 723, in __getitem__\n    raise KeyError(key)\nKeyError: 'qwen2'\n",
        True,
    ),
    (
        "/usr/local/lib/python3.9/dist-packages/transformers/models/auto/configuration_auto.py in "
        "__getitem__(self, key)\n"
        "    576         if key in self._extra_content:\n    577             return self._extra_content[key]\n"
        "    578         if key not in self._mapping:\n--> 579             raise KeyError(key)\n"
        "    580         value = self._mapping[key]\n    581         module_name = model_type_to_module_name(key)\n\n"
        "KeyError: 'llama'\n",
        True,
    ),
    (
        "\u2502 /usr/local/lib/python3.10/dist-packages/transformers/models/auto/configuration_auto.py:579 in "
        "__getitem__ \u2502\n"
        "\u2502   578 \u2502   \u2502   if key not in self._mapping:                                  \u2502\n"
        "\u2502 > 579 \u2502   \u2502   \u2502   raise KeyError(key)                                       \u2502\n"
        "\u2502   580 \u2502   \u2502   value = self._mapping[key]                                    \u2502\n"
        "\u2514" + "\u2500" * 77 + "\u2518\nKeyError: 'llama'\n",
        True,
    ),
    (
        '  File "/usr/lib/python3.6/configparser.py", line 959, in __getitem__\n    raise '
        "KeyError(key)\nKeyError: 'default'\n",
        False,
    ),
]


@pytest.mark.parametrize("log,found", MODEL_TYPE_FRAMES)
def test_an_old_transformers_model_type_keyerror_is_read_from_its_last_frame(log, found):
    """A paste that keeps only the last frame, or a notebook's or rich's traceback, still shows the
    mapping's own `raise KeyError(key)` in configuration_auto.py: the entry for a transformers too
    old for the model's type answers it; the same statement in another file does not."""
    ids = [m.issue.id for m in BASE.explain(known_issues.clean(log))]
    assert ("transformers-model-type-keyerror-config-mapping" in ids) == found


@pytest.mark.parametrize("issue_id", [i.id for i in BASE.issues if i.wordings])
def test_an_entry_matches_every_wording_its_error_had(issue_id):
    """Where a release reworded an error, the entry lists each wording (`wordings`, verbatim, with
    the releases that print it and where that is written): its signatures must find every one."""
    issue = BASE.get(issue_id)
    missed = [
        f"{w['package']}{w['version']}: {w.get('rendered') or w['text']}"
        for w in issue.wordings
        if not issue.hits(known_issues.clean(w.get("rendered") or w["text"]))
    ]
    assert missed == []


def test_no_signature_backtracks_on_long_near_misses():
    """Every signature (and explain's own patterns) on 100 KB of near-misses: each entry's matched
    text with its last character cut, repeated on one line and on many. RE2 matches in time linear
    in the text, so this takes milliseconds; a backtracking engine (Python's re) took minutes on
    such input (the reason compat uses RE2). The bound is far above linear time and far below
    catastrophic: it fails only if a pattern backtracks."""
    import time

    from harness.answers import explain

    patterns = [s for i in BASE.issues for s in i.signatures]
    patterns += [f.pattern for f in explain.FAMILIES] + [
        explain.VERSION,
        explain.GPU_NAME,
        explain.BARE_EXCEPTION,
        explain.ERROR_LINE,
        explain.WARNING_LINE,
        explain.FRAME,
    ]
    slowest = 0.0
    for issue in BASE.issues:
        hit = issue.hits(known_issues.clean(issue.example))[0]
        near = hit[:-1] if len(hit) > 1 else hit
        for text in ((near + " ") * (100_000 // (len(near) + 1)), (near + "\n") * (100_000 // (len(near) + 1))):
            for sig in issue.signatures:  # the compiled pattern itself, with no needle to skip it
                started = time.perf_counter()
                known_issues.compile_signature(sig.pattern).search(text)
                slowest = max(slowest, time.perf_counter() - started)
    block = "".join(known_issues.clean(i.example) for i in BASE.issues)[:100_000]
    for pattern in patterns:
        started = time.perf_counter()
        known_issues.compile_signature(pattern.pattern).search(block.replace("Error", "Errr"))
        slowest = max(slowest, time.perf_counter() - started)
    assert slowest < 2.0, f"a pattern took {slowest:.2f} s on 100 KB"


def test_no_report_of_the_accuracy_set_was_used_to_write_the_base():
    """bench/explain_accuracy.py measures explain on reports kept apart from the base: none of the
    set's threads may be cited anywhere in the base, nor be one of the threads read while writing entries
    (bench/explain-threads/), or the figure would measure what the base was written from."""

    def norm(url):
        return url.split("#")[0].rstrip("/")

    measured = {
        norm(json.loads(line)["url"])
        for f in (ROOT / "bench" / "explain-accuracy").glob("*.jsonl")
        for line in f.read_text().splitlines()
        if line.strip()
    }
    cited = {
        norm(u)
        for u in re.findall(r"https://github\.com/[^\s\"')\]]+", (ROOT / "matrix" / "known_issues.toml").read_text())
    }
    read = {
        norm(line.split()[0])
        for f in (ROOT / "bench" / "explain-threads").glob("*.txt")
        for line in f.read_text().splitlines()
        if line.strip()
    }
    assert len(measured) >= 60 and measured & cited == set() and measured & read == set()


def test_a_warning_in_the_source_line_of_a_traceback_is_not_that_warning_printed():
    """A traceback prints, under each frame, the source line it ran; where that line is the call that would
    log a warning, the warning's words are code, not output, and no entry is matched on them. The real
    log (TEST INPUT: https://github.com/tloen/llama-int8/issues/15, a NameError inside bitsandbytes' own
    setup code) once matched the pre-Turing int8 entry; the warning printed (the entry's own example) still
    matches it."""
    real = (
        '$MYPATH/python3.10/site-packages/bitsandbytes/cuda_setup/main.py", line 153, in is_cublasLt_compatible\n'
        '    cuda_setup.add_log_entry("WARNING: Compute capability < 7.5 detected! Only slow 8-bit matmul is '
        'supported for your GPU!", is_warning=True)\n\n'
        "NameError: name 'cuda_setup' is not defined. Did you mean: 'CUDASetup'?\n"
    )
    entry = "bnb-int8-slow-fallback-nan-pre-turing"
    assert entry not in [m.issue.id for m in BASE.explain(real)]
    assert entry in [m.issue.id for m in BASE.explain(BASE.get(entry).example)]
    # TEST INPUT, made up: the same line printed by the logger is output, and matches
    printed = "main.py:145: UserWarning: WARNING: Compute capability < 7.5 detected! Only slow 8-bit matmul is "
    assert entry in [m.issue.id for m in BASE.explain(printed + "supported for your GPU!\n")]


def test_pips_summary_of_a_setup_py_that_cannot_import_torch_is_the_build_isolation_entry():
    """Where setup.py catches the ImportError and prints its own words, pip's summary ("Getting requirements to
    build wheel did not run successfully" ... "No module named 'torch'") is still build isolation's missing torch;
    another module missing from the build (not torch) is not."""
    entry = "pip-build-isolation-setup-py-no-torch"
    # TEST INPUT: https://github.com/hiyouga/LlamaFactory/issues/8097 (auto-gptq 0.7.1's sdist under isolation)
    real = (
        "  Getting requirements to build wheel ... error\n"
        "  error: subprocess-exited-with-error\n\n"
        "  × Getting requirements to build wheel did not run successfully.\n"
        "  │ exit code: 1\n"
        "  ╰─> [1 lines of output]\n"
        "      Building cuda extension requires PyTorch (>=1.13.0) being installed, please install PyTorch first: "
        "No module named 'torch'\n"
        "      [end of output]\n"
    )
    # TEST INPUTS, made up: another package's own words; and a build that lacks another module
    made_up = (
        "  × Getting requirements to build wheel did not run successfully.\n  │ exit code: 1\n"
        "      RuntimeError: mamba_ssm needs torch to build its kernels (No module named 'torch')\n"
    )
    near_miss = (
        "  × Getting requirements to build wheel did not run successfully.\n  │ exit code: 1\n"
        "      ModuleNotFoundError: No module named 'setuptools_scm'\n"
    )
    assert BASE.explain(real)[0].issue.id == entry
    assert BASE.explain(made_up)[0].issue.id == entry
    assert entry not in [m.issue.id for m in BASE.explain(near_miss)]


def test_markdown_bold_around_a_pasted_log_is_not_the_logs():
    """TEST INPUT, made up in the way reports paste logs: `**` opening the first line and closing the last are
    markdown, not the log's (the exception line then reads as Python printed it); a row of asterisks that a
    program prints as a rule, and `**kwargs` inside a line, stay."""
    log = (
        "Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\nImportError: cannot import name 'x'"
    )
    assert known_issues.clean("**" + log + "**\n") == log + "\n"
    kept = "********************\n    return f(*args, **kwargs)\n"
    assert known_issues.clean(kept) == kept


def test_a_symptom_with_many_causes_is_not_matched_as_one_of_them():
    """A NaN loss alone is the nan-loss family: the fp16-overflow entry answers only where the log shows fp16
    (`shown`); NCCL's bare "unhandled system error" is the nccl-error family, and the shared-memory entry answers on
    its shared-memory lines."""
    nan_entry, shm_entry = "fp16-overflow-nan-loss", "nccl-unhandled-system-error-shm"
    # TEST INPUT: https://github.com/hiyouga/LlamaFactory/issues/5627 (a DeepSpeed bug on Ascend NPUs, not fp16)
    npu = (
        "{'loss': 1.4596, 'grad_norm': nan, 'learning_rate': 4.552255167404752e-06, 'epoch': 0.66}\n"
        "接着就都是\n"
        "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 4.549912997495027e-06, 'epoch': 0.66}\n"
    )
    found = {m.issue.id: m for m in BASE.explain(npu)}
    assert not found[nan_entry].answers
    # TEST INPUT, made up: the same NaN where the log shows fp16 (a Trainer's arguments) answers
    shown = "fp16=True,\n" + npu
    from harness.answers import explain

    facts = explain.read(shown, None)
    assert {m.issue.id: m for m in BASE.explain(shown, facts.packages(), facts.cc, facts.axes())}[nan_entry].answers
    # TEST INPUT: https://github.com/deepinsight/insightface/issues/1444 (two nodes in containers on a bridge
    # network: a socket failure, not shared memory)
    bridge = (
        '  File "/opt/conda/lib/python3.6/site-packages/torch/distributed/distributed_c10d.py", line 842, in '
        "broadcast\n"
        "    work = _default_pg.broadcast([tensor], opts)\n"
        "RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:518, unhandled system error, "
        "NCCL version 2.4.8\n"
    )
    assert shm_entry not in [m.issue.id for m in BASE.explain(bridge)]
    assert shm_entry in [m.issue.id for m in BASE.explain(BASE.get(shm_entry).example)]
