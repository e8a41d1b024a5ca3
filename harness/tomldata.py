"""Reading and checking the project's TOML data (matrix/*.toml) with errors that name the file and
line.

Each data file declares its tables beside the code that reads it: the keys a table takes, which
are required, and the kind of value each holds (a `Kind`: a test and what is said of a value that
fails it). `check` holds a table to its declaration, with one message style for every file:
"unknown key (did you mean ...)", "missing ...", and the kind's own words, each at file:line.
What only a whole file can say (an alias given twice, an example its own signatures do not
match) stays with the file's loader.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import hashlib
import marshal
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any, Callable

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from harness.errors import MatrixError

MAX_DATA_BYTES = 8 * 2**20  # a matrix, a config, a data file: kilobytes; a bigger "file" is something else


class NotAFile(ValueError):
    """Not a regular file of at most the bytes allowed (a device, a FIFO, a socket, too large)."""


def open_regular(path: Path):
    """A regular file, open for reading in binary. Anything else is NotAFile (or IsADirectoryError),
    at once: it is opened without blocking and checked before a byte is read, so /dev/zero is not read
    for ever and a FIFO is not waited on."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
        if not stat.S_ISREG(mode):
            kind = (
                "a FIFO"
                if stat.S_ISFIFO(mode)
                else "a device"
                if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "a socket or other"
            )
            raise NotAFile(f"is {kind}, not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def new_file(folder: Path, prefix: str, suffix: str) -> tuple[int, Path]:
    """A file made new in `folder` under a name no file has (prefix, random, suffix), open for
    writing: its descriptor and path. Created as open() creates a file, mode 0o666 less the umask
    (0644 under the usual 022: a table or page published from it is readable by all, where
    tempfile.mkstemp's 0600 made it its owner's alone), and as mkstemp does, with O_EXCL: a link
    planted under the name is never followed."""
    import secrets

    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        path = folder / f"{prefix}{secrets.token_hex(6)}{suffix}"
        try:
            return os.open(path, flags, 0o666), path
        except FileExistsError:
            continue  # a name taken: another
    raise FileExistsError(errno.EEXIST, "no unused temporary name", str(folder))


def read_regular(path: Path, limit: int = MAX_DATA_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (open_regular); a larger one is NotAFile."""
    with open_regular(path) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise NotAFile(f"is larger than {limit // 2**20} MiB: not a file compat reads")
    return data


def read_toml(path: Path, problems: list[str]) -> dict:
    """The parsed file, or {} with the reason appended to `problems`."""
    return _read_toml(path, problems)[0]


def _read_toml(path: Path, problems: list[str]) -> tuple[dict, str]:
    """(the parsed file, its text), or ({}, "") with the reason appended to `problems`. A file read
    before, byte for byte, is taken parsed from the cache (parsing is most of the time a large
    file costs: 0.19 s for the known-issue base, against 1 ms decoded)."""
    try:
        data = read_regular(path)
        text = data.decode("utf-8")
        key = f"toml-{digest(data, PARSER)}"
        doc = cached(key)
        if not isinstance(doc, dict):
            import tomllib  # only here: a file read before is taken parsed

            doc = tomllib.loads(text)
            store(key, doc)  # a file holding dates or times is not kept: marshal refuses them
        return doc, text
    except NotAFile as exc:
        problems.append(f"{path}: {exc}")
    except FileNotFoundError:
        problems.append(f"{path}: no such file")
    except IsADirectoryError:
        problems.append(f"{path}: is a directory, not a TOML file")
    except UnicodeDecodeError as exc:
        problems.append(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})")
    except ValueError as exc:  # tomllib.TOMLDecodeError: the others of its kind are said above
        problems.append(f"{path}: not valid TOML: {exc}")
    except RecursionError:
        problems.append(f"{path}: nested too deeply to be compat's data")
    except OSError as exc:
        problems.append(f"{path}: cannot be read: {exc.strerror}")
    return {}, ""


def did_you_mean(word: str, choices) -> str:
    """' (did you mean 'precision'?)' for the closest choice, or '' when none is close."""
    import difflib

    close = difflib.get_close_matches(word, [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def load_data(path: Path, tables: tuple[str, ...]) -> tuple[dict, "Locator"]:
    """A data file and its locator; MatrixError if it cannot be read, or has top-level keys
    other than `tables`, or one of them is not a table (or, for `[[name]]`, an array of tables)."""
    doc, where = open_data(path)
    problems: list[str] = []
    for key, value in doc.items():
        if key not in tables:
            problems.append(where(key, key, f"unknown key; this file holds {', '.join(tables)}"))
        elif not isinstance(value, dict) and not (isinstance(value, list) and all(isinstance(v, dict) for v in value)):
            problems.append(where(key, key, "must be a table ([name]) or an array of tables ([[name]])"))
    if problems:
        raise MatrixError(problems)
    return doc, where


def open_data(path: Path) -> tuple[dict, "Locator"]:
    """A data file, parsed, and its locator; MatrixError if it cannot be read."""
    problems: list[str] = []
    doc, text = _read_toml(path, problems)
    if problems:
        raise MatrixError(problems)
    return doc, Locator(path, text)


# -- declarations ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Kind:
    """What a value must be: `problem(value)` is what is said of one that is not, else None."""

    problem: Callable[[Any], str | None]


def kind(test: Callable[[Any], Any], message: str) -> Kind:
    """A kind from a test and its message; {v} in it is the value as TOML writes it, {r} as
    Python does."""
    return Kind(lambda value: None if _holds(test, value) else message.format(v=toml_repr(value), r=repr(value)))


def _holds(test, value) -> bool:
    try:
        return bool(test(value))
    except (TypeError, ValueError):
        return False


@dataclasses.dataclass(frozen=True)
class Key:
    """A key of a table: the kinds its value must be (the first it fails is said), the kind of
    each item where it is a list, whether it is required and what is said when it is missing
    (the table's own words otherwise)."""

    kinds: tuple[Kind, ...]
    each: Kind | None = None
    required: bool = False
    missing: str = ""

    @classmethod
    def of(cls, *kinds: Kind, each: Kind | None = None, required: bool = False, missing: str = "") -> "Key":
        return cls(kinds, each, required, missing)


@dataclasses.dataclass(frozen=True)
class Table:
    """A table's declaration: its keys, in the order they are checked, and what is said of a key
    it does not declare ({hint}: "did you mean"; {keys}: the keys it takes) and of a required key
    that is missing ({key})."""

    keys: dict[str, Key]
    unknown: str = "unknown key{hint}"
    missing: str = "missing key {key!r}"


def check(
    values: dict,
    table: Table,
    at: Callable[[str, str], str],
    problems: list[str],
    at_table: Callable[[str], str] | None = None,
    also: Callable[[str, Any], str | None] | None = None,
) -> bool:
    """Hold `values` to `table`, appending each problem as `at(key, message)` (a missing key at
    `at_table(message)` where given: the table's header), in the file's order. `also(key, value)`:
    a rule of this file's that needs the rest of the table, asked of each value its kinds took.
    True when there was no problem."""
    before = len(problems)
    for key, value in values.items():  # in the file's order
        decl = table.keys.get(key)
        if decl is None:
            problems.append(
                at(key, table.unknown.format(hint=did_you_mean(key, table.keys), keys=", ".join(table.keys)))
            )
            continue
        why = next((w for w in (k.problem(value) for k in decl.kinds) if w), None)
        if why is None and decl.each is not None and isinstance(value, list):
            why = next((w for w in map(decl.each.problem, value) if w), None)
        if why is None and also is not None:
            why = also(key, value)
        if why:
            problems.append(at(key, why))
    for key, decl in table.keys.items():
        if decl.required and key not in values:
            message = decl.missing or table.missing.format(key=key)
            problems.append(at_table(message) if at_table and not decl.missing else at(key, message))
    return len(problems) == before


def toml_repr(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _specifier(value) -> bool:
    return isinstance(value, str) and SpecifierSet(value) is not None


def _version(value) -> bool:
    return isinstance(value, str) and Version(value) is not None


TEXT = kind(lambda v: isinstance(v, str), "must be a string")
NONEMPTY_TEXT = kind(lambda v: isinstance(v, str) and v.strip(), "must be non-empty text")
BOOL = kind(lambda v: isinstance(v, bool), "must be true or false")
TABLE = kind(lambda v: isinstance(v, dict), "must be a table")
TEXT_LIST = kind(
    lambda v: isinstance(v, list) and v and all(isinstance(x, str) and x.strip() for x in v),
    "must be a non-empty list of text",
)
URL = kind(lambda v: isinstance(v, str) and re.match(r"^https?://\S+$", v), "{r} is not a URL")
CC = kind(lambda v: isinstance(v, str) and re.fullmatch(r"\d+\.\d", v), '{r} is not a compute capability like "8.6"')
POSITIVE_INT = kind(lambda v: _is_int(v) and v >= 1, "{r} must be a whole number, 1 or more")
SPECIFIER = kind(_specifier, "{r} is not a version specifier")
VERSION = kind(_version, "{r} is not a version")


def one_of(*choices) -> Kind:
    shown = ", ".join(toml_repr(c) for c in choices)
    return kind(lambda v: any(type(v) is type(c) and v == c for c in choices), "{v} is not one of " + shown)


class Locator:
    """Formats "file:line: key: message", finding the line of `key = ...` inside its table
    (the n-th `[[exclude]]`, `[settings.train]`, ...) where it can."""

    def __init__(self, path: Path, text: str):
        self.path = path
        self.text = text

    @functools.cached_property
    def lines(self) -> list[str]:  # split on the first message: a file with no problem is never split
        return self.text.splitlines()

    def __call__(self, key: str, label: str, message: str, table: str = "", nth: int = 0) -> str:
        start, end = 0, len(self.lines)
        if table:
            header = re.compile(rf"^\s*\[\[?\s*{re.escape(table)}\s*\]\]?\s*(#.*)?$")
            starts = [i for i, line in enumerate(self.lines) if header.match(line)]
            if nth < len(starts):
                start = starts[nth]
                nxt = [i for i in range(start + 1, end) if self.lines[i].lstrip().startswith("[")]
                end = nxt[0] if nxt else end
        key_line = re.compile(rf"^\s*(\[+\s*{re.escape(key)}\s*\]+|\"?{re.escape(key)}\"?\s*=)")
        for number in range(start, end):
            if key_line.match(self.lines[number]):
                return f"{self.path}:{number + 1}: {label}: {message}"
        if table and start < len(self.lines) and (start or nth == 0):
            return f"{self.path}:{start + 1}: {label}: {message}"
        return f"{self.path}: {label}: {message}"


# -- what compat derives from its data files, kept between runs ---------------------------------
# A data file's parsed form, and the checked form of the known-issue base, are stored under a key
# made of the file's bytes and of what turned them into that form (the parser; the checking
# code and the libraries it uses), so a changed file, or a changed compat, is read and checked
# afresh. The folder is the user's own, as pip's cache is: $COMPAT_CACHE_DIR, else
# $XDG_CACHE_HOME/compat/data or ~/.cache/compat/data. An entry that cannot be read is as none; one
# that cannot be written is left out; COMPAT_CACHE_DIR="" keeps nothing.

PARSER = f"tomllib-py{sys.version_info[0]}.{sys.version_info[1]}"
# entries are Python's marshal format: plain data only (tables, lists, text, numbers), read back in
# a millisecond with nothing to import; it changes between Python versions, which their names carry
ENTRY = f"marshal{marshal.version}-py{sys.version_info[0]}{sys.version_info[1]}"


def cache_dir() -> Path | None:
    if "COMPAT_CACHE_DIR" in os.environ:
        return Path(os.environ["COMPAT_CACHE_DIR"]) if os.environ["COMPAT_CACHE_DIR"] else None
    try:
        return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "compat" / "data"
    except RuntimeError:  # no home folder to be found: nothing kept
        return None


def digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:32]


def cached(key: str):
    """What `store` kept under `key`, or None."""
    folder = cache_dir()
    if folder is None:
        return None
    path = folder / f"{key}.{ENTRY}"
    try:
        value = marshal.loads(path.read_bytes())
    except (OSError, ValueError, EOFError, TypeError):  # none yet, or damaged: made again
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # used: the newest are the ones kept
    return value


def store(key: str, value) -> None:
    """Keep `value` (plain data) under `key`: written whole to a new file, then moved into place."""
    folder = cache_dir()
    if folder is None:
        return
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = new_file(folder, f".{key}.", ".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(marshal.dumps(value))
        os.replace(tmp, folder / f"{key}.{ENTRY}")
        tmp = None
        _prune(folder)
    except (OSError, TypeError, ValueError):  # a read-only home, a full disk: compat works without it
        pass
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def stamp(*modules: str) -> str:
    """The installed files of `modules` (names, sizes, times), found without importing them: a
    cache entry made with one release of a library is not read with another."""
    import importlib.util

    parts = []
    for name in modules:
        spec = importlib.util.find_spec(name)
        folder = Path(spec.origin).parent if spec and spec.origin else None
        if folder is None:
            parts.append(f"{name}: none")
            continue
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            if entry.is_file() and entry.name.endswith((".py", ".so", ".pyd")):
                info = entry.stat()
                parts.append(f"{name}/{entry.name} {info.st_size} {info.st_mtime_ns}")
    return "\n".join(parts)


KEPT = 64  # entries the folder holds: the newest; a file edited many times leaves no trail


def _prune(folder: Path) -> None:
    entries = sorted(folder.glob(f"*.{ENTRY}"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    for old in entries[KEPT:]:
        with contextlib.suppress(OSError):
            old.unlink()
