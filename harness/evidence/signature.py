"""Whose record it is: a runner key no contributor can claim (issue 41, findings 2-4).

A runner's name is text anyone can write into a record. Its key cannot be: each runner has an
Ed25519 key pair, kept outside every results folder (`$COMPAT_RUNNER_KEY`, else
~/.config/compat/runner-key, made on the first run, mode 0600). Every record a run writes carries
the public half (`runner.key`) and a `signature` over its content (everything but the
signature and the provenance compat merge adds), so:

- `compat merge` refuses a record whose signature does not match its content, and a record that
  names a runner already in the folder under another key, or none (a runner's name is its own);
- this runner's own decisions (`--resume`, the loss reference) read only records this runner's
  key signed, made here (no provenance): a merged record never steers them.

Ed25519 (RFC 8032, https://www.rfc-editor.org/rfc/rfc8032) in the standard library's integers and
SHA-512: no dependency to install on a locked-down GPU host. About 3 ms to verify a record, 6 ms
to sign one (a cell takes seconds); RFC 8032's test vectors are in tests/unit/test_signature.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import secrets
from pathlib import Path

from harness.errors import UsageError

KEY = r"^[0-9a-f]{64}$"  # runner.key: the public key, hex
SIGNATURE = r"^[0-9a-f]{128}$"
# what the signature does not cover: itself, where a merge found it, and the verdict against the
# reference stack's losses with its flag, which every merge judges again (agreement.Rejudge)
UNSIGNED = ("signature", "provenance", "agreement")
JUDGED_FLAG = "trains_differently"  # agreement.FLAG
_HEADER = "compat runner key v1"

# -- Ed25519 (RFC 8032, section 5.1) ------------------------------------------------------------
_P = 2**255 - 19
_L = 2**252 + 27742317777372353535851937790883648493
_D = -121665 * pow(121666, _P - 2, _P) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)


def _add(a: tuple, b: tuple) -> tuple:
    """Two points in extended coordinates, added (RFC 8032 5.1.4)."""
    x1, y1, z1, t1 = a
    x2, y2, z2, t2 = b
    pa = (y1 - x1) * (y2 - x2) % _P
    pb = (y1 + x1) * (y2 + x2) % _P
    pc = t1 * 2 * _D * t2 % _P
    pd = z1 * 2 * z2 % _P
    e, f, g, h = pb - pa, pd - pc, pd + pc, pb + pa
    return e * f % _P, g * h % _P, f * g % _P, e * h % _P


def _mul(s: int, point: tuple) -> tuple:
    out = (0, 1, 1, 0)
    while s:
        if s & 1:
            out = _add(out, point)
        point = _add(point, point)
        s >>= 1
    return out


def _x(y: int, sign: int) -> int | None:
    """The x of a point from its y and the sign of x (RFC 8032 5.1.3); None if there is none."""
    if y >= _P:
        return None
    x2 = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P) % _P
    if x2 == 0:
        return None if sign else 0
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P:
        x = x * _SQRT_M1 % _P
    if (x * x - x2) % _P:
        return None
    return _P - x if x & 1 != sign else x


_GY = 4 * pow(5, _P - 2, _P) % _P
_G = (_x(_GY, 0), _GY, 1, _x(_GY, 0) * _GY % _P)


def _encode(point: tuple) -> bytes:
    x, y, z, _ = point
    zi = pow(z, _P - 2, _P)
    x, y = x * zi % _P, y * zi % _P
    return int.to_bytes(y | ((x & 1) << 255), 32, "little")


def _decode(data: bytes) -> tuple | None:
    y = int.from_bytes(data, "little")
    sign, y = y >> 255, y & ((1 << 255) - 1)
    x = _x(y, sign)
    return None if x is None else (x, y, 1, x * y % _P)


def _same(a: tuple, b: tuple) -> bool:
    return (a[0] * b[2] - b[0] * a[2]) % _P == 0 and (a[1] * b[2] - b[1] * a[2]) % _P == 0


def _secret(seed: bytes) -> tuple[int, bytes]:
    h = hashlib.sha512(seed).digest()
    a = int.from_bytes(h[:32], "little") & ((1 << 254) - 8) | (1 << 254)
    return a, h[32:]


def public_key(seed: bytes) -> bytes:
    return _encode(_mul(_secret(seed)[0], _G))


def sign(seed: bytes, message: bytes) -> bytes:
    a, prefix = _secret(seed)
    public = _encode(_mul(a, _G))
    r = int.from_bytes(hashlib.sha512(prefix + message).digest(), "little") % _L
    big_r = _encode(_mul(r, _G))
    k = int.from_bytes(hashlib.sha512(big_r + public + message).digest(), "little") % _L
    return big_r + int.to_bytes((r + k * a) % _L, 32, "little")


def verify(public: bytes, message: bytes, signature: bytes) -> bool:
    if len(public) != 32 or len(signature) != 64:
        return False
    a, r = _decode(public), _decode(signature[:32])
    s = int.from_bytes(signature[32:], "little")
    if a is None or r is None or s >= _L:
        return False
    k = int.from_bytes(hashlib.sha512(signature[:32] + public + message).digest(), "little") % _L
    return _same(_mul(s, _G), _add(r, _mul(k, a)))


# -- records ------------------------------------------------------------------------------------


def content(record: dict) -> bytes:
    """What a record's signature covers: its content as canonical JSON (keys sorted, no spaces,
    UTF-8), less UNSIGNED and the judged flag. The record as written (json, default=str) and as
    read back give the same bytes."""
    body = {k: v for k, v in record.items() if k not in UNSIGNED}
    if JUDGED_FLAG in (body.get("flags") or []):
        body["flags"] = [f for f in body["flags"] if f != JUDGED_FLAG]
    body = json.loads(json.dumps(body, default=str))
    return b"compat record v1\n" + json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


def problem(record: dict) -> str | None:
    """Why a record's signature does not hold (None: it holds, or the record is unsigned and names
    no key)."""
    key, sig = (record.get("runner") or {}).get("key"), record.get("signature")
    if key is None and sig is None:
        return None
    if key is None or sig is None:
        return "names a runner key but is not signed" if sig is None else "is signed but names no runner key"
    if not (re.match(KEY, str(key)) and re.match(SIGNATURE, str(sig))):
        return "runner.key or signature is not hex of an Ed25519 key or signature"
    if not verify(bytes.fromhex(key), content(record), bytes.fromhex(sig)):
        return "its signature does not match its content: changed after its runner signed it, or not signed by that key"
    return None


@dataclasses.dataclass(frozen=True)
class RunnerKey:
    seed: bytes = dataclasses.field(repr=False)
    public: str  # hex
    path: Path

    @classmethod
    def load(cls, environ=os.environ) -> "RunnerKey":
        """This runner's key, made on first use. A file that is not a key is a UsageError, named."""
        path = key_path(environ)
        try:
            text = path.read_text(encoding="ascii")
        except FileNotFoundError:
            text = _create(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(
                f"runner key {path}: cannot be read ({exc}); set COMPAT_RUNNER_KEY to another file"
            ) from None
        lines = text.split()
        if len(lines) != 5 or " ".join(lines[:4]) != _HEADER or not re.fullmatch(r"[0-9a-f]{64}", lines[4]):
            raise UsageError(
                f"runner key {path}: not a compat runner key (its first line is {_HEADER!r}, then 64 hex digits); "
                "move it away to make a new one, or set COMPAT_RUNNER_KEY to another file"
            )
        seed = bytes.fromhex(lines[4])
        return cls(seed, public_key(seed).hex(), path)

    def signed(self, record: dict) -> dict:
        """The record with this key in runner.key and its signature."""
        record["runner"] = {**(record.get("runner") or {}), "key": self.public}
        record.pop("signature", None)
        record["signature"] = sign(self.seed, content(record)).hex()
        return record

    def made(self, record: dict) -> bool:
        """Whether this runner made `record` here: signed by this key, not merged from elsewhere. A
        record parsed whole (records.whole): the reader's view leaves out what the signature covers."""
        return (
            not record.get("provenance")
            and (record.get("runner") or {}).get("key") == self.public
            and problem(record) is None
        )


def key_path(environ=os.environ) -> Path:
    if environ.get("COMPAT_RUNNER_KEY"):
        return Path(environ["COMPAT_RUNNER_KEY"]).expanduser()
    config = Path(environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return config / "compat" / "runner-key"


def _create(path: Path) -> str:
    """A new key in a new file, readable by its owner only; if another compat made it first, theirs."""
    text = f"{_HEADER}\n{secrets.token_hex(32)}\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text(encoding="ascii")
    except OSError as exc:
        raise UsageError(
            f"runner key {path}: cannot be made ({exc.strerror}); set COMPAT_RUNNER_KEY to a file compat may create"
        ) from None
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(text)
    return text
