"""Help for people (issue 13 item 15): every command says what it does, lists its options and shows an example."""

from __future__ import annotations

import inspect
import json
import re

import pytest

from dsh_todo.cli import build_parser, chosen_command, main
from dsh_todo.commands import COMMANDS as COMMANDS_IN_ORDER
from dsh_todo.commands import all_commands
from dsh_todo.commands.options import SCRIPT_FORMAT
from dsh_todo.harness.agent_loop import AgentLoop
from dsh_todo.harness.llm import parse_script

COMMANDS = sorted(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_help_has_a_description_its_options_and_an_example(
        command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "Example:\n  dsh-todo " + command in text
    parser = build_parser()._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
    assert parser.description and " ".join(parser.description.split(".")[0].split()) in " ".join(text.split())
    for action in parser._actions:
        for option in action.option_strings:
            assert option in text


def test_the_top_level_help_is_for_people(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "Examples:" in text and "Exit codes:" in text and "--debug" in text
    assert "startup stays fast" not in text  # the developer docstring is not the manual


def test_run_help_shows_a_valid_script_and_the_real_step_cap(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert SCRIPT_FORMAT.splitlines()[0] in capsys.readouterr().out
    cap = inspect.signature(AgentLoop).parameters["max_steps"].default
    assert f"after {cap} model steps" in SCRIPT_FORMAT
    example = SCRIPT_FORMAT[SCRIPT_FORMAT.index("["):SCRIPT_FORMAT.index("Each reply")]
    replies = parse_script(json.loads(re.sub(r"\s*\n\s*", " ", example)))
    assert [call.name for call in replies[0].tool_calls] == ["todo_write"]


def _help_of(parser_words: list[str], build: str | None, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        build_parser(build).parse_args(parser_words)
    return capsys.readouterr().out


@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_built_alone_has_the_very_same_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The parser a command runs with builds that command alone; its ``--help`` is byte for byte the full one's."""
    full = _help_of([command, "--help"], None, capsys)
    assert _help_of([command, "--help"], command, capsys) == full
    assert chosen_command([command, "--help"]) == command
    assert chosen_command(["--debug", command]) == command


def test_the_top_level_help_lists_every_command_with_its_summary(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    for spec in all_commands():
        assert re.search(rf"^    {re.escape(spec.name)} +{re.escape(spec.summary.split()[0])}", text, re.M)
    listed = re.findall(r"^    (\S+) ", text, re.M)
    assert listed == list(COMMANDS_IN_ORDER)


@pytest.mark.parametrize("argv", [["nope"], ["--bogus", "plan", "x"], [], ["-h", "plan"], ["--", "plan"]])
def test_a_top_level_error_or_help_is_the_full_parsers(argv: list[str]) -> None:
    """Whatever ``argv`` the cheap path is not sure of is parsed by the full parser, so its errors are unchanged."""
    assert chosen_command(argv) is None


def test_an_error_after_a_chosen_command_names_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser("plan").parse_args(["--bogus", "plan"])
    lazy = capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--bogus", "plan"])
    assert lazy == capsys.readouterr().err


def _help_at(width: int, *argv: str) -> str:
    import os
    import subprocess
    import sys

    env = {**os.environ, "COLUMNS": str(width)}
    done = subprocess.run([sys.executable, "-m", "dsh_todo.cli", *argv, "--help"], capture_output=True, text=True,
                          timeout=60, env=env, check=True)
    return done.stdout


@pytest.mark.parametrize("width", [80, 100])
def test_help_wraps_to_the_terminal_and_never_splits_a_path(width: int) -> None:
    """Repro: ``COLUMNS=80 dsh-todo run --help`` printed the description as lines of 120 characters and more (the
    terminal wrapped them mid-word), and split the default root across two lines: "(default $DSH_TODO_ROOT or
    ./.dsh-" / "todo/sessions)"; the top-level help's examples ran to 96 columns."""
    for argv in [[], *([name] for name in COMMANDS)]:
        text = _help_at(width, *argv)
        for line in text.splitlines():
            assert len(line) <= width, (argv, line)
            assert not re.search(r"\w-$", line), (argv, line)  # a word or path broken at its hyphen
        if "dsh-todo/sessions" in " ".join(text.split()):
            assert "./.dsh-todo/sessions" in text, argv


@pytest.mark.parametrize("command", COMMANDS)
def test_every_positional_says_what_it_is(command: str) -> None:
    """Repro: ``dsh-todo run --help`` listed ``prompt`` under "positional arguments" with no word about it."""
    parser = build_parser()._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
    for action in parser._actions:
        if not action.option_strings:
            assert action.help and action.help.strip(), (command, action.dest)


def test_sessions_takes_its_root_one_way(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    """Repro: ``dsh-todo sessions --help`` offered ``[ROOT]`` and ``--root DIR`` for the same thing (and refused
    both at once unless equal). It takes ``--root DIR`` like every other command; a root given as a word is
    refused in one line that shows the way."""
    text = _help_at(80, "sessions")
    assert "--root DIR" in text and "ROOT]" not in text and "positional arguments" not in text
    assert main(["sessions", "./sessions"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "dsh-todo sessions: give the root as an option: dsh-todo sessions --root ./sessions"]


@pytest.mark.parametrize(("typed", "meant"), [("pln", "plan"), ("sesions", "sessions"), ("wacth", "watch"),
                                              ("evnts", "events"), ("dem", "demo")])
def test_a_mistyped_command_suggests_the_nearest(typed: str, meant: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Repro: ``dsh-todo pln`` printed "argument command: invalid choice: 'pln' (choose from 'schema', 'demo', …)"
    and left the person to spot the typo."""
    with pytest.raises(SystemExit) as done:
        main([typed, "x"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: dsh-todo ")
    assert err.splitlines()[-1] == f"dsh-todo: error: unknown command '{typed}': did you mean '{meant}'?"


def test_a_word_near_no_command_lists_them(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["xyzzy"])
    assert done.value.code == 2
    assert "invalid choice: 'xyzzy' (choose from " in capsys.readouterr().err
