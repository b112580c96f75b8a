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
    assert parser.description and parser.description.split(".")[0] in text
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
    assert "{" + ",".join(COMMANDS_IN_ORDER) + "}" in text


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
