"""`compat bisect`: which release of a package broke a cell, by running it at each probe."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import sys

from harness.commands import common
from harness.commands.common import find_home, known_issues_base, writable
from harness.errors import NoHardwareError, UsageError

NAME = "bisect"
MAX_PROBES = 16


def add(sub) -> None:
    p = sub.add_parser("bisect", help="find the first release of a package that breaks a cell, running the cell at each probe",
                       description="List NAME's releases between a good and a bad version and binary-search them, running CELL "
                       "for real with NAME pinned at each probe and every other pin from the base stack, until the first "
                       "bad release is named. Every probe is a record (tagged with the bisection) in results/bisect/.")
    p.add_argument("cell", type=common.text_value, metavar="CELL", help="the cell, by id (compat list shows them): cpu-hf2026-fp32-nf4-qlora-single")
    p.add_argument("--package", required=True, type=common.text_value, metavar="NAME", help="the package whose releases are searched")
    p.add_argument("--good", type=common.text_value, metavar="V1", help="a release the cell passes with (default: found by stepping back from the bad one)")
    p.add_argument("--bad", type=common.text_value, metavar="V2", help="a release the cell fails with (default: the newest release)")
    p.add_argument("--stack", type=common.text_value, metavar="BASE", help="the stack whose other pins every probe keeps (default: the cell's)")
    p.add_argument("--find-links", action="append", type=common.path_value, default=[], metavar="DIR", help="a folder of wheels: its releases are probed too; repeatable")
    p.add_argument("--offline", action="store_true", help="only the --find-links folders: no package index, to list or to install")
    p.add_argument("--index-url", type=common.text_value, default=None, metavar="URL", help="the package index to list releases from (default: https://pypi.org/simple)")
    p.add_argument("--pre", action="store_true", help="probe pre-releases too")
    p.add_argument("--max-probes", type=common.count, default=MAX_PROBES, metavar="N", help=f"stop after N probes (default {MAX_PROBES})")
    p.add_argument("--timeout", type=common.positive, metavar="S", help="per-probe time limit in seconds (default: the matrix's timeout_s)")
    p.add_argument("--results", type=common.path_value, help="where the probes' records go (default: results/bisect/, apart from the published table)")
    p.add_argument("--env-dir", type=common.path_value, help="where stack environments live (default: $COMPAT_ENV_DIR or ~/.cache/compat/envs)")


def handle(args) -> int:
    from harness import bisect, hardware
    from harness.cell import Cell
    from harness.matrix import MatrixData

    where = find_home()
    data = MatrixData.load(where.matrix)
    cell = Cell.parse(args.cell)
    base = data.stacks.get(args.stack or cell.stack)
    if base is None:
        raise UsageError(f"--stack: unknown stack {args.stack or cell.stack!r}; matrix/stacks.toml has {', '.join(data.stacks)}")
    if base.current:
        raise UsageError(f"stack {base.name!r} runs the interpreter as it is (provider = \"current\"): a bisection pins "
                         "the package in an env of its own; give --stack a stack of matrix/stacks.toml that has one")
    if args.offline and not args.find_links:
        raise UsageError("--offline needs at least one --find-links folder of wheels to list and install releases from")
    cell = dataclasses.replace(cell, stack=base.name)
    host = hardware.detect()
    from harness import runner

    (planned,) = runner.plan([cell], host)
    if not planned.here:
        raise NoHardwareError(f"{cell.id} does not run on this host: {planned.reason or 'its hardware is not here'}")
    found = bisect.releases(args.package, list(args.find_links), args.offline, args.pre, args.index_url or bisect.INDEX)
    versions = found.versions
    bad = args.bad or (versions[-1] if versions else None)
    for flag, v in (("--bad", bad), ("--good", args.good)):
        if v is not None and v not in versions:
            raise UsageError(f"{flag} {v}: not a release of {args.package} that can be probed here (known: "
                             f"{_span(versions)}; from {', '.join(found.sources) or 'nowhere'})"
                             + "".join(f"; {p}" for p in found.problems))
    if bad is None:
        raise UsageError(f"no release of {args.package} found ({', '.join(found.problems) or 'none in ' + ', '.join(found.sources)})")
    if args.good is not None and versions.index(args.good) >= versions.index(bad):
        raise UsageError(f"--good {args.good} is not older than --bad {bad}")
    run = Bisection(args, data, host, cell, base, versions, where)
    for problem in found.problems:
        print(f"note: {problem}")
    note = bisect.companion_note(args.package, base.pins())
    if note:
        print(f"note: {note}")
    return run.search(bad, args.good, note, found)


def _span(versions: list[str]) -> str:
    return f"{len(versions)} releases, {versions[0]} to {versions[-1]}" if versions else "none"


class Bisection:
    """One bisection: its probes, each a real run of the cell with the package at one release."""

    def __init__(self, args, data, host, cell, base, versions, where):
        from harness import bisect, envs

        self.args, self.data, self.host, self.cell, self.base, self.versions = args, data, host, cell, base, versions
        self.id = bisect.bisect_id(dt.datetime.now(dt.timezone.utc))
        self.results = writable(args.results or where.results / "bisect", "--results")
        self.issues = known_issues_base(data.dir)
        self.envs = envs.EnvManager(root=args.env_dir or envs.default_root(), base_python=sys.executable, offline=args.offline,
                                    find_links=tuple(str(f) for f in args.find_links), log=lambda line: print(line, flush=True))
        self.verdicts: dict[int, str] = {}
        self.probes: list = []
        self.bad_record: dict | None = None

    def probe(self, version: str) -> dict:
        """The cell run with the package at `version`; its record, appended to the results."""
        from packaging.utils import canonicalize_name

        from harness import runner

        name, pin = canonicalize_name(self.args.package), f"=={version}"
        # in its place among the stack's pins: the stack's own env is the probe of its own version
        packages = tuple((n, pin if canonicalize_name(n) == name else s) for n, s in self.base.packages)
        if not any(canonicalize_name(n) == name for n, _ in packages):
            packages += ((self.args.package, pin),)
        stack = dataclasses.replace(self.base, canary=False, packages=packages)
        ctx = runner.RunContext(
            results_dir=self.results, records_path=self.results / "records.jsonl", settings=self.data.defaults,
            models=self.data.models, host=self.host, stacks={**self.data.stacks, stack.name: stack}, matrix_dir=self.data.dir,
            known_issues=self.issues, envs=self.envs, timeout_s=self.args.timeout,
        )
        tag = {"bisect": {"id": self.id, "package": self.args.package, "version": version, "base_stack": self.base.name}}
        print(f"probe {len(self.probes) + 1}: {self.args.package}=={version}", flush=True)
        (rec,) = runner.run_all(runner.plan([self.cell], self.host), ctx, overrides={self.cell.id: runner.Override(record_extra=tag)})
        return rec

    def judged(self, version: str) -> str:
        """Probe `version`, judge it against the bad end, keep it; its verdict."""
        from harness import bisect

        rec = self.probe(version)
        verdict, why = bisect.judge(rec, self.bad_record)
        if self.bad_record is None and verdict == bisect.BAD:
            self.bad_record = rec
        self.verdicts[self.versions.index(version)] = verdict
        self.probes.append(bisect.Probe(version, rec["outcome"], bisect.signature_of(rec), verdict, rec["id"], why))
        print(f"  {version}: {rec['outcome']}{' ' + bisect.signature_of(rec) if bisect.signature_of(rec) else ''} -> {verdict}"
              + (f" ({why})" if why else ""), flush=True)
        return verdict

    def search(self, bad: str, good: str | None, note: str, found) -> int:
        from harness import bisect

        if self.judged(bad) != bisect.BAD:
            return self.finish(None, f"{self.cell.id} passes with {self.args.package} {bad}: nothing to bisect", note, found)
        if good is not None and self.judged(good) != bisect.GOOD:
            return self.finish(None, f"{self.cell.id} does not pass with --good {self.args.package} {good} "
                                     f"({self.probes[-1].outcome}): give a release it passes with", note, found)
        while len(self.probes) < self.args.max_probes:
            i = bisect.next_probe(len(self.versions), self.verdicts)
            if i is None:
                break
            self.judged(self.versions[i])
        else:
            if bisect.next_probe(len(self.versions), self.verdicts) is not None:
                return self.finish(None, f"stopped after --max-probes {self.args.max_probes} probes", note, found)
        found_edge = bisect.boundary(self.versions, self.verdicts)
        if found_edge.last_good is None:
            return self.finish(found_edge, f"no release back to {self.versions[0]} passes: the first bad release is "
                                           f"{self.versions[0]} or older than the releases known here", note, found)
        return self.finish(found_edge, "", note, found)

    def finish(self, edge, problem: str, note: str, found) -> int:
        """Print the report, write it beside the records; exit code 0 when a boundary was found."""
        from harness import bisect

        lines = [f"compat bisect {self.id}: {self.cell.id}, {self.args.package} (base stack {self.base.name}; {_span(self.versions)} "
                 f"known); {len(self.probes)} probes"]
        for p in sorted(self.probes, key=lambda p: self.versions.index(p.version)):
            lines.append(f"  {p.version:>12}  {p.verdict:<4}  {p.outcome}{'  ' + p.signature if p.signature else ''}  record {p.record}")
        if edge is not None and edge.last_good is not None:
            if edge.exact:
                lines.append(f"first bad release: {self.args.package} {edge.first_bad} (last good: {edge.last_good})")
            else:
                lines.append(f"first bad release: one of {', '.join(edge.could_be)} (last good: {edge.last_good}; "
                             "the others were skipped)")
        if problem:
            lines.append(problem)
        if self.bad_record is not None:
            bad_sig = bisect.signature_of(self.bad_record) or self.bad_record["outcome"]
            lines.append(f"the bad side: {bad_sig}")
            issues = self.bad_record.get("known_issues") or []
            lines.append("known issues it matches: " + (", ".join(map(str, issues)) or "none in matrix/known_issues.toml"))
        lines += [f"note: {n}" for n in [*found.problems, note] if n]
        text = "\n".join(lines) + "\n"
        print(text, end="")
        report = {"id": self.id, "cell": self.cell.id, "package": self.args.package, "base_stack": self.base.name,
                  "releases": self.versions, "sources": found.sources, "probes": [dataclasses.asdict(p) for p in self.probes],
                  "boundary": dataclasses.asdict(edge) if edge else None, "problem": problem or None,
                  "notes": [n for n in [*found.problems, note] if n]}
        from harness import records

        records.write_atomic(self.results / f"{self.id}.json", json.dumps(report, indent=1) + "\n")
        print(f"report: {self.results / f'{self.id}.json'}; records: {self.results / 'records.jsonl'}")
        return 0 if edge is not None and edge.last_good is not None else 1
