"""`compat explain`: a log or traceback matched against the known issues."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harness import known_issues
from harness.commands.common import find_home
from harness.errors import UsageError

NAME = "explain"


def add(sub) -> None:
    p = sub.add_parser("explain", help="match a log or traceback against the known issues")
    p.add_argument("log", nargs="?", default="-", metavar="LOGFILE", help="a log file, or - for stdin (default)")
    p.add_argument("--format", choices=("text", "json"), default="text")


def handle(args) -> int:
    data = known_issues.KnownIssues.load(find_home().matrix)
    if args.log == "-":
        text = known_issues.read_log(sys.stdin.buffer)
        name = "stdin"
    else:
        path = Path(args.log)
        try:
            with open(path, "rb") as f:
                text = known_issues.read_log(f)
        except IsADirectoryError:
            raise UsageError(f"{path}: is a folder, not a log file") from None
        except OSError as exc:
            raise UsageError(f"{path}: cannot be read: {exc.strerror}") from None
        name = str(path)
    matches = data.explain(text)
    signature = known_issues.error_signature(text)
    if args.format == "json":
        print(json.dumps({
            "log": name,
            "signature": signature,
            "matches": [{
                "id": m.issue.id, "title": m.issue.title, "cause": m.issue.cause, "fix": list(m.issue.fix),
                "pins": {k: str(v) for k, v in m.issue.pins.items()}, "sources": list(m.issue.sources),
                "matched": m.hits, "score": list(m.score),
            } for m in matches],
        }, indent=1))
        return 0
    if not matches:
        print(f"No known issue matches {name}.\nIts error signature: {signature or '(no error line found)'}")
        return 0
    print(f"{len(matches)} known issue{'s' if len(matches) != 1 else ''} match {name}, best first:\n")
    for n, m in enumerate(matches, 1):
        i = m.issue
        print(f"{n}. {i.id}: {i.title}")
        print(f"   matched: {m.hits[0].strip()[:200]}")
        print(f"   cause:   {i.cause}")
        for k, f in enumerate(i.fix):
            print(f"   {'fix:     ' if k == 0 else '         '}{f}")
        if i.pins:
            print(f"   pins:    {', '.join(f'{k}{v}' for k, v in i.pins.items())}")
        for k, url in enumerate(i.sources[:4]):
            print(f"   {'sources: ' if k == 0 else '         '}{url}")
        print()
    return 0
