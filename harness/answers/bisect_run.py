"""compat bisect's probes: each a real run of a cell with one release of a package pinned in the
base stack's env, judged and searched by harness/answers/bisect.py; and the canary that bisects itself
(compat run --bisect-canary): a canary cell that fails where a control stack's same cell passes
is bisected against each package whose version differs."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import sys
from pathlib import Path

from harness.answers import bisect
from harness.catalog.cell import Cell
from harness.errors import NoHardwareError, UsageError
from harness.evidence import records


@dataclasses.dataclass(frozen=True)
class Options:
    package: str
    good: str | None = None
    bad: str | None = None
    max_probes: int = 16
    timeout: float | None = None
    offline: bool = False
    find_links: tuple[Path, ...] = ()
    env_dir: Path | None = None
    index: str = bisect.INDEX
    pre: bool = False
    settings: dict = dataclasses.field(default_factory=dict)  # --set: laid over matrix/defaults.toml's, for every probe
    paired: bool = False  # --paired: each probe also runs without `settings`; judged on the difference they make
    keep_companions: bool = False  # --keep-companions: the base stack's companion pins, not the "released with" rule


def _span(versions: list[str]) -> str:
    return f"{len(versions)} releases, {versions[0]} to {versions[-1]}" if versions else "none"


def start(options: Options, data, host, cell: Cell, base, results: Path, issues) -> tuple:
    """Check what a bisection needs before anything runs (a stack with an env of its own, the
    cell's hardware here, both ends among the releases); the Bisection, its bad and good ends,
    and the releases found. UsageError / NoHardwareError naming what is missing."""
    from harness.run import runner

    if base.current:
        raise UsageError(
            f'stack {base.name!r} runs the interpreter as it is (provider = "current"): a bisection pins '
            "the package in an env of its own; give --stack a stack of matrix/stacks.toml that has one"
        )
    if options.offline and not options.find_links:
        raise UsageError("--offline needs at least one --find-links folder of wheels to list and install releases from")
    if options.paired and not options.settings:
        raise UsageError("--paired judges the difference the --set settings make: give at least one --set KEY=VALUE")
    settings = laid_over(data.defaults, options.settings)
    cell = dataclasses.replace(cell, stack=base.name)
    (planned,) = runner.plan([cell], host)
    if not planned.here:
        raise NoHardwareError(f"{cell.id} does not run on this host: {planned.reason or 'its hardware is not here'}")
    found = bisect.releases(options.package, list(options.find_links), options.offline, options.pre, options.index)
    versions = found.versions
    bad = options.bad or (versions[-1] if versions else None)
    for flag, v in (("--bad", bad), ("--good", options.good)):
        if v is not None and v not in versions:
            raise UsageError(
                f"{flag} {v}: not a release of {options.package} that can be probed here (known: "
                f"{_span(versions)}; from {', '.join(found.sources) or 'nowhere'})"
                + "".join(f"; {p}" for p in found.problems)
            )
    if bad is None:
        raise UsageError(
            f"no release of {options.package} found "
            f"({', '.join(found.problems) or 'none in ' + ', '.join(found.sources)})"
        )
    if options.good is not None and versions.index(options.good) >= versions.index(bad):
        raise UsageError(f"--good {options.good} is not older than --bad {bad}")
    companions = {}
    if not options.keep_companions and found.uploaded:
        for name in bisect.companions_held(options.package, base.pins()):
            listed = bisect.releases(name, list(options.find_links), options.offline, False, options.index)
            found.problems.extend(f"{name}: {p}" for p in listed.problems)
            if listed.uploaded:
                companions[name] = listed
    run = Bisection(options, data, host, cell, base, versions, results, issues, settings, companions, found.uploaded)
    return run, bad, options.good, found


def parse_set(items: list[str]) -> dict:
    """--set KEY=VALUE items ("train.load_in_kbit_kwarg=true") as a settings table; each value read
    as TOML (true, 16, 1e-4, "text"), else as text. UsageError naming a malformed item."""
    import tomllib

    out: dict = {}
    for item in items:
        key, eq, value = item.partition("=")
        parts = [p.strip() for p in key.split(".")]
        if not eq or not all(parts):
            raise UsageError(
                f"--set {item!r}: give KEY=VALUE, the key as in matrix/defaults.toml (train.load_in_kbit_kwarg=true)"
            )
        try:
            parsed = tomllib.loads(f"v = {value.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            parsed = value.strip()
        except RecursionError:
            raise UsageError(f"--set {item[:80]!r}: its value is nested too deeply to be a setting") from None
        table = out
        for part in parts[:-1]:
            table = table.setdefault(part, {})
            if not isinstance(table, dict):
                raise UsageError(f"--set {item!r}: {part} is given a value and a table")
        table[parts[-1]] = parsed
    return out


def laid_over(defaults: dict, overrides: dict) -> dict:
    """matrix/defaults.toml's settings with --set's laid over them, each checked as a grid's
    [settings] are; UsageError naming every problem."""
    from harness.catalog.matrix import settings_over

    problems: list[str] = []
    settings = settings_over(
        defaults, overrides, "settings", lambda key, label, msg, table=None: f"--set {label}: {msg}", problems
    )
    if problems:
        raise UsageError("; ".join(problems))
    return settings


class Bisection:
    """One bisection: its probes, each a real run of the cell with the package at one release."""

    def __init__(
        self,
        args: Options,
        data,
        host,
        cell: Cell,
        base,
        versions: list[str],
        results: Path,
        issues,
        settings: dict | None = None,
        companions: dict | None = None,
        uploaded: dict | None = None,
    ):
        """`settings`: defaults.toml's with --set laid over them (default: defaults.toml's);
        `companions`: companion -> its bisect.Releases, where the "released with" rule picks its
        pins; `uploaded`: the package's release -> its upload time."""
        from harness.run import envs

        self.args, self.data, self.host, self.cell, self.base, self.versions = args, data, host, cell, base, versions
        self.id = bisect.bisect_id(dt.datetime.now(dt.timezone.utc))
        self.results, self.issues = results, issues
        self.envs = envs.EnvManager(
            root=args.env_dir or envs.default_root(),
            base_python=sys.executable,
            offline=args.offline,
            find_links=tuple(str(f) for f in args.find_links),
            log=lambda line: print(line, flush=True),
        )
        self.verdicts: dict[int, str] = {}
        self.probes: list = []
        self.bad_record: dict | None = None
        self.report: dict = {}  # the report finish() writes, with its path
        self.settings = data.defaults if settings is None else settings
        self.companions: dict = companions or {}
        self.uploaded: dict[str, str] = uploaded or {}

    def companion_note(self) -> str:
        return bisect.companion_note(self.args.package, self.base.pins(), rule=bool(self.companions))

    def pins_with(self, version: str) -> dict[str, str]:
        """Each companion's release for a probe of `version` (the "released with" rule); a companion
        it cannot date keeps the base stack's pin and is absent here."""
        picked = {
            name: bisect.released_with(self.uploaded.get(version), listed) for name, listed in self.companions.items()
        }
        return {name: v for name, v in picked.items() if v}

    def probe(self, version: str, plain: bool = False) -> dict:
        """The cell run with the package at `version` (and its companions as the rule picks them),
        with the --set settings or, `plain`, without them; its record, appended to the results."""
        from packaging.utils import canonicalize_name

        from harness.run import context, runner

        name, pin = canonicalize_name(self.args.package), f"=={version}"
        moved = {canonicalize_name(n): f"=={v}" for n, v in self.pins_with(version).items()} | {name: pin}
        # in its place among the stack's pins: the stack's own env is the probe of its own version
        packages = tuple((n, moved.get(canonicalize_name(n), s)) for n, s in self.base.packages)
        if not any(canonicalize_name(n) == name for n, _ in packages):
            packages += ((self.args.package, pin),)
        stack = dataclasses.replace(self.base, canary=False, packages=packages)
        ctx = context.RunContext(
            results_dir=self.results,
            records_path=self.results / "records.jsonl",
            settings=self.data.defaults if plain else self.settings,
            models=self.data.models,
            host=self.host,
            stacks={**self.data.stacks, stack.name: stack},
            matrix_dir=self.data.dir,
            known_issues=self.issues,
            envs=self.envs,
            timeout_s=self.args.timeout,
        )
        tag = {
            "id": self.id,
            "package": self.args.package,
            "version": version,
            "base_stack": self.base.name,
            "companions": self.pins_with(version),
        }
        if self.args.settings:
            tag["set"] = {} if plain else self.args.settings
        legs = f" ({'without' if plain else 'with'} the --set settings)" if self.args.paired else ""
        print(
            f"probe {len(self.probes) + 1}: {self.args.package}=={version}"
            + "".join(f", {n}=={v}" for n, v in tag["companions"].items())
            + legs,
            flush=True,
        )
        (rec,) = runner.run_all(
            runner.plan([self.cell], self.host),
            ctx,
            overrides={self.cell.id: context.Override(record_extra={"bisect": tag})},
        )
        return rec

    def judged(self, version: str) -> str:
        """Probe `version` (both ways with --paired), judge it against the bad end, keep it; its verdict."""
        rec = self.probe(version)
        plain = self.probe(version, plain=True) if self.args.paired else None
        verdict, why = bisect.judge(rec, self.bad_record) if plain is None else bisect.judge_paired(rec, plain)
        if self.bad_record is None and verdict == bisect.BAD:
            self.bad_record = rec
        self.verdicts[self.versions.index(version)] = verdict
        other = (
            None
            if plain is None
            else {"outcome": plain["outcome"], "signature": bisect.signature_of(plain), "record": plain["id"]}
        )
        self.probes.append(
            bisect.Probe(
                version,
                rec["outcome"],
                bisect.signature_of(rec),
                verdict,
                rec["id"],
                why,
                self.pins_with(version),
                other,
            )
        )
        print(
            f"  {version}: {rec['outcome']}{' ' + bisect.signature_of(rec) if bisect.signature_of(rec) else ''} -> "
            f"{verdict}" + (f" ({why})" if why else ""),
            flush=True,
        )
        return verdict

    def search(self, bad: str, good: str | None, note: str, found) -> int:
        if self.judged(bad) != bisect.BAD:
            last = self.probes[-1]
            return self.finish(
                None,
                f"{self.cell.id} is not bad with {self.args.package} {bad} ({last.why or last.outcome}): "
                "nothing to bisect",
                note,
                found,
            )
        if self.bad_record["outcome"] in ("install-error", "infra", "unsupported"):  # not the cell's own failure
            return self.finish(
                None,
                f"{self.cell.id} could not run with {self.args.package} {bad} ({self.bad_record['outcome']}): "
                "the bad end must be a release the cell runs with and fails",
                note,
                found,
            )
        if good is not None and self.judged(good) != bisect.GOOD:
            last = self.probes[-1]
            return self.finish(
                None,
                f"{self.cell.id} is not good with --good {self.args.package} {good} "
                f"({last.why or last.outcome}): give a release it "
                + ("runs the same way with and without the settings" if self.args.paired else "passes with"),
                note,
                found,
            )
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
            return self.finish(
                found_edge,
                f"no release back to {self.versions[0]} passes: the first bad release is "
                f"{self.versions[0]} or older than the releases known here",
                note,
                found,
            )
        return self.finish(found_edge, "", note, found)

    def _probe_lines(self) -> list[str]:
        """Each probe, in release order: its verdict, outcome, signature, record and companions."""
        lines = []
        for p in sorted(self.probes, key=lambda p: self.versions.index(p.version)):
            lines.append(
                f"  {p.version:>12}  {p.verdict:<4}  {p.outcome}{'  ' + p.signature if p.signature else ''}  "
                f"record {p.record}" + "".join(f"  {n} {v}" for n, v in p.companions.items())
            )
            if p.plain is not None:
                lines.append(
                    f"  {'':>12}  {'':<4}  without the settings: {p.plain['outcome']}"
                    f"{'  ' + p.plain['signature'] if p.plain['signature'] else ''}  record {p.plain['record']}"
                )
        return lines

    def _bad_side(self, edge) -> list[str]:
        """The bad end's error, the first bad release's where a paired bisection changed it, and the
        known issues it matches."""
        lines = []
        bad_sig = bisect.signature_of(self.bad_record) or self.bad_record["outcome"]
        lines.append(f"the bad side: {bad_sig}")
        first = next((p for p in self.probes if edge is not None and p.version == edge.first_bad), None)
        # a paired bisection's bad side may change its error
        if first is not None and (first.signature or first.outcome) != bad_sig:
            lines.append(f"at the first bad release: {first.signature or first.outcome}")
        issues = self.bad_record.get("known_issues") or []
        lines.append("known issues it matches: " + (", ".join(map(str, issues)) or "none in matrix/known_issues.toml"))
        return lines

    def finish(self, edge, problem: str, note: str, found) -> int:
        """Print the report, write it beside the records; exit code 0 when a boundary was found."""
        lines = [
            f"compat bisect {self.id}: {self.cell.id}, {self.args.package} (base stack {self.base.name}; "
            f"{_span(self.versions)} known); {len(self.probes)} probes"
        ]
        if self.args.settings:
            lines.append(
                f"settings laid over the defaults: {json.dumps(self.args.settings)}"
                + (
                    "; each probe also run without them, and judged on the difference (--paired)"
                    if self.args.paired
                    else ""
                )
            )
        lines += self._probe_lines()
        if edge is not None and edge.last_good is not None:
            if edge.exact:
                lines.append(f"first bad release: {self.args.package} {edge.first_bad} (last good: {edge.last_good})")
            else:
                lines.append(
                    f"first bad release: one of {', '.join(edge.could_be)} (last good: {edge.last_good}; "
                    "the others were skipped)"
                )
        if problem:
            lines.append(problem)
        if self.bad_record is not None:
            lines += self._bad_side(edge)
        lines += [f"note: {n}" for n in [*found.problems, note] if n]
        text = "\n".join(lines) + "\n"
        print(text, end="")
        report = {
            "id": self.id,
            "cell": self.cell.id,
            "package": self.args.package,
            "base_stack": self.base.name,
            "releases": self.versions,
            "sources": found.sources,
            "probes": [dataclasses.asdict(p) for p in self.probes],
            "boundary": dataclasses.asdict(edge) if edge else None,
            "problem": problem or None,
            "settings": self.args.settings,
            "paired": self.args.paired,
            "companion_rule": "released-with" if self.companions else None,
            "notes": [n for n in [*found.problems, note] if n],
        }
        self.report = dict(report, path=str(self.results / f"{self.id}.json"))  # what --format json prints
        records.write_atomic(self.results / f"{self.id}.json", json.dumps(report, indent=1) + "\n")
        print(f"report: {self.results / f'{self.id}.json'}; records: {self.results / 'records.jsonl'}")
        return 0 if edge is not None and edge.last_good is not None else 1


# -- the canary that bisects itself --------------------------------------------------------------

# what a canary cell may newly do; install-error and infra are not the stack's training
REGRESSIONS = ("fail", "crash", "oom", "timeout")


@dataclasses.dataclass(frozen=True)
class Pair:
    """A canary cell that failed beside a control stack's same cell that passed, and the packages
    whose versions differ between them: control's (good) and canary's (bad)."""

    canary: dict
    control: dict
    control_stack: str
    differ: dict[str, tuple[str, str]]


def _axes_but_stack(rec: dict) -> tuple:
    return tuple(sorted((k, str(v)) for k, v in (rec.get("axes") or {}).items() if k != "stack"))


def versions(rec: dict) -> dict[str, str]:
    """What a record ran with, by package: what its env had (the fingerprint), else what its
    stack resolved (a canary) or pinned exactly."""
    from packaging.utils import canonicalize_name

    stack = rec.get("stack") or {}
    out = {
        canonicalize_name(k): str(v)[2:] for k, v in (stack.get("requested") or {}).items() if str(v).startswith("==")
    }
    out.update({canonicalize_name(k): str(v) for k, v in (stack.get("resolved") or {}).items()})
    out.update({canonicalize_name(k): str(v) for k, v in records.packages(rec).items()})
    return out


def canary_pairs(recs: list[dict], stacks: dict) -> list[Pair]:
    """Each canary cell whose newest record is a regression, paired with the control stack whose
    newest record of the same cell (the same axes but the stack) passed with the fewest of the
    canary's packages at other releases; canaries with no passing control, or none differing,
    are left out."""
    newest: dict[str, dict] = {}
    for rec in recs:
        newest[rec["cell"]] = rec
    by_axes: dict[tuple, list[dict]] = {}
    for rec in newest.values():
        by_axes.setdefault(_axes_but_stack(rec), []).append(rec)
    out = []
    order = list(stacks)
    for rec in newest.values():
        stack = stacks.get((rec.get("axes") or {}).get("stack"))
        if stack is None or not stack.canary or rec.get("outcome") not in REGRESSIONS:
            continue
        mine, moving = versions(rec), [name for name, _ in stack.packages]
        options = []
        for other in by_axes[_axes_but_stack(rec)]:
            control = stacks.get(other["axes"]["stack"])
            if control is None or control.canary or control.current or other.get("outcome") != "pass":
                continue
            theirs = versions(other)
            differ = {p: (theirs[p], mine[p]) for p in moving if p in mine and p in theirs and mine[p] != theirs[p]}
            if differ:
                options.append((len(differ), -order.index(control.name), Pair(rec, other, control.name, differ)))
        if options:
            out.append(min(options, key=lambda o: o[:2])[2])
    return out


def proposed_issue(report: dict, bad_record: dict) -> str:
    """A draft known-issue entry (matrix/known_issues.toml's format) from a bisection that named a
    first bad release: the boundary, the error signature and the records are filled in; what only
    a person can give (a name, the cause, public sources, the fix's wording) is marked TODO. It is
    a proposal written beside the records, never merged into the base."""
    import re

    edge, package = report["boundary"], report["package"]
    err = bad_record.get("error") or {}
    short = str(err.get("type") or "").rsplit(".", 1)[-1]
    slug = re.sub(r"[^a-z0-9]+", "-", f"{package}-{edge['first_bad']}-{short or 'regression'}".lower()).strip("-")
    probes = ", ".join(f"{p['version']} {p['verdict']} ({p['record']})" for p in report["probes"])
    excerpt = str(err.get("excerpt") or err.get("message") or "").replace("'''", "''\\'")
    return "\n".join(
        [
            f"# PROPOSED by compat bisect {report['id']}: a draft for a person to complete from public reports;",
            "# compat never merges it as it is: `compat known-issue THIS_FILE` checks it, completed, and adds it.",
            f"# Cell {report['cell']}, base stack {report['base_stack']}: {package} {edge['last_good']} passes, "
            f"{edge['first_bad']} fails the same way as the newest.",
            f"# Probes (version, verdict, record id): {probes}",
            "[[issue]]",
            f'id = "{slug}"  # TODO: name the failure, not the release',
            "reports = 0  # TODO: distinct public threads showing this error",
            f'title = "{package} {edge["first_bad"]}: {short or "a regression"} in {report["cell"]}"  # TODO: one '
            "line on what breaks",
            f'cause = "TODO: what {package} {edge["first_bad"]} changed (read its changelog and source between '
            f'{edge["last_good"]} and {edge["first_bad"]})"',
            f"signatures = ['{signature_pattern(bisect.signature_of(bad_record).removeprefix(short + ': '))}']",
            f"example = '''\n{excerpt}\n'''  # TODO: an excerpt from a cited public report",
            f'fix = ["Pin {package}<{edge["first_bad"]} (bisected by compat: {report["id"]})."]',
            "sources = []  # TODO: at least one public report",
            "[issue.when]",
            f'{package} = ">={edge["first_bad"]}"',
            f"# TODO: the other conditions it needs; bisected on {report['cell']}: "
            + ", ".join(f"{k} {v}" for k, v in sorted((bad_record.get("axes") or {}).items())),
            "",
        ]
    )


# outcome.signature's placeholders, as what they stand for in a log (RE2, no lookaround)
_PLACEHOLDERS = {"<hex>": "0x[0-9a-fA-F]+", "<path>": "\\S+", "<hash>": "[0-9a-f]{12,}", "<n>": "[0-9]+(?:\\.[0-9]+)?"}


def signature_pattern(signature: str) -> str:
    """An error signature as a regex for the known-issue base: its text literal, each placeholder
    (<n>, <path>, <hex>, <hash>) matching what it replaced; at most its first 200 characters."""
    import re

    pieces = re.split(r"(<n>|<path>|<hex>|<hash>)", signature[:200])
    return "".join(_PLACEHOLDERS.get(p) or re.escape(p) for p in pieces).replace("'", "\\x27")


def bisect_canaries(
    recs: list[dict], data, host, results: Path, issues, options: Options, only: list[Pair] | None = None
) -> list[dict]:
    """For each canary regression beside a passing control (canary_pairs), bisect each package
    that differs, from the control's release (good) to the canary's (bad), on the control stack,
    until one names a boundary; its report and a draft known-issue entry are written beside the
    probes' records. Another canary cell failing with the same signature over the same move is
    not searched again: its probes are the found boundary's two releases, which confirm it for
    that cell or not. The reports, in order."""
    out, found_before = [], {}  # (control stack, package, good, bad, signature) -> (bisection id, boundary)
    for pair in canary_pairs(recs, data.stacks) if only is None else only:
        cell = Cell.parse(pair.canary["cell"])
        print(
            f"canary {pair.canary['cell']}: {pair.canary['outcome']} where {pair.control['cell']} passes; differs in "
            + ", ".join(f"{p} {g} -> {b}" for p, (g, b) in sorted(pair.differ.items())),
            flush=True,
        )
        for package, (good, bad) in sorted(pair.differ.items()):
            key = (pair.control_stack, package, good, bad, bisect.signature_of(pair.canary))
            prior = found_before.get(key)
            ends = (
                {"good": prior[1]["last_good"], "bad": prior[1]["first_bad"]} if prior else {"good": good, "bad": bad}
            )
            if prior:
                print(
                    f"  {package}: the same move and error as bisection {prior[0]}: probing its boundary here",
                    flush=True,
                )
            try:
                run, bad_v, good_v, releases_found = start(
                    dataclasses.replace(options, package=package, **ends),
                    data,
                    host,
                    cell,
                    data.stacks[pair.control_stack],
                    results,
                    issues,
                )
            except (UsageError, NoHardwareError) as exc:
                print(f"  {package}: not bisected: {exc}", flush=True)
                continue
            run.search(bad_v, good_v, run.companion_note(), releases_found)
            report = json.loads((results / f"{run.id}.json").read_text(encoding="utf-8"))
            out.append(report)
            if not (report["boundary"] and report["boundary"]["last_good"]):
                continue
            if prior is None:
                found_before[key] = (run.id, report["boundary"])
                draft = results / f"{run.id}.known-issue.toml"
                records.write_atomic(draft, proposed_issue(report, run.bad_record))
                print(f"  a draft known-issue entry, for a person to complete: {draft}", flush=True)
            break  # this package's release is the one that broke it
    return out
