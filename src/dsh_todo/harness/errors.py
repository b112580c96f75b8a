"""Every exception dsh-todo raises on purpose, in one tree grouped by what the caller does about it.

::

    DshTodoError                          anything dsh-todo raises on purpose (catch this to catch them all)
    ├── SetupError                        bad configuration or boot: fix the setup, then start again
    │   ├── ConfigError                   a plugin row's config was rejected; the plugin is not mounted
    │   ├── BootError                     a composition could not boot (.row, .plugin)
    │   ├── StorageError (ValueError)     where sessions live is contradictory or unusable (--root, --database)
    │   ├── DatabaseUnavailableError      the PostgreSQL server cannot be reached or refused the connection
    │   ├── MissingExtraError (ImportError) an optional extra is not installed; the message names the install
    │   ├── ListenError                   a server cannot listen on its address (a port in use)
    │   ├── SchemaAuthorError (ValueError) a tool author's parameter schema uses what the DSL lacks
    │   └── ClusterUnavailable (RuntimeError) no throwaway PostgreSQL can start here (dsh_todo.testing)
    ├── InputError                        bad input from a model or a person: tell the sender, who may retry
    │   ├── CommandError                  a command line that cannot run; one line for the person (exit 2)
    │   ├── ToolCallError                 a tool call failed; the model reads "Error: <message>"
    │   │   ├── HarnessError              … and {name, code} travel with the tool/result (SPEC §2)
    │   │   │   ├── ToolArgsError         the arguments broke the tool's JSON Schema (INVALID_ARGS)
    │   │   │   ├── AbortError            the caller aborted the call (ABORTED…)
    │   │   │   └── InvariantError        an invariant companion refused an event (INVARIANT)
    │   │   └── TodoRejectedError         todo_write refused a list, or has no owning agent (a plain Error)
    │   ├── InvariantViolation            a companion's check failed (the registry turns it into InvariantError)
    │   ├── SessionAppendError (ValueError) Session.append refused its input before anything was logged
    │   ├── NotLosslessJSON (ValueError)  a value cannot round-trip through JSON unchanged
    │   └── InvalidTodosView (ValueError) a hand-written todo/write whose list cannot be shown to clients
    ├── SessionLogError                   a stored log cannot be read, loaded or written: the store is the problem
    │   ├── CorruptSessionLogError        the bytes break the format; the log is left untouched
    │   ├── SessionFormatUnsupportedError written by a newer harness: upgrade, the log is not damaged
    │   ├── SessionNotFoundError (LookupError) no log for that session id
    │   ├── SessionIdError (ValueError)   the id cannot name a stored session
    │   ├── SessionExistsError            a new session would collide with a stored log
    │   ├── RootEncodingError (ValueError) a new log asked for in the other encoding than its root's logs
    │   ├── SessionLockedError            another writer holds the session's lock (.holder_pid)
    │   └── SessionWriteError             a batch could not be made durable; the next flush retries it
    │       └── SessionLogChangedError    another process cut, replaced or removed the log: no more writes to it
    ├── EncodingError (ValueError)        bytes under the log format broke; the store reports it as corruption
    │   ├── FrameError                    libzstd refused a frame (its own message)
    │   └── MalformedRowError             a packed chunk row has not a chunk row's exact shape
    └── ModelError                        the model endpoint failed (no key, unreachable, exhausted script)

Why groups by remedy rather than by module: a front door (the CLI, a carrier) decides what to print and which exit
code to return from the group alone, and a library user can catch exactly the failures they can act on. The
``ValueError``/``LookupError``/``RuntimeError`` bases that callers already relied on stay.

Two families stay outside on purpose: ``tool_todo.rules.TodoError`` (the rules import only the standard library,
so any carrier can reuse them; the plugin re-raises it as :class:`TodoRejectedError`), and private control-flow
exceptions that never leave their module (``logview.Refusal`` never leaves the reader either). The web carrier's
``RpcError`` is an :class:`InputError` defined beside its envelope.

The message texts are interface facts (SPEC): classes here never rewrite the message they are given.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


class DshTodoError(Exception):
    """The root: everything dsh-todo raises on purpose, so ``except DshTodoError`` separates them from bugs."""


# -- bad configuration or boot -------------------------------------------------------------------------------------


class SetupError(DshTodoError):
    """The deployment is wrong (a composition, a plugin config, a storage choice); retrying unchanged cannot help."""


class ConfigError(SetupError):
    """A plugin's config was rejected; the plugin is not mounted."""


class BootError(SetupError):
    """A composition could not be booted; the message names the row.

    Like pluggy's ``PluginValidationError.plugin``, the failure carries what it is about, so a front door can point
    at the row without parsing the message: ``row`` is the composition row (``{id, name, config}``; ``None`` when
    the failure is about the composition as a whole, or the row is not a mapping) and ``plugin`` is the loaded
    module or object (``None`` when it could not be loaded).
    """

    def __init__(self, message: str, *, row: Mapping[str, Any] | None = None, plugin: object | None = None) -> None:
        super().__init__(message)
        self.row = row
        self.plugin = plugin


class StorageError(SetupError, ValueError):
    """Where sessions live was asked for in two contradicting ways, or cannot be used (a root that is a file)."""


class DatabaseUnavailableError(SetupError):
    """The database cannot be opened: ``cannot open the database <where>: <cause>``, on one line."""


class MissingExtraError(SetupError, ImportError):
    """What needs an optional extra that is not installed: ``<what> needs the `<extra>` extra: pip install
    'dsh-todo[<extra>]'`` (:func:`dsh_todo.extras.require` builds it). An ``ImportError`` still, so code that
    guarded the import keeps working."""


class ListenError(SetupError):
    """A server cannot listen on its address: ``cannot listen on HOST:PORT: <reason>``, the same words (and exit 2)
    from ``web``, ``demo --web`` and ``mcp --http``."""

    def __init__(self, host: str, port: int, cause: OSError) -> None:
        reason = cause.strerror or str(cause) or type(cause).__name__
        shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
        super().__init__(f"cannot listen on {shown}:{port}: {reason[:1].lower()}{reason[1:]}")
        self.host = host
        self.port = port


class SchemaAuthorError(SetupError, ValueError):
    """The tool author's schema uses something the DSL does not support."""


class ClusterUnavailable(SetupError, RuntimeError):
    """No cluster can be started here; the message says why (missing binaries, no user to run as)."""


# -- bad input from a model or a person ----------------------------------------------------------------------------


class InputError(DshTodoError):
    """What was sent cannot be used; the sender (a model, a person, a client) can fix it and try again."""


class CommandError(InputError):
    """A one-line, user-facing failure (exit code 2)."""


class ToolCallError(InputError):
    """A tool call failed; its message reaches the model as ``Error: <message>`` so the model can correct itself."""


class HarnessError(ToolCallError):
    """An error the harness classifies: its ``name`` and ``code`` travel with the tool result.

    Only these add ``{name, code}`` to a ``tool/result`` (SPEC §2); any other exception is a plain failure whose
    message alone reaches the model.
    """

    name: str = "HarnessError"
    code: str = "HARNESS"

    def __init__(self, message: str, *, name: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        if name is not None:
            self.name = name
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""

    def info(self) -> dict[str, str]:
        return {"name": self.name, "code": self.code}


class ToolArgsError(HarnessError):
    name = "ToolArgsError"
    code = "INVALID_ARGS"


class AbortError(HarnessError):
    name = "AbortError"
    code = "ABORTED"


class InvariantError(HarnessError):
    """An invariant companion refused an event; the message names the package."""

    name = "InvariantError"
    code = "INVARIANT"

    def __init__(self, package_name: str, text: str) -> None:
        super().__init__(f'invariant violated by "{package_name}": {text}')
        self.package_name = package_name


class TodoRejectedError(ToolCallError):
    """``todo_write`` refused the call: a list breaking a value rule, or no owning agent session.

    Deliberately not a :class:`HarnessError`: DSH throws a plain ``Error`` here, so the ``tool/result`` carries no
    ``error`` field (SPEC §4), only ``Error: <message>``.
    """


class InvariantViolation(InputError):
    """Raised by a companion's check; the registry adds the package name."""


class SessionAppendError(InputError, ValueError):
    """``append`` refused its input before anything was logged."""


class NotLosslessJSON(InputError, ValueError):
    """The value cannot round-trip through JSON unchanged."""


class InvalidTodosView(InputError, ValueError):
    """A hand-written ``todo/write`` whose list cannot be shown to clients."""


# -- a stored log that cannot be read or written -------------------------------------------------------------------


class SessionLogError(DshTodoError):
    """Base class for everything this package raises about a stored session."""


class CorruptSessionLogError(SessionLogError):
    """The bytes on disk break the format in a way recovery may not paper over (DSH raises a plain ``Error``).

    A refused log is left untouched: nothing is truncated or appended.
    """


class SessionFormatUnsupportedError(SessionLogError):
    """The log is valid but was written by another harness generation (newer format, or an unknown event type).

    Kept apart from corruption so a user is told to upgrade, never that their log is damaged. ``location`` is the
    raw log the refusal is about; the message ends with ``(raw log: <path>)`` once that is known.
    """

    def __init__(self, message: str, location: Path | str | None = None) -> None:
        super().__init__(message)
        self.location = location


class SessionNotFoundError(SessionLogError, LookupError):
    """No stored log exists for the requested session id."""


class SessionIdError(SessionLogError, ValueError):
    """The session id cannot name a session where it would be stored (too long for a file name, say)."""


class SessionExistsError(SessionLogError):
    """A new session would collide with a log already on disk (load or resume it instead)."""


class RootEncodingError(SessionLogError, ValueError):
    """A new log was asked for in one encoding under a root whose logs have the other: DSH refuses such a root."""


class SessionLockedError(SessionLogError):
    """Another writer (process or store) holds the session's single-writer lock."""

    def __init__(self, message: str, *, holder_pid: int | None) -> None:
        super().__init__(message)
        self.holder_pid = holder_pid


class SessionWriteError(SessionLogError):
    """A batch could not be made durable; it stays queued and the next flush retries it.

    ``repeat``: the same episode of failed writes was already said (warned, or raised to an earlier caller), so a
    caller that only tidies up (a close at exit) need not say it again."""

    def __init__(self, message: str, *, repeat: bool = False) -> None:
        super().__init__(message)
        self.repeat = repeat


class SessionLogChangedError(SessionWriteError):
    """The log file is no longer what its writer made durable: another process cut it, replaced it or removed it.

    No retry can help (appending to it would vouch for bytes the writer never wrote, and a checkpoint would hash
    them), so the session's writes are refused from then on and readers judge the file as it is."""


class EncodingError(DshTodoError, ValueError):
    """The bytes under the log format broke. Kept out of :class:`SessionLogError` because the readers catch these
    and decide (a torn tail, or :class:`CorruptSessionLogError` with the session's own wording)."""


class FrameError(EncodingError):
    """libzstd refused a frame; the message is libzstd's own (for example "Restored data doesn't match checksum")."""


class MalformedRowError(EncodingError):
    """A line tagged as a chunk row does not have a chunk row's exact shape."""


# -- a model endpoint failing --------------------------------------------------------------------------------------


class ModelError(DshTodoError):
    """The model could not answer (no key, unreachable endpoint, exhausted script); the message is for people."""


__all__ = [
    "AbortError", "BootError", "ClusterUnavailable", "CommandError", "ConfigError", "CorruptSessionLogError",
    "DatabaseUnavailableError", "DshTodoError", "EncodingError", "FrameError", "HarnessError", "InputError",
    "InvalidTodosView", "InvariantError", "InvariantViolation", "ListenError", "MalformedRowError", "MissingExtraError",
    "ModelError", "NotLosslessJSON", "RootEncodingError",
    "SchemaAuthorError", "SessionAppendError", "SessionExistsError", "SessionFormatUnsupportedError", "SessionIdError",
    "SessionLockedError", "SessionLogChangedError", "SessionLogError", "SessionNotFoundError", "SessionWriteError",
    "SetupError", "StorageError", "TodoRejectedError", "ToolArgsError", "ToolCallError",
]
