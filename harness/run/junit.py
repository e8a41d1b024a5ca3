"""JUnit XML for `compat run --junit FILE`: one test case per cell, so a CI dashboard shows cells.

pass            a passing test case
unsupported     <skipped> with the reason (this runner lacks what the cell needs)
infra           <error>: compat itself broke
anything else   <failure> with the error signature and the log excerpt (the stack said no)
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

_CONTROL = {c: None for c in range(32) if c not in (9, 10, 13)}


def _text(value) -> str:
    """XML 1.0 cannot hold most control characters, which logs do contain: drop them."""
    return str(value or "").translate(_CONTROL)


def write(path: Path, records: list[dict], name: str) -> None:
    failures = sum(r["outcome"] not in ("pass", "unsupported", "infra") for r in records)
    errors = sum(r["outcome"] == "infra" for r in records)
    skipped = sum(r["outcome"] == "unsupported" for r in records)
    total_time = sum(float(r.get("duration_s") or 0) for r in records)
    suite = ET.Element(
        "testsuite",
        name=_text(name),
        tests=str(len(records)),
        failures=str(failures),
        errors=str(errors),
        skipped=str(skipped),
        time=f"{total_time:.3f}",
    )
    for r in records:
        axes = r.get("axes") or {}
        case = ET.SubElement(
            suite,
            "testcase",
            classname=_text(f"compat.{axes.get('hardware', '?')}.{axes.get('stack', '?')}"),
            name=_text(r["cell"]),
            time=f"{float(r.get('duration_s') or 0):.3f}",
        )
        err = r.get("error") or {}
        message = err.get("signature") or r.get("reason") or r["outcome"]
        if r.get("known_issues"):
            message += f" (known issue: {', '.join(r['known_issues'])})"
        if r["outcome"] == "unsupported":
            ET.SubElement(case, "skipped", message=_text(message))
        elif r["outcome"] == "infra":
            ET.SubElement(case, "error", message=_text(message), type="infra").text = _text(err.get("excerpt"))
        elif r["outcome"] != "pass":
            ET.SubElement(case, "failure", message=_text(message), type=_text(r["outcome"])).text = _text(
                err.get("excerpt")
            )
        ET.SubElement(case, "system-out").text = _text(f"record {r['id']}; log {r.get('log', '')}")
    tree = ET.ElementTree(ET.Element("testsuites"))
    tree.getroot().append(suite)
    ET.indent(tree)
    path.parent.mkdir(parents=True, exist_ok=True)
    tree.write(path, encoding="utf-8", xml_declaration=True)
