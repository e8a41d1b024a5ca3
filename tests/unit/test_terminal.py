"""On a terminal (issue 43, item 11): `compat completion SHELL`, made from the parser, so every
command and option is in it (bash's is run here as bash runs it on a Tab), and colour in the
answers where the output is a terminal."""

import shutil
import subprocess

import pytest

from conftest import call_compat


def script(shell: str) -> str:
    proc = call_compat("completion", shell)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash here")
def test_bash_completes_commands_options_and_their_values(tmp_path):
    path = tmp_path / "compat.bash"
    path.write_text(script("bash"))

    def tab(*words: str) -> list[str]:
        line = " ".join(f"'{w}'" for w in words)
        run = f"source {path}; COMP_WORDS=(compat {line}); COMP_CWORD={len(words)}; _compat; echo ${{COMPREPLY[@]}}"
        return subprocess.run(["bash", "-c", run], capture_output=True, text=True, check=True).stdout.split()

    assert tab("re") == ["review", "recommend"]
    assert tab("recommend", "--gpu-m") == ["--gpu-memory"]
    assert tab("recommend", "--method", "") == ["full", "lora", "qlora"]
    assert tab("list", "--format", "j") == ["json"]
    assert tab("completion", "") == ["bash", "zsh", "fish"]
    assert "--stop-after" in tab("run", "--")


def test_zsh_and_fish_scripts_hold_every_command_and_option():
    from harness.commands import HELP
    from harness.commands.completion import options

    zsh, fish = script("zsh"), script("fish")
    assert "bashcompinit" in zsh and "complete -o filenames -F _compat compat" in zsh
    for cmd, opts in options().items():
        assert f"complete -c compat -n __fish_use_subcommand -a {cmd} " in fish
        for names, _values, _ in opts:
            if names:
                flags = " ".join(f"-l {n[2:]}" if n.startswith("--") else f"-s {n[1:]}" for n in names)
                assert f"complete -c compat -n '__fish_seen_subcommand_from {cmd}' {flags}" in fish, (cmd, names)
    assert set(options()) == set(HELP)
    assert "complete -c compat -n '__fish_seen_subcommand_from recommend' -l method -xa 'full lora qlora'" in fish


def on_a_terminal(*args: str, env: dict | None = None) -> str:
    """What `compat ARGS` writes to a terminal (a pseudo-terminal as its stdout)."""
    import os
    import pty
    import sys

    from conftest import ROOT

    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", *args],
        stdout=follower,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm", **(env or {})},
    )
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the process is done
            break
        if not chunk:
            break
        out += chunk
    proc.wait(timeout=120)
    os.close(leader)
    return out.decode("utf-8", "replace")


def test_answers_are_coloured_on_a_terminal_and_plain_when_piped_or_with_no_color():
    """Issue 43, item 11: colour in recommend, explain and fit on a terminal; none when piped or
    with NO_COLOR; the colour never comes from the text shown (it is added after terminal_text)."""
    coloured = on_a_terminal("recommend", "--gpu", "T4")
    assert "\x1b[33m[predicted]\x1b[0m" in coloured and "\x1b[32m[measured]\x1b[0m" in coloured
    assert "\x1b[" not in on_a_terminal("recommend", "--gpu", "T4", env={"NO_COLOR": "1"})
    assert "\x1b[" not in call_compat("recommend", "--gpu", "T4").stdout
    fit = on_a_terminal("fit", "--model-size", "7B", "--gpu", "T4")
    assert "\x1b[33mtight\x1b[0m" in fit
