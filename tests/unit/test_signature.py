"""Records signed by their runner's key (issue 41): Ed25519 as RFC 8032 defines it (its test
vectors, section 7.1: https://www.rfc-editor.org/rfc/rfc8032#section-7.1), a record's signature
that holds through writing and reading, and fails for any change of its content."""

import os
import stat

import pytest

from harness.errors import UsageError
from harness.evidence import records, signature

from conftest import real_records

# (secret key, public key, message, signature) of RFC 8032, 7.1: TEST 1, TEST 2, TEST 3
VECTORS = [
    (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
    ),
    (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    ),
    (
        "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
        "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
        "af82",
        "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a",
    ),
]


@pytest.mark.parametrize("seed, public, message, sig", VECTORS)
def test_ed25519_gives_rfc_8032s_keys_and_signatures(seed, public, message, sig):
    seed, message = bytes.fromhex(seed), bytes.fromhex(message)
    assert signature.public_key(seed).hex() == public
    assert signature.sign(seed, message).hex() == sig
    assert signature.verify(bytes.fromhex(public), message, bytes.fromhex(sig))
    assert not signature.verify(bytes.fromhex(public), message + b"x", bytes.fromhex(sig))
    flipped = bytearray.fromhex(sig)
    flipped[5] ^= 1
    assert not signature.verify(bytes.fromhex(public), message, bytes(flipped))


def test_a_signed_record_holds_after_writing_and_reading_and_fails_when_changed(tmp_path):
    """TEST INPUT: a real record, signed by a test key."""
    key = signature.RunnerKey.load({"COMPAT_RUNNER_KEY": str(tmp_path / "key")})
    rec = key.signed(next(r for r in real_records(1000) if r.get("runner") and r["outcome"] == "pass"))
    path = tmp_path / "records.jsonl"
    records.append(path, rec)
    (back,), bad = records.read_records([path])
    assert bad == [] and signature.problem(back) is None and key.made(back)
    assert signature.problem({**back, "provenance": [{"file": "x"}]}) is None  # what merge adds is not covered
    assert not key.made({**back, "provenance": [{"file": "x"}]})  # but a merged record is not made here
    for change in (
        {"outcome": "fail"},
        {"losses": {**back["losses"], "last": back["losses"]["last"] + 1.0}},
        {"runner": {**back["runner"], "name": "someone"}},
        {"id": "0" * 32},
    ):
        assert "does not match its content" in signature.problem({**back, **change}), change
    other = signature.RunnerKey.load({"COMPAT_RUNNER_KEY": str(tmp_path / "other")})
    assert not other.made(back)
    assert signature.problem({**back, "signature": None}) == "names a runner key but is not signed"


def test_the_key_is_made_once_for_its_owner_only_and_a_file_that_is_not_one_is_named(tmp_path):
    env = {"COMPAT_RUNNER_KEY": str(tmp_path / "deep" / "key")}
    first = signature.RunnerKey.load(env)
    assert signature.RunnerKey.load(env).public == first.public
    assert stat.S_IMODE(os.stat(tmp_path / "deep" / "key").st_mode) == 0o600
    (tmp_path / "junk").write_text("hello\n")
    with pytest.raises(UsageError, match="junk: not a compat runner key"):
        signature.RunnerKey.load({"COMPAT_RUNNER_KEY": str(tmp_path / "junk")})
    assert first.seed.hex() not in repr(first)  # the secret half never shows in a message or a log
