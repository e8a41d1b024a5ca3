"""How often `compat explain`'s top answer is right on real public reports it was not written
from, and how long it takes on a 100 MB log (issue 21, item 5).

    python bench/explain_accuracy.py [--out bench/results]

The set is bench/explain-accuracy/*.jsonl (its README says how it was drawn: threads not read
while writing the base, taken in search order, each labelled from what its own thread
established). For each report, explain reads its log with the versions the thread states (as
`--env` would give them); the top answer is the first matched entry whose conditions the
log does not leave unshown or contradict, else the family-level answer (as explain prints it). It is counted right when:
- the label names an entry (`expected_entry`) and the top match is that entry, another entry the
  label lists as stating the same cause (`also_entries`), or one it declares `related`;
- the label names no entry and explain matched none, and its family is one that judged.json says
  names that report's cause and fix direction. judged.json was written by a reader given only the
  reports (log, cause, fix) and the family answers' texts as they stood (judged-families.md), not
  what explain answers for any log. A report without a judgement, or any report when the family
  texts have changed since they were judged (the script says so), falls back to the first pass's
  rule, the label's family, which is looser: it counted, for example, a generic CUDA-error answer
  right for an out-of-memory report labelled cuda-error. Both figures are printed.
A generic answer (the exception alone, or the last error line) is counted wrong, and "no answer"
is a log explain found no error line in. The timing runs `compat explain` as a user does, on a
generated 100 MB log of training-progress lines that ends in a known error, three times.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.answers import explain  # noqa: E402
from harness.catalog import gpus, known_issues  # noqa: E402

SET = ROOT / "bench" / "explain-accuracy"
GENERIC = set(explain.GUESSES)  # the catch-all answers, which name no cause
JUDGED = SET / "judged.json"
JUDGED_FAMILIES = SET / "judged-families.md"

# The latest draw made after a change to explain and scored once: its parts, and the commit whose harness/ and base
# it was scored on (HOW-issue44-j.md, -k.md and -l.md; cu–dj were drawn on e9051bf, whose answers 9671858 gives byte
# for byte). Its figures are held out only while both are as that commit has them; a change to either makes them
# development figures, and the next draw replaces this.
LATEST_DRAW = {
    "parts": ("cu", "cv", "cw", "cx", "cy", "cz", "da", "db", "dc", "dd", "de", "df", "dg", "dh", "di", "dj")
    + ("dk", "dl", "dm", "dn", "do", "dp", "dq", "dr"),
    "drawn_on": "9671858",
}
WATCHED = ("harness", "matrix/known_issues.toml")  # what explain's answers come from


def family_texts() -> str:
    """The family answers' texts as the judge reads them (judged-families.md): every family, and every answer a
    reading of the log's context gives (explain.CONTEXT_ANSWERS: an error raised in a hub model's own code or in the
    project's own code, code that touches ZeRO-3's partitioned parameters, a log of warnings...)."""
    rows = [(f.name, f.cause, f.step) for f in explain.FAMILIES if f.name not in GENERIC]  # a guess is never right
    rows += [(name, cause, step) for name, (cause, step) in explain.CONTEXT_ANSWERS.items() if name not in GENERIC]
    rows = [
        (name, cause + " (a warning repeated many times concerns the data or every step)", step)
        if name == "warnings-only"
        else (name, cause, step)
        for name, cause, step in rows
    ]
    return (
        "# The family-level answers of `compat explain` (placeholders in {braces} are filled from the log)\n\n"
        + "".join(f"## {name}\n- cause: {cause}\n- next step: {step}\n\n" for name, cause, step in rows)
    )


def acceptances() -> tuple[dict, str | None]:
    """{url: families judged to name its cause and fix}, and why they are not used, if not."""
    if not JUDGED.is_file():
        return {}, "no judged.json"
    if family_texts() != JUDGED_FAMILIES.read_text():
        return {}, "the family answers' texts changed since they were judged: judged acceptances not used (judge again)"
    return {url: set(v["accepts"]) for url, v in json.loads(JUDGED.read_text()).items()}, None


def reports(parts: list[str] | None = None) -> list[tuple[str, dict]]:
    """The set's reports, each with its part (the file's name): every part, or those named."""
    files = sorted(SET.glob("*.jsonl")) if not parts else [SET / f"{p}.jsonl" for p in parts]
    return [(f.stem, json.loads(x)) for f in files for x in f.read_text(encoding="utf-8").splitlines() if x.strip()]


def score(rec: dict, base, gpu_db, accepts: dict | None = None) -> dict:
    text = known_issues.clean(rec["log"])
    facts = explain.read(text, gpu_db)
    facts.merge(explain.Facts(versions={k: str(v) for k, v in (rec.get("versions") or {}).items()}))
    matches = base.explain(text, facts.packages(), facts.cc, facts.axes())
    answer = explain.classify(text, facts)
    expected = rec.get("expected_entry")
    top = next((m.issue.id for m in matches if m.answers), None)  # else the family answer is first
    if expected:
        entry = base.get(expected)
        right = by_label = top is not None and (
            top == expected
            or top in rec.get("also_entries", ())
            or top in (entry.related if entry else {})
            or (base.get(top) is not None and expected in base.get(top).related)
        )
    else:
        judged = (accepts or {}).get(rec["url"])
        by_label = top is None and answer.family not in GENERIC and answer.family == rec["family"]
        right = (
            top is None and answer.family not in GENERIC and answer.family in judged if judged is not None else by_label
        )
    return {
        "url": rec["url"],
        "kind": _kind(top, right, answer.family, rec, accepts),
        "expected_entry": expected,
        "right_by_label": by_label,
        "label_family": rec["family"],
        "top_match": top,
        "family": answer.family,
        "right": right,
        "no_answer": top is None and answer.family == "no-error-line",
    }


def _kind(top, right: bool, family: str, rec: dict, accepts: dict | None) -> str:
    """What the top answer was (issue 44): a matched entry, right or wrong; a family answer that points
    the report's way (judged.json accepts it, else it is the label's family) or the wrong way; a
    catch-all (explain.GUESSES: it names no cause)."""
    if top is not None:
        return "matched-right" if right else "matched-wrong"
    if family in GENERIC:
        return "catch-all"
    judged = (accepts or {}).get(rec["url"])
    fits = family in judged if judged is not None else family == rec["family"]
    return "family-right" if fits else "family-wrong"


def figures(rows: list[dict]) -> dict:
    """Issue 44's three figures for a set of rows, with the share of each kind of answer: precision
    (a named known issue is the cause), misleading (a family answer that points the wrong way, of
    all reports) and right (the top answer names the cause and fix direction)."""
    kinds = {k: sum(r["kind"] == k for r in rows) for k in KINDS}
    matched = kinds["matched-right"] + kinds["matched-wrong"]
    n = max(1, len(rows))
    return {
        "reports": len(rows),
        "precision": round(kinds["matched-right"] / matched, 3) if matched else None,
        "misleading": round(kinds["family-wrong"] / n, 3),
        "right": round(sum(r["right"] for r in rows) / n, 3),
        "kinds": kinds,
    }


KINDS = ("matched-right", "matched-wrong", "family-right", "family-wrong", "catch-all")


def _figure_lines(rows: list[dict]) -> list[str]:
    """A table of figures(): the whole set, then each part (each draw) on its own."""
    parts = sorted({r["part"] for r in rows})
    out = [
        "| part | reports | precision | misleading | right | " + " | ".join(KINDS) + " |",
        "|---" * (5 + len(KINDS)) + "|",
    ]
    for name, some in [("all", rows)] + [(p, [r for r in rows if r["part"] == p]) for p in parts]:
        f = figures(some)
        precision = f"{100 * f['precision']:.0f}%" if f["precision"] is not None else "—"
        out.append(
            f"| {name} | {f['reports']} | {precision} | {100 * f['misleading']:.0f}% | {100 * f['right']:.0f}% | "
            + " | ".join(str(f["kinds"][k]) for k in KINDS)
            + " |"
        )
    return out


def held_out(commit: str, root: Path = ROOT) -> bool | None:
    """Whether harness/ and the base are as COMMIT has them (no change, committed or not, and no new file); None
    where git cannot tell (no git, or a clone without that commit)."""
    try:
        diff = subprocess.run(["git", "diff", "--quiet", commit, "--", *WATCHED], cwd=root, capture_output=True)
        new = subprocess.run(
            ["git", "ls-files", "--others", "--exclude-standard", "--", *WATCHED], cwd=root, capture_output=True
        )
    except OSError:
        return None
    if diff.returncode not in (0, 1) or new.returncode != 0:
        return None
    return diff.returncode == 0 and not new.stdout.strip()


def draw_line(rows: list[dict], draw: dict, held: bool | None) -> str:
    """One sentence: the latest draw's three figures, and whether they are still held out."""
    some = [r for r in rows if r["part"] in draw["parts"]]
    f = figures(some)
    k, n = f["kinds"], len(some)
    matched = k["matched-right"] + k["matched-wrong"]
    precision = f"{100 * f['precision']:.0f}% ({k['matched-right']} of {matched})" if matched else "— (none named)"
    status = {
        True: f"held out: harness/ and the base are as {draw['drawn_on']} has them",
        False: f"development figures now: harness/ or the base changed since {draw['drawn_on']}",
        None: f"git cannot tell whether harness/ or the base changed since {draw['drawn_on']}",
    }[held]
    return (
        f"The latest draw made after a change, parts {draw['parts'][0]}–{draw['parts'][-1]} ({n} reports; {status}): "
        f"precision {precision}, misleading {100 * f['misleading']:.1f}% ({k['family-wrong']}), "
        f"right {100 * f['right']:.1f}% ({sum(r['right'] for r in some)}). Goals: 95%, 10%, 60%."
    )


def timing(repeat: int = 3) -> list[float]:
    line = "{'loss': 1.2345, 'grad_norm': 0.4321, 'learning_rate': 2e-05, 'epoch': 0.12}\n"
    tail = (
        '  File "modeling_llama.py", line 1095, in _update_causal_mask\n'
        "    causal_mask = torch.triu(causal_mask, diagonal=1)\n"
        "RuntimeError: \"triu_tril_cuda_template\" not implemented for 'BFloat16'\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "train.log"
        with open(log, "w") as f:
            f.write(line * (100 * 2**20 // len(line)) + tail)
        out = []
        for _ in range(repeat):
            started = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "harness", "explain", str(log)], cwd=ROOT, check=True, capture_output=True
            )
            out.append(time.perf_counter() - started)
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = p.parse_args()
    base = known_issues.KnownIssues.load(ROOT / "matrix")
    gpu_db = gpus.GpuDb.load(ROOT / "matrix")
    accepts, unused = acceptances()
    if unused:
        print(f"note: {unused}", file=sys.stderr)
    rows = [dict(score(rec, base, gpu_db, accepts), part=part) for part, rec in reports()]
    right = sum(r["right"] for r in rows)
    by_label = sum(r["right_by_label"] for r in rows)
    no_answer = sum(r["no_answer"] for r in rows)
    seconds = timing()
    held = held_out(LATEST_DRAW["drawn_on"])
    result = {
        "reports": len(rows),
        "right": right,
        "share_right": round(right / len(rows), 3) if rows else None,
        "right_by_label": by_label,
        "judged": unused is None,
        "no_answer": no_answer,
        "entries": len(base.issues),
        "figures": figures(rows),
        "latest_draw": {
            **LATEST_DRAW,
            "held_out": held,
            **figures([r for r in rows if r["part"] in LATEST_DRAW["parts"]]),
        },
        "figures_by_part": {p: figures([r for r in rows if r["part"] == p]) for p in sorted({r["part"] for r in rows})},
        "explain_100mb_s": [round(s, 2) for s in seconds],
        "explain_100mb_median_s": round(statistics.median(seconds), 2),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "explain_accuracy.json").write_text(json.dumps(result, indent=1) + "\n")
    lines = [
        f"# compat explain on {len(rows)} public reports ({len(base.issues)} known issues)",
        "",
        "Partly a development set now: which reports informed changes, and the held-out figures measured before "
        "them, are in bench/explain-accuracy/README.md.",
        "",
        f"Top answer right: {right} of {len(rows)} ({100 * right / max(1, len(rows)):.0f}%)"
        + (" (family answers as judged)" if unused is None else f" ({unused})")
        + f". No answer at all: {no_answer}.",
        f"By the first pass's looser rule (family answer = the label's family): {by_label} of {len(rows)} "
        f"({100 * by_label / max(1, len(rows)):.0f}%).",
        f"explain on a 100 MB log: median {statistics.median(seconds):.2f} s "
        f"({', '.join(f'{s:.2f}' for s in seconds)}).",
        "",
        "Issue 44's figures: precision (a named known issue is the cause), misleading (a family answer that "
        "points the wrong way, of all reports), right (the top answer names the cause and fix direction), and "
        "the kinds of top answer:",
        "",
        draw_line(rows, LATEST_DRAW, held),
        "",
        *_figure_lines(rows),
        "",
        "| right | kind | part | report | label | top match | family |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {'yes' if r['right'] else 'no'} | {r['kind']} | {r['part']} | {r['url']} | "
        f"{r['expected_entry'] or r['label_family']} | {r['top_match'] or '—'} | {r['family']} |"
        for r in rows
    ]
    (args.out / "explain_accuracy.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[: lines.index("| right | kind | part | report | label | top match | family |")]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
