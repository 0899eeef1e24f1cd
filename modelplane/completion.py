"""Shell completion scripts for `modelplane completion bash|zsh|fish`, generated from the argument parser.

Plain data out of argparse (each command's options, which take a value, their choices), then one
template per shell: no dependency, and a new option completes as soon as the parser has it. Values:
choices complete from the list, --stack from the stack files of the project the shell is in
(`<stackConfigDir>/Pulumi.<stack>.yaml`, found as the CLI finds them), paths from the file system.
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass

PATH_OPTIONS = ("--config", "--previous", "--out", "--kubeconfig-dir")  # their values are files or folders


@dataclass(frozen=True)
class Option:
    names: tuple[str, ...]  # "-s", "--stack"
    help: str
    takes_value: bool
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    options: tuple[Option, ...]


def _options(parser: argparse.ArgumentParser) -> tuple[Option, ...]:
    found = []
    for action in parser._actions:  # argparse has no public accessor for these
        if not action.option_strings:
            continue
        found.append(
            Option(
                tuple(action.option_strings),
                " ".join((action.help or "").split()),
                action.nargs != 0,
                tuple(str(c) for c in action.choices or ()),
            )
        )
    return tuple(found)


def commands_of(parser: argparse.ArgumentParser) -> tuple[Command, ...]:
    [subparsers] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    helps = {choice.dest: choice.help or "" for choice in subparsers._choices_actions}
    return tuple(Command(name, helps.get(name, ""), _options(sub)) for name, sub in subparsers.choices.items())


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    return {"bash": _bash, "zsh": _zsh, "fish": _fish}[shell](parser)


def _bash_function(parser: argparse.ArgumentParser) -> str:
    """Long: the bash script itself, as one template."""
    commands = commands_of(parser)
    top = " ".join([c.name for c in commands] + [n for o in _options(parser) for n in o.names])
    per_command = "\n".join(
        f"        {c.name}) opts={shlex.quote(' '.join(n for o in c.options for n in o.names))};;" for c in commands
    )
    values: dict[str, str] = {}
    for command in commands:
        for option in command.options:
            if option.choices:
                for name in option.names:
                    values.setdefault(f"{command.name} {name}", " ".join(option.choices))
    value_cases = "\n".join(
        f'        {shlex.quote(key)}) COMPREPLY=($(compgen -W {shlex.quote(words)} -- "$cur")); return;;'
        for key, words in values.items()
    )
    takes_value = sorted(
        {
            n
            for c in commands
            for o in c.options
            if o.takes_value and not o.choices
            for n in o.names
            if n not in PATH_OPTIONS and n not in ("-s", "--stack")
        }
    )
    return f"""_modelplane_stacks() {{
    # the stack files of the project around the working directory: <stackConfigDir>/Pulumi.<stack>.yaml
    local dir="$PWD" config_dir
    while [[ -n "$dir" && ! -f "$dir/Pulumi.yaml" ]]; do dir="${{dir%/*}}"; done
    [[ -f "$dir/Pulumi.yaml" ]] || return
    config_dir=$(sed -n 's/^stackConfigDir:[[:space:]]*//p' "$dir/Pulumi.yaml" | tr -d "\\"'")
    local file
    for file in "$dir/${{config_dir:-.}}"/Pulumi.*.yaml; do
        [[ -f "$file" ]] || continue
        file="${{file##*/Pulumi.}}"; printf '%s\\n' "${{file%.yaml}}"
    done
}}

_modelplane() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}" command="" word opts=""
    for word in "${{COMP_WORDS[@]:1:COMP_CWORD-1}}"; do
        [[ "$word" != -* ]] && {{ command="$word"; break; }}
    done
    if [[ -z "$command" ]]; then
        COMPREPLY=($(compgen -W {shlex.quote(top)} -- "$cur")); return
    fi
    case "$command $prev" in
{value_cases}
    esac
    case "$prev" in
        -s|--stack) COMPREPLY=($(compgen -W "$(_modelplane_stacks)" -- "$cur")); return;;
        {"|".join(PATH_OPTIONS)}) COMPREPLY=($(compgen -f -- "$cur")); return;;
        {"|".join(takes_value) or "--no-such-option"}) return;;
    esac
    case "$command" in
{per_command}
    esac
    if [[ "$command" == completion ]]; then opts="$opts bash zsh fish"; fi
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}}
"""


def _bash(parser: argparse.ArgumentParser) -> str:
    return (
        "# modelplane bash completion: source <(modelplane completion bash)\n"
        + _bash_function(parser)
        + "complete -o default -F _modelplane modelplane\n"
    )


def _zsh(parser: argparse.ArgumentParser) -> str:
    # zsh runs bash completion functions through bashcompinit, part of every zsh since 4.3
    return (
        '#compdef modelplane\n# modelplane zsh completion: modelplane completion zsh > "${fpath[1]}/_modelplane"\n'
        "autoload -U +X bashcompinit && bashcompinit\n"
        + _bash_function(parser)
        + "complete -o default -F _modelplane modelplane\n"
    )


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish(parser: argparse.ArgumentParser) -> str:
    commands = commands_of(parser)
    names = " ".join(c.name for c in commands)
    lines = [
        "# modelplane fish completion: modelplane completion fish > ~/.config/fish/completions/modelplane.fish",
        "complete -c modelplane -f",
        f"complete -c modelplane -n 'not __fish_seen_subcommand_from {names}' -l version -d 'print the version'",
    ]
    for command in commands:
        lines.append(
            f"complete -c modelplane -n 'not __fish_seen_subcommand_from {names}' -a {command.name} "
            f"-d {_fish_quote(command.help[:80])}"
        )
        for option in command.options:
            flags = " ".join(f"-l {n[2:]}" if n.startswith("--") else f"-s {n[1:]}" for n in option.names)
            value = (
                f" -x -a {_fish_quote(' '.join(option.choices))}"
                if option.choices
                else " -r -F"
                if option.names[-1] in PATH_OPTIONS
                else " -x"
                if option.takes_value
                else ""
            )
            lines.append(
                f"complete -c modelplane -n '__fish_seen_subcommand_from {command.name}' {flags}{value} "
                f"-d {_fish_quote(option.help[:80])}"
            )
        if command.name == "completion":
            lines.append("complete -c modelplane -n '__fish_seen_subcommand_from completion' -a 'bash zsh fish'")
    return "\n".join(lines) + "\n"
