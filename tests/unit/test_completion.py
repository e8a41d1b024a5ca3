"""`compat completion SHELL` (issue 43, item 11): made from the parser, so every command and
option is in it; bash's is run here as bash runs it on a Tab."""

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
