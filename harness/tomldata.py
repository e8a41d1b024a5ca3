"""Reading the project's TOML data (matrix/*.toml) with errors that name the file and line."""

from __future__ import annotations

import difflib
import errno
import os
import re
import stat
import tomllib
from pathlib import Path

from harness.errors import MatrixError


MAX_DATA_BYTES = 8 * 2**20  # a matrix, a config, a data file: kilobytes; a bigger "file" is something else


class NotAFile(ValueError):
    """Not a regular file of at most the bytes allowed (a device, a FIFO, a socket, too large)."""


def read_regular(path: Path, limit: int = MAX_DATA_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes. Anything else is NotAFile, at once:
    /dev/zero is not read for ever, a FIFO is not waited on (opened without blocking)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
        if not stat.S_ISREG(mode):
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket or other"
            raise NotAFile(f"is {kind}, not a regular file")
        with os.fdopen(fd, "rb") as f:
            fd = None
            data = f.read(limit + 1)
        if len(data) > limit:
            raise NotAFile(f"is larger than {limit // 2**20} MiB: not a file compat reads")
        return data
    finally:
        if fd is not None:
            os.close(fd)


def read_toml(path: Path, problems: list[str]) -> dict:
    """The parsed file, or {} with the reason appended to `problems`."""
    try:
        return tomllib.loads(read_regular(path).decode("utf-8"))
    except NotAFile as exc:
        problems.append(f"{path}: {exc}")
    except FileNotFoundError:
        problems.append(f"{path}: no such file")
    except IsADirectoryError:
        problems.append(f"{path}: is a directory, not a TOML file")
    except UnicodeDecodeError as exc:
        problems.append(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})")
    except tomllib.TOMLDecodeError as exc:
        problems.append(f"{path}: not valid TOML: {exc}")
    except RecursionError:
        problems.append(f"{path}: nested too deeply to be compat's data")
    except OSError as exc:
        problems.append(f"{path}: cannot be read: {exc.strerror}")
    return {}


def did_you_mean(word: str, choices) -> str:
    """' (did you mean 'precision'?)' for the closest choice, or '' when none is close."""
    close = difflib.get_close_matches(word, [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def load_data(path: Path, tables: tuple[str, ...]) -> tuple[dict, "Locator"]:
    """A data file and its locator; MatrixError if it cannot be read, or has top-level keys
    other than `tables`."""
    problems: list[str] = []
    doc = read_toml(path, problems)
    if problems:
        raise MatrixError(problems)
    where = Locator(path, path.read_text(encoding="utf-8"))
    unknown = [where(k, k, f"unknown key; this file holds {', '.join(tables)}") for k in doc if k not in tables]
    if unknown:
        raise MatrixError(unknown)
    return doc, where


class Locator:
    """Formats "file:line: key: message", finding the line of `key = ...` inside its table
    (the n-th `[[exclude]]`, `[settings.train]`, ...) where it can."""

    def __init__(self, path: Path, text: str):
        self.path = path
        self.lines = text.splitlines()

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
