"""The steps of a draw of the explain accuracy set (issue 44), as the HOW-issue44-*.md briefs describe them: check
the helpers' parts against what the set must exclude, add them to the set, split the set for blind readers, and
merge the readers' judgements into judged.json.

    python bench/explain_draw.py check PART... [--drafts DIR]
    python bench/explain_draw.py add PART... [--drafts DIR] [--drop URL ...]
    python bench/explain_draw.py split OUTDIR --readers N [--parts PART ...] [--seed S]
    python bench/explain_draw.py merge OUTDIR

check: each kept report of the parts (DIR/PART.jsonl, default /work/kb-drafts/accuracy) against every thread the set
excludes (bench/explain-threads/, the set's own parts and threads lists, the base's citations, the writers' lists in
DIR/../issue44*/), against the other parts (their reports and their threads lists), and for a log of fewer than 3
non-blank lines and missing fields; exit 1 where any report is flagged (drop it with add --drop). add: the kept
reports and the threads lists into bench/explain-accuracy/. split: the reports (url, log, cause, fix_direction only)
shuffled into N files for N readers, with JUDGE.md and the family texts (judged-families.md as
bench/explain_accuracy.py writes them); with --parts, the earlier judgements that still hold (the family texts
unchanged since judged.json) as OUTDIR/earlier-judged.json. merge: OUTDIR/*-judged.json into judged.json, once every
report of the set has exactly one judgement naming only families of those texts; else exit 1 and nothing is written.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import explain_accuracy  # noqa: E402

SET = explain_accuracy.SET
DRAFTS = Path("/work/kb-drafts/accuracy")
FIELDS = ("url", "project", "log", "cause", "fix_direction", "family", "expected_entry")
URL = re.compile(r"https?://(?:www\.)?github\.com/[^\s)\"'<>\]]+")
SHOWN = ("url", "log", "cause", "fix_direction")  # what a reader is given of a report


def norm(url: str) -> str:
    """A thread's URL as the exclusion compares it: no fragment, no trailing slash or punctuation, lower case."""
    url = url.strip().split("#")[0].rstrip("/").rstrip(").,;")
    return url.replace("http://", "https://").replace("://www.github.com", "://github.com").lower()


def excluded(drafts: Path, parts: list[str]) -> set[str]:
    """Every thread the set excludes: read while writing the base or the rules, cited by the base, already looked at
    by an earlier part (its threads list or its reports); the parts being checked are not in it."""
    files = [*(ROOT / "bench" / "explain-threads").glob("*.txt"), ROOT / "matrix" / "known_issues.toml"]
    files += [f for f in SET.glob("*") if f.suffix == ".jsonl" or f.name.endswith("-threads.txt")]
    files += list(drafts.parent.glob("issue44*/*-threads.txt"))
    files = [f for f in files if f.name.split(".")[0].removesuffix("-threads") not in parts or f.parent != SET]
    return {norm(u) for f in files for u in URL.findall(f.read_text(encoding="utf-8", errors="replace"))}


def looked_at(drafts: Path, parts: list[str]) -> dict[str, set[str]]:
    """{thread: the parts of this draw whose threads lists have it} (a part that is missing lists nothing)."""
    found: dict[str, set[str]] = {}
    for part in parts:
        listed = drafts / f"{part}-threads.txt"
        text = listed.read_text(encoding="utf-8", errors="replace") if listed.is_file() else ""
        for url in URL.findall(text):
            found.setdefault(norm(url), set()).add(part)
    return found


def check(drafts: Path, parts: list[str]) -> list[str]:
    """A line per flagged report: PART:LINE URL and why."""
    out, seen, ex, listed = [], {}, excluded(drafts, parts), looked_at(drafts, parts)
    for part in parts:
        for n, line in enumerate((drafts / f"{part}.jsonl").read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                out.append(f"{part}:{n} not JSON: {exc.msg}")
                continue
            why = [f"no {k}" for k in FIELDS if k not in rec]
            url = norm(rec.get("url", ""))
            why += ["excluded (an earlier list or the base has it)"] if url in ex else []
            why += [f"also in part {seen[url]}"] if url in seen else []
            others = sorted(listed.get(url, set()) - {part})
            why += (
                [f"looked at by part {', '.join(others)} too (each part leaves a thread another has listed)"]
                if others
                else []
            )
            seen.setdefault(url, part)
            lines = sum(1 for x in str(rec.get("log", "")).splitlines() if x.strip())
            why += [f"a log of {lines} non-blank line(s)"] if lines < 3 else []
            if why:
                out.append(f"{part}:{n} {rec.get('url', '?')}: " + "; ".join(why))
    return out


def add(drafts: Path, parts: list[str], drop: set[str]) -> dict[str, int]:
    """Copy each part's reports (less the dropped) and its threads list into the set; {part: reports kept}."""
    kept = {}
    for part in parts:
        lines = [x for x in (drafts / f"{part}.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]
        lines = [x for x in lines if norm(json.loads(x)["url"]) not in drop]
        (SET / f"{part}.jsonl").write_text("".join(x + "\n" for x in lines), encoding="utf-8")
        shutil.copyfile(drafts / f"{part}-threads.txt", SET / f"{part}-threads.txt")
        kept[part] = len(lines)
    return kept


def reports(parts: list[str] | None = None) -> list[dict]:
    return [rec for _, rec in explain_accuracy.reports(parts)]


def keep_earlier(out: Path, parts: list[str]) -> int:
    """Where the family texts have not changed since judged.json was written, its judgements of the reports outside
    PARTS go into OUTDIR/earlier-judged.json, for merge to keep; how many (0 where the texts changed)."""
    if not explain_accuracy.JUDGED.exists() or not explain_accuracy.JUDGED_FAMILIES.exists():
        return 0
    if explain_accuracy.JUDGED_FAMILIES.read_text(encoding="utf-8") != explain_accuracy.family_texts():
        return 0
    new = {r["url"] for r in reports(parts)}
    judged = json.loads(explain_accuracy.JUDGED.read_text(encoding="utf-8"))
    earlier = {u: v for u, v in judged.items() if u not in new}
    (out / "earlier-judged.json").write_text(json.dumps(earlier, indent=1, ensure_ascii=False), encoding="utf-8")
    return len(earlier)


def split(out: Path, readers: int, parts: list[str] | None, seed: int) -> list[int]:
    """N reader files of the reports, what a reader sees of each, with the brief and the family texts beside them;
    with PARTS, the earlier judgements that still hold beside them too (keep_earlier)."""
    out.mkdir(parents=True, exist_ok=True)
    shown = [{k: r[k] for k in SHOWN} for r in reports(parts)]
    random.Random(seed).shuffle(shown)
    if parts:
        print("earlier judgements kept:", keep_earlier(out, parts))
    (out / "judged-families.md").write_text(explain_accuracy.family_texts(), encoding="utf-8")
    shutil.copyfile(SET / "JUDGE.md", out / "JUDGE.md")
    sizes = []
    for i in range(readers):
        some = shown[i::readers]
        (out / f"p{i + 1}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in some))
        sizes.append(len(some))
    return sizes


def merge(out: Path) -> list[str]:
    """Write judged.json from OUTDIR's judgements and the texts they were made on; the problems, where there are
    any (then nothing is written)."""
    texts = (out / "judged-families.md").read_text(encoding="utf-8")
    families = set(re.findall(r"(?m)^## (\S+)$", texts))
    judged, problems = {}, []
    for f in sorted(out.glob("*-judged.json")):
        for url, v in json.loads(f.read_text(encoding="utf-8")).items():
            if url in judged:
                problems.append(f"{url}: judged twice ({f.name})")
            unknown = [a for a in v.get("accepts", []) if a not in families]
            if unknown:
                problems.append(f"{url}: {', '.join(unknown)} not among the families judged ({f.name})")
            judged[url] = v
    urls = [r["url"] for r in reports()]
    in_set = set(urls)
    problems += [f"{u}: no judgement" for u in urls if u not in judged]
    problems += [f"{u}: judged but not in the set" for u in judged if u not in in_set]
    if texts != explain_accuracy.family_texts():
        problems.append("the family texts judged are not explain's texts now (judge again on the current texts)")
    if not problems:
        explain_accuracy.JUDGED.write_text(json.dumps({u: judged[u] for u in urls}, indent=1, ensure_ascii=False))
        explain_accuracy.JUDGED_FAMILIES.write_text(texts, encoding="utf-8")
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="step", required=True)
    for name in ("check", "add"):
        s = sub.add_parser(name)
        s.add_argument("parts", nargs="+")
        s.add_argument("--drafts", type=Path, default=DRAFTS)
        if name == "add":
            s.add_argument("--drop", nargs="*", default=[])
    s = sub.add_parser("split")
    s.add_argument("out", type=Path)
    s.add_argument("--readers", type=int, required=True)
    s.add_argument("--parts", nargs="*")
    s.add_argument("--seed", type=int, default=44)
    sub.add_parser("merge").add_argument("out", type=Path)
    args = p.parse_args(argv)
    if args.step == "check":
        flagged = check(args.drafts, args.parts)
        print("\n".join(flagged) or "no report flagged")
        return 1 if flagged else 0
    if args.step == "add":
        print(add(args.drafts, args.parts, {norm(u) for u in args.drop}))
    elif args.step == "split":
        print("reader files:", split(args.out, args.readers, args.parts, args.seed))
    else:
        problems = merge(args.out)
        print("\n".join(problems) or f"judged.json written ({len(reports())} reports)")
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
