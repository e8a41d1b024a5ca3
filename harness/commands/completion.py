"""`compat completion SHELL`: a completion script for bash, zsh or fish, made from the parser
itself (every command, its options, and the values of those that take a fixed set), so it never
falls behind the commands. Install it once:

    compat completion bash > ~/.local/share/bash-completion/completions/compat
    compat completion zsh > "${fpath[1]}/_compat"        # or: source <(compat completion zsh)
    compat completion fish > ~/.config/fish/completions/compat.fish
"""

from __future__ import annotations

import shlex

from harness import commands
from harness.commands import HELP

NAME = "completion"
SHELLS = ("bash", "zsh", "fish")


def add(sub) -> None:
    p = sub.add_parser(NAME, help=HELP[NAME], description=__doc__.split("\n\n")[0])
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")


def options() -> dict[str, list[tuple[tuple[str, ...], tuple[str, ...] | None, bool]]]:
    """command -> its options: (names, the values it takes where they are a fixed set, whether it
    takes a value), from each command's own parser."""
    import argparse

    out = {}
    for name in commands.HELP:
        subs = argparse.ArgumentParser(prog="compat").add_subparsers()
        commands.module(name).add(subs)
        sub = subs.choices[name]
        out[name] = [
            (tuple(a.option_strings), tuple(map(str, a.choices)) if a.choices else None, a.nargs != 0)
            for a in sub._actions
            if a.option_strings
        ] + [((), tuple(map(str, a.choices)), True) for a in sub._actions if not a.option_strings and a.choices]
    return out


def bash(spec: dict) -> str:
    names = " ".join(spec)
    values = "".join(
        f"        {cmd}:{opt}) words={shlex.quote(' '.join(choices))} ;;\n"
        for cmd, opts in spec.items()
        for names_, choices, _ in opts
        if choices
        for opt in names_
    )
    per_command = "".join(
        f"        {cmd}) opts={shlex.quote(' '.join(o for names_, _, _ in opts for o in names_))}; "
        f"pos={shlex.quote(' '.join(c for names_, choices, _ in opts if not names_ for c in choices))} ;;\n"
        for cmd, opts in spec.items()
    )
    return f"""# compat's bash completion (`compat completion bash`)
_compat() {{
    local cur prev cmd w words opts pos
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    cmd=""
    for w in "${{COMP_WORDS[@]:1:COMP_CWORD-1}}"; do
        case "$w" in -*) ;; *) cmd="$w"; break ;; esac
    done
    if [ -z "$cmd" ]; then
        COMPREPLY=($(compgen -W "{names} --help --version" -- "$cur"))
        return
    fi
    words=""
    case "$cmd:$prev" in
{values}    esac
    if [ -n "$words" ]; then
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
        return
    fi
    case "$cmd" in
{per_command}    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    elif [ -n "$pos" ]; then
        COMPREPLY=($(compgen -W "$pos" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}}
complete -o filenames -F _compat compat
"""


def zsh(spec: dict) -> str:
    return "# compat's zsh completion (`compat completion zsh`): its bash completion, through bashcompinit\n" + (
        "autoload -U +X bashcompinit && bashcompinit\n" + bash(spec)
    )


def fish(spec: dict) -> str:
    lines = ["# compat's fish completion (`compat completion fish`)", "complete -c compat -f"]
    for cmd in spec:
        lines.append(f"complete -c compat -n __fish_use_subcommand -a {cmd} -d {shlex.quote(HELP[cmd][:80])}")
    for cmd, opts in spec.items():
        for names_, choices, takes in opts:
            if not names_:  # a positional of a fixed set
                lines.append(
                    f"complete -c compat -n '__fish_seen_subcommand_from {cmd}' -xa {shlex.quote(' '.join(choices))}"
                )
                continue
            flags = " ".join(f"-l {n[2:]}" if n.startswith("--") else f"-s {n[1:]}" for n in names_)
            value = f" -xa {shlex.quote(' '.join(choices))}" if choices else (" -r -F" if takes else "")
            lines.append(f"complete -c compat -n '__fish_seen_subcommand_from {cmd}' {flags}{value}")
    return "\n".join(lines) + "\n"


def handle(args) -> int:
    print({"bash": bash, "zsh": zsh, "fish": fish}[args.shell](options()), end="")
    return 0
