"""`compat explain`: a log or traceback matched against the known issues."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from harness import tomldata
from harness.catalog import known_issues
from harness.commands import HELP
from harness.commands.common import find_home, show
from harness.errors import UsageError

NAME = "explain"


def add(sub) -> None:
    p = sub.add_parser(NAME, help=HELP[NAME])
    p.add_argument("log", nargs="?", default="-", metavar="LOGFILE", help="a log file, or - for stdin (default)")
    p.add_argument(
        "--env",
        metavar="FILE",
        help="a report of the environment beside the log (pip freeze, "
        "`transformers-cli env`, `accelerate env`, `ds_report`, `python -m torch.utils.collect_env`, "
        "nvidia-smi): its versions and GPUs rank the matches",
    )
    p.add_argument("--format", choices=("text", "json"), default="text")


def _read(path_text: str, what: str) -> tuple[str, str]:
    if path_text == "-":
        if sys.stdin.isatty():  # a person at a terminal, not a pipe: say what is being waited for
            print("compat explain: paste the log, then Ctrl-D (or: compat explain LOGFILE)", file=sys.stderr)
        return known_issues.read_log(sys.stdin.buffer), "stdin"
    path = Path(path_text)
    try:
        # a device (/dev/zero, /dev/urandom) is never read for ever, a FIFO never waited on: a pipe is "-"
        with tomldata.open_regular(path) as f:
            return known_issues.read_log(f), str(path)
    except tomldata.NotAFile as exc:
        raise UsageError(f"{what}{path}: {exc}: save the log to a file, or pipe it in as -") from None
    except IsADirectoryError:
        raise UsageError(f"{what}{path}: is a folder, not a {'log ' if not what else ''}file") from None
    except OSError as exc:
        raise UsageError(f"{what}{path}: cannot be read: {exc.strerror}") from None


NOT_TEXT = 0.3  # a log whose first and last 64 KiB are more than this share undecodable bytes or control characters
NON_TEXT = re.compile("[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f\ufffd]")


def _refuse_empty(text: str, name: str, what: str) -> str:
    if not text.strip():
        fill = "pipe the job's output in" if name == "stdin" else "save the job's output (stdout and stderr) to it"
        raise UsageError(f"{what}{name}: is empty: {fill}")
    return text


def _refuse_not_text(text: str, name: str, what: str) -> None:
    """A UsageError naming the log where its bytes are not text (an archive, an image, a binary saved under a .log
    name). Called where nothing in it was recognised: junk around a real error is still answered."""
    sample = text[: 64 * 1024] + text[-64 * 1024 :] if len(text) > 128 * 1024 else text
    bad = len(NON_TEXT.findall(sample))
    if bad > NOT_TEXT * len(sample):
        raise UsageError(
            f"{what}{name}: is not text ({100 * bad // len(sample)}% of the {len(sample)} characters read are "
            "undecodable bytes or control characters, and no error line was found): give the training job's log, "
            "not an archive, image or binary"
        )


def handle(args) -> int:
    from harness.answers import explain
    from harness.catalog import gpus

    matrix = find_home().matrix
    data = known_issues.KnownIssues.load(matrix)
    gpu_db = gpus.GpuDb.load(matrix) if (matrix / "gpus.toml").is_file() else None
    if args.log == "-" and args.env == "-":
        raise UsageError("--env -: the log already reads stdin; give the env report as a file")
    text, name = _read(args.log, "")
    text = known_issues.clean(_refuse_empty(text, name, ""))
    facts = explain.read(text, gpu_db)
    if args.env:
        env_text, env_name = _read(args.env, "--env ")
        env_text = known_issues.clean(_refuse_empty(env_text, env_name, "--env "))
        _refuse_not_text(env_text, env_name, "--env ")
        facts.merge(explain.read(env_text, gpu_db))
    matches = data.explain(text, facts.packages(), facts.cc, facts.axes())
    answer = explain.classify(text, facts)
    if not matches and answer.family == "no-error-line":
        _refuse_not_text(text, name, "")
    also = data.set_to_fail(text, facts.packages(), facts.cc, facts.axes(), {m.issue.id for m in matches if m.answers})
    signature = known_issues.error_signature(text)
    if args.format == "json":
        near = [] if any(m.answers for m in matches) else _near(data, answer, facts, matches)
        print(json.dumps(_as_json(name, signature, facts, answer, matches, also, near), indent=1))
        return 0
    for line in facts.describe():  # here and below, text of the user's log: show() (common.terminal_text)
        show(line)
    if not matches:
        _family(name, answer, signature, data, facts)
    else:
        _matches(name, matches, answer, data, facts)
    _settings(also)
    return 0


def _as_json(name: str, signature: str, facts, answer, matches: list, also: list, near: list) -> dict:
    """compat explain --format json."""
    return {
        "log": name,
        "signature": signature,
        "facts": {
            "versions": facts.versions,
            "gpus": facts.gpus,
            "cc": facts.cc,
            "package": facts.package,
            "remote_model": facts.remote_model,
            "project_file": facts.project_file,
            "strategy": facts.strategy,
        },
        # how sure: a known issue whose conditions the log meets, a family compat recognises, or a guess
        "confidence": confidence(answer, matches),
        "family": {
            "name": answer.family,
            "matched": answer.matched,
            # a guess names no cause: what the log shows instead
            "cause": answer.cause if answer.confidence != "guess" else None,
            "shows": answer.cause if answer.confidence == "guess" else None,
            "next_step": answer.step,
        },
        "matches": [
            {
                "id": m.issue.id,
                "title": m.issue.title,
                "cause": m.issue.cause,
                "fix": list(m.issue.fix),
                "pins": {k: str(v) for k, v in m.issue.pins.items()},
                "sources": list(m.issue.sources),
                "reports": m.issue.reports,
                "found_by": m.issue.found_by or None,
                "matched": m.hits,
                "score": list(m.score),
                "conditions": m.verdict,
                # false: conditions unshown or contradicted; the family answer comes first
                "answers": m.answers,
            }
            for m in matches
        ],
        "settings": [{"id": i.id, "title": i.title, "set": setting, "fix": list(i.fix)} for i, setting in also],
        # the entries of the log's family whose conditions what it shows meets, where no match is confirmed
        "near": [i.id for i in near],
    }


CONFIDENCE = {
    "known-issue": "a known issue matches, and what the log shows meets its conditions",
    "family": "a failure family compat recognises, not a specific known issue",
    "guess": "a guess: no known issue or family compat knows fits; below is what the log shows and where to "
    "look, not a cause",
}


def confidence(answer, matches: list) -> str:
    """known-issue, family or guess: what explain's first answer rests on."""
    return "known-issue" if any(m.answers for m in matches) else answer.confidence


def _family_lines(answer) -> None:
    """The family answer's cause (what the log shows, for a guess) and next step."""
    show(f"   {'cause:  ' if answer.confidence != 'guess' else 'shows:  '} {answer.cause}")
    show(f"   next:    {answer.step}")


def _settings(also: list) -> None:
    """The options the log sets that fail under what it shows."""
    if not also:
        return
    show("The log also sets options that fail under what it shows (whether or not it reached that error):\n")
    for i, setting in also:
        show(f"- {i.id}: {i.title}")
        show(f"   set:     {setting[:200]}")
        show(f"   when:    {i.conditions_text()}: hold for what the log shows")
        show(f"   fix:     {i.fix[0]}\n")


def _matches(name: str, matches: list, answer, data, facts) -> None:
    """The matched entries, best first; where none is confirmed by what the log shows, the
    family-level answer before them."""
    if not any(m.answers for m in matches):
        # every match needs a condition the log does not show, or the log contradicts one: the
        # family-level answer comes first, the matches after it
        show(
            f"{len(matches)} known issue{'s' if len(matches) != 1 else ''} match the wording of {name}, but what "
            "the log shows does not confirm their conditions, so first the family-level answer "
            f"(not a matched known issue): {answer.family}"
        )
        show(f"Confidence: {CONFIDENCE[answer.confidence]}.")
        _family_lines(answer)
        show()
        near = _near(data, answer, facts, matches)
        if near:
            show("Known issues of this family whose conditions what the log shows meets, most likely first:\n")
            for i in near[:5]:
                show(f"- {i.id}: {i.title}")
                show(f"   when:    {i.conditions_text()}: hold for what the log shows")
                show(f"   fix:     {i.fix[0]}\n")
        show("Known issues whose wording matches, if their conditions are yours:\n")
    else:
        show(f"{len(matches)} known issue{'s' if len(matches) != 1 else ''} match {name}, best first:")
        show(f"Confidence: {CONFIDENCE['known-issue']}.\n")
    for n, m in enumerate(matches, 1):
        i = m.issue
        show(f"{n}. {i.id}: {i.title}")
        show(f"   matched: {m.hits[0].strip()[:200]}")
        if m.verdict in ("hold", "contradicted"):
            said = "hold for what the log shows" if m.verdict == "hold" else "do NOT hold for what the log shows"
            show(f"   when:    {i.conditions_text()}: {said}")
        elif m.verdict == "unshown":
            show(
                f"   when:    {i.conditions_text()}: the log does not show the {' or '.join(i.shown)}; this "
                "applies only if it is so"
            )
        show(f"   cause:   {i.cause}")
        for k, f in enumerate(i.fix):
            show(f"   {'fix:     ' if k == 0 else '         '}{f}")
        if i.pins:
            show(f"   pins:    {', '.join(f'{k}{v}' for k, v in i.pins.items())}")
        for k, url in enumerate(i.sources[:4]):
            show(f"   {'sources: ' if k == 0 else '         '}{url}")
        if i.found_by:
            show(f"   found:   by compat, no public report yet: {i.found_by}")
        show()


def _family(name: str, answer, signature: str, data, facts) -> None:
    """No entry matched: the family-level answer, and the entries of that family whose
    conditions the log's versions meet."""

    show(f"No known issue matches {name}.")
    show(f"Its error signature: {signature or '(no error line found)'}")
    show(f"Confidence: {CONFIDENCE[answer.confidence]}.\n")
    if answer.confidence == "guess":
        show(f"No family compat knows fits either; what the log shows ({answer.family}):")
    else:
        show(f"A family-level answer, not a matched known issue: {answer.family}")
    if answer.matched:
        show(f"   matched: {answer.matched}")
    _family_lines(answer)
    near = _near(data, answer, facts)
    if near:
        show("   known issues of this family whose conditions what the log shows meets:")
        for i in near[:5]:
            show(f"     {i.id}: {i.title}")


def _near(data, answer, facts, matches=()) -> list:
    """The known issues of the log's family (their own example is of it) whose conditions what the
    log shows meets, by the versions or the card it names (a P100's compute capability 6.0 meets
    the Pascal entry's cc < 7.0 where the log has only torch's bare "no kernel image" line)."""
    from harness.answers import explain

    packages = facts.packages()
    if not packages and not facts.cc:
        return []
    matched = {m.issue.id for m in matches}
    return [
        i
        for i in data.issues
        if i.id not in matched
        and any(k in packages or (k == "cc" and facts.cc) for k in i.when)
        and i.verdict(packages, facts.cc, facts.axes()) == "hold"
        and explain.classify(known_issues.clean(i.example), explain.Facts()).family == answer.family
    ]
