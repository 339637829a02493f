"""``cda completion bash|zsh|fish`` (issue 27: no shell completion, as OPA has): generated from
the command table, so every subcommand and option of the parser is completed. The bash script is
sourced by a real bash and asked as the shell asks it (COMP_WORDS, COMP_CWORD)."""

from __future__ import annotations

import io
import shutil
import subprocess

import pytest

from cda.cli.completion import commands
from cda.cli.main import _parser, main


def _script(shell: str) -> str:
    out = io.StringIO()
    assert main(["completion", shell], stdout=out, stderr=io.StringIO()) == 0
    return out.getvalue()


def _complete(words: list[str]) -> list[str]:
    """What bash offers for the last of ``words`` (a command line being typed)."""
    line = " ".join("''" if w == "" else w for w in words)
    program = (_script("bash") + f"\nCOMP_WORDS=({line}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); COMPREPLY=(); "
               '_cda; printf "%s\\n" "${COMPREPLY[@]}"\n')
    proc = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [w for w in proc.stdout.splitlines() if w]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_every_command_and_option_of_the_parser() -> None:
    table = commands(_parser())
    assert len(table) > 20
    for command in table:
        if command.subcommands:
            assert sorted(_complete(["cda", *command.path, ""])) == sorted(command.subcommands), command.path
        options = [*command.flags, *command.options]
        if command.path and options:
            assert set(_complete(["cda", *command.path, "--"])) == set(options), command.path
    assert _complete(["cda", "so"]) == ["solve"]
    assert _complete(["cda", "solve", "--backend", ""]) == ["auto", "z3", "clingo"]
    assert _complete(["cda", "solve", "--backend", "z3", "--js"]) == ["--json"]  # an option's value is skipped
    assert _complete(["cda", "receipts", ""]) == ["verify"]


def test_zsh_and_fish_scripts_name_every_command() -> None:
    table = commands(_parser())
    zsh, fish = _script("zsh"), _script("fish")
    assert zsh.startswith("#compdef cda") and "bashcompinit" in zsh and "complete -o default" in zsh
    for command in table:
        for name in command.subcommands:
            assert f"-a '{name}'" in fish, name
        for option in command.options:
            assert f"-l '{option.lstrip('-')}'" in fish, option
    for shell, check in (("zsh", ["zsh", "-n"]), ("fish", ["fish", "--no-execute"])):
        if shutil.which(check[0]):  # a syntax check where the shell is installed
            proc = subprocess.run([*check], input=_script(shell), capture_output=True, text=True, timeout=60)
            assert proc.returncode == 0, proc.stderr


def test_an_unknown_shell_is_a_usage_error() -> None:
    err = io.StringIO()
    assert main(["completion", "powershell"], stdout=io.StringIO(), stderr=err) == 2 and "invalid choice" in err.getvalue()
