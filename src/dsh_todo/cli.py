"""``dsh-todo``: the command line's frame: the top-level help, SIGPIPE, and one map from errors to exit codes.

Each subcommand is one module of :mod:`dsh_todo.commands` (its help, options and body); nothing about a single
command lives here. The help people read is :data:`USAGE` and :data:`EPILOG` (``--help`` shows them, not this
docstring).
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dsh_todo.carriers.stopping import STOPPING
from dsh_todo.commands import COMMANDS, command
from dsh_todo.commands.formatting import Manual, nearest
from dsh_todo.harness.errors import (
    EncodingError,
    InputError,
    ModelError,
    SessionLogError,
    SessionWriteError,
    SetupError,
)

if TYPE_CHECKING:
    from dsh_todo.commands import Command

USAGE = """\
dsh-todo: DeepSeek Harness's todo_write tool, its session logs, and front doors for them.

A model keeps its task list with todo_write; every list it sends is appended to the session's log, and the
standing plan is read back from there. Sessions live under a JSONL root (--root, $DSH_TODO_ROOT, default
./.dsh-todo/sessions) or in PostgreSQL (--database, $DSH_TODO_DATABASE_URL); every command reads where the others
write."""

EPILOG = """\
Examples:
  dsh-todo demo                 play a scripted task offline and show its plan
  dsh-todo run --script replies.json "plan the release"
  dsh-todo sessions             list the sessions and their plans
  dsh-todo watch --latest       follow the newest session's plan live

Exit codes: 0 done, 1 a failed turn, an OS refusal (a full disk) or an unexpected error, 2 bad input, setup or
stored log; run stopped by SIGINT, SIGTERM or SIGHUP: 128 + the signal (130, 143, 129).

Run 'dsh-todo COMMAND --help' for a command's options; add --debug to see a traceback."""

def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser: the manual above, then one subparser per :class:`~dsh_todo.commands.Command`.

    With ``only`` (a command's name), only that command's module is imported and only its subparser is built;
    every other name gets an empty placeholder, so the usage line and the top-level errors still list every
    command and the chosen command's own help is the very same. The full parser is for ``dsh-todo --help``.
    """
    parser = argparse.ArgumentParser(prog="dsh-todo", description=USAGE, epilog=EPILOG, formatter_class=Manual)
    parser.add_argument("--debug", action="store_true",
                        help="show the Python traceback of a failure (also DSH_TODO_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    for name in COMMANDS:
        if only is not None and name != only:
            sub.add_parser(name)
            continue
        spec = command(name)
        cmd = sub.add_parser(spec.name, help=spec.summary, description=spec.description,
                             epilog=f"Example:\n  {spec.example}", formatter_class=Manual)
        spec.arguments(cmd)
        cmd.set_defaults(spec=spec)
    return parser


def chosen_command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs, when that is certain before parsing: its first word, after top-level options
    only, naming a known command. ``None`` (build everything) when the top-level help is asked for first, or
    anything else is unusual: argparse then says what is wrong exactly as it always did."""
    for word in argv:
        if len(word) > 2 and "--debug".startswith(word):  # --debug, or an abbreviation argparse accepts
            continue
        return word if word in COMMANDS else None
    return None


def _suggest(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    """A first word that is no command but close to one is answered ``did you mean 'plan'?`` (exit 2), not with
    argparse's list of every choice; anything else is left to argparse."""
    for word in argv:
        if len(word) > 2 and "--debug".startswith(word):
            continue
        if word.startswith("-") or word in COMMANDS:
            return
        meant = nearest(word, COMMANDS)
        if meant is not None:
            parser.error(f"unknown command '{word}': did you mean '{meant}'?")
        return


def _restore_sigpipe(command: Command) -> None:
    """Filters die of SIGPIPE quietly (:attr:`~dsh_todo.commands.Command.filter`); nothing else does."""
    if command.filter and hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)


def _exit_codes() -> tuple[tuple[type[BaseException], int], ...]:
    """What each group of the error tree (:mod:`dsh_todo.harness.errors`) means to a shell, first match wins.

    Whatever the person or model sent, however the setup is wrong, whatever stored log cannot be read: 2, the
    person can fix it. A model endpoint failing or the operating system refusing (a full disk, no permission): 1,
    also when the refusal reaches us as a log that could not be written (:class:`SessionWriteError`).
    """
    return ((InputError, 2), (SetupError, 2), (SessionWriteError, 1), (SessionLogError, 2), (EncodingError, 2),
            (ModelError, 1), (OSError, 1))


def _show_debug_logs() -> None:
    """``--debug``: our loggers' tracebacks too. Without it a warning is its one line (a writer that cannot write
    says so once per episode, :mod:`dsh_todo.harness.persistence.batching`), and only :data:`logging.lastResort`
    prints it."""
    import logging

    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    logger = logging.getLogger("dsh_todo")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)


def one_line(exc: BaseException) -> str:
    """The message on one line: psycopg's texts, for one, put a hint on a second, indented line."""
    text = re.sub(r"\s*\n\s*", " ", str(exc).strip())
    return text or type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the one place that turns an exception into a line on stderr and an exit code.

    A known error prints ``dsh-todo <command>: <message>``; anything else, a bug, prints
    ``dsh-todo: error: <message>`` and exits 1. ``--debug`` (before the command) or ``DSH_TODO_DEBUG=1`` lets the
    traceback through instead, for the person who asked for it.
    """
    words = sys.argv[1:] if argv is None else argv
    chosen = chosen_command(words)
    parser = build_parser(chosen)
    if chosen is None:
        _suggest(parser, words)
    args = parser.parse_args(words)
    if argv is None:  # the process's own command line, not a caller's in-process call (a test)
        STOPPING.own_process = True
        # The process's collector policy is the application's to choose, never the library's: a read allocates
        # millions of acyclic containers, and the default threshold (700) rescans them again and again as the heap
        # grows. Young collections every 100,000 allocations keep cycles collected and take 37% off the CPU of a
        # `plan --turn` that reads and keeps a 300k-event log (decision 0045).
        gc.set_threshold(100_000, 10, 10)
    _restore_sigpipe(args.spec)
    debug = args.debug or os.environ.get("DSH_TODO_DEBUG", "") not in ("", "0")
    if debug:
        _show_debug_logs()
    try:
        code: int = args.spec.run(args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if debug:
            raise
        for kind, exit_code in _exit_codes():
            if isinstance(exc, kind):
                print(f"dsh-todo {args.command}: {one_line(exc)}", file=sys.stderr)
                return exit_code
        print(f"dsh-todo: error: {one_line(exc)}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    raise SystemExit(main())
