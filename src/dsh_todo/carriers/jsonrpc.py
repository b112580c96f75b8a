"""JSON-RPC 2.0 over lines, the rules every stdio server of ours applies before its SDK sees a message.

Both SDKs behind our stdio servers read lines themselves and fail on some of them: MCP's drops text that is not JSON,
lone surrogate escapes and deep nesting without an answer, so the client waits forever; ACP's logs a traceback for
text that is not JSON, and a JSON array (a JSON-RPC batch) ended the agent. Our transports read the lines with these
rules and hand on only JSON objects:

- a line longer than the server's limit is skipped as it arrives (at most one line's worth is ever held) and refused
  ``-32600`` under its id when a token scan finds one (:func:`scan_id`);
- not UTF-8, not JSON → ``-32700`` ``Parse error: …`` under a null id;
- nesting deeper than :data:`MAX_DEPTH` → ``-32600`` under the request's id (neither the stack nor memory grows with
  what a client sends);
- JSON that is not an object → ``-32600`` ``Invalid Request: a message is a JSON object``;
- blank lines are skipped.

An object that is not a valid message is judged by :func:`refusal`: a request (``id`` and ``method``) is refused under
its id when usable; an object with no ``method``, ``result`` or ``error`` under a null id; an invalid notification or
what could be a response is not answered (nobody waits for it).

Numbers are parsed so that the tool, not the transport, judges them, and the log keeps them as the client wrote them:
a number no float can hold (``1e400``, an integer of thousands of digits) or JavaScript's ``-0`` becomes a
:class:`RawNumber`, which the registry's lossless check refuses with the reference's words. Other integers stay
exact Python ints.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, Final, NamedTuple

from dsh_todo.jsonutil import MAX_VALUE_DEPTH, dumps, dumps_bytes, nests_deeper

MAX_DEPTH: Final = MAX_VALUE_DEPTH
"""Deepest nesting a message may have (objects and arrays). Deeper is refused before anything walks it."""

TOO_DEEP: Final = f"Invalid Request: JSON nested deeper than {MAX_DEPTH} levels"

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600

NOT_A_REQUEST: Final = "Invalid Request: not a JSON-RPC 2.0 request"
NOT_A_MESSAGE: Final = "Invalid Request: not a JSON-RPC 2.0 message"


class Refusal(NamedTuple):
    """The error answer a line gets instead of being handed on: ``id`` (``None``: JSON-RPC's null), code, message."""

    id: Any
    code: int
    message: str


class RawNumber:
    """A JSON number no Python float can carry losslessly, kept as the client's text.

    Not a ``float`` (nor an ``int``), so the registry's lossless check refuses it, as the reference refuses the
    ``Infinity`` or ``-0`` that JavaScript makes of it; :func:`raw_json` writes :attr:`text` back
    unchanged.
    """

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"RawNumber({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RawNumber) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


def _float(text: str) -> Any:
    value = float(text)
    return RawNumber(text) if math.isinf(value) else value


def _int(text: str) -> Any:
    if text == "-0":
        return RawNumber(text)
    try:
        return int(text)
    except ValueError:  # more digits than int() converts (sys.get_int_max_str_digits): no float holds it either
        return RawNumber(text)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER: Final = json.JSONDecoder(parse_float=_float, parse_int=_int, parse_constant=_no_constant)
"""Made once: ``json.loads`` with hooks builds a decoder and its scanner for every line, which cost more than the
parse itself (10.3 against 4.5 µs for an MCP call of ten items)."""


def parse(text: str) -> Any:
    """One line of JSON text, numbers kept exact (:class:`RawNumber`); ``ValueError`` if it is not JSON,
    ``RecursionError`` if it nests beyond what the parser can follow. Exactly ``json.loads`` with the hooks,
    its refusal of a byte order mark included."""
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return _DECODER.decode(text)


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],:]|[^\s"{}\[\],:]+')


def scan_id(text: str) -> Any:
    """The top-level ``"id"`` of a message too deep or too long to parse, or ``None``: a token scan that only follows
    the nesting depth, so it neither recurses nor needs the message to be complete."""
    depth = 0
    expect_key = False
    after_id = 0  # 1: saw the top-level "id" key, 2: saw its colon
    for match in _TOKEN.finditer(text):
        token = match.group()
        if after_id == 2:
            if depth == 1 and token not in "{[":
                with contextlib.suppress(ValueError):
                    found = json.loads(token)
                    return found if usable_id(found) else None
            return None
        if token in "{[":
            depth += 1
            expect_key = token == "{" and depth == 1
        elif token in "}]":
            depth -= 1
        elif token == ",":
            expect_key = depth == 1
        elif token == ":":
            after_id = 2 if after_id == 1 else 0
            expect_key = False
        elif depth == 1 and expect_key and token == '"id"':
            after_id = 1
        elif depth == 1:
            expect_key = False
    return None


def usable_id(value: Any) -> bool:
    """Whether ``value`` can be a request's id here: a string or an integer (not ``null``, a float or a bool)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def check(line: bytes, *, cut: bool = False, max_line: int,
          parse: Callable[[str], Any] = parse) -> dict[str, Any] | Refusal | None:
    """One line from the client (without its newline; ``cut``: it was longer than ``max_line`` bytes and this is its
    head): the JSON object to hand on, the :class:`Refusal` to answer, or ``None`` for a blank line. ``parse`` reads
    the text (:func:`parse` by default: numbers kept exact; ``json.loads`` where nothing is logged verbatim)."""
    if cut:
        return Refusal(scan_id(line.decode("utf-8", "replace")), INVALID_REQUEST,
                       f"Invalid Request: a message longer than {max_line} bytes")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Refusal(None, PARSE_ERROR, f"Parse error: not UTF-8 (byte {exc.start})")
    if not text.strip():
        return None
    try:
        value = parse(text)
    except RecursionError:
        return Refusal(scan_id(text), INVALID_REQUEST, TOO_DEEP)
    except json.JSONDecodeError as exc:
        return Refusal(None, PARSE_ERROR, f"Parse error: {exc.msg} at column {exc.colno}")
    except ValueError as exc:
        return Refusal(None, PARSE_ERROR, f"Parse error: {exc}")
    if text.count("{") + text.count("[") > MAX_DEPTH and nests_deeper(value, MAX_DEPTH):
        # (fewer opening brackets than the limit, anywhere in the text, cannot nest deeper: no walk needed)
        return Refusal(request_id(value), INVALID_REQUEST, TOO_DEEP)
    if not isinstance(value, dict):
        return Refusal(None, INVALID_REQUEST, "Invalid Request: a message is a JSON object")
    return value


def request_id(value: Any) -> Any:
    """A message's ``id`` when it is usable as one (:func:`usable_id`), else ``None``."""
    found = value.get("id") if isinstance(value, dict) else None
    return found if usable_id(found) else None


def refusal(value: dict[str, Any]) -> Refusal | None:
    """The answer to a JSON object that is not a valid message: a request (it has ``id`` and ``method``) is refused
    under its id when that is usable; an object with no ``method``, ``result`` or ``error`` under a null id; an invalid
    notification, or what could be a response, gets none (JSON-RPC never answers them: nobody waits)."""
    if "id" in value and "method" in value:
        return Refusal(request_id(value), INVALID_REQUEST, NOT_A_REQUEST)
    if "method" not in value and not ("result" in value or "error" in value):
        return Refusal(None, INVALID_REQUEST, NOT_A_MESSAGE)
    return None


def plain_message(value: dict[str, Any]) -> dict[str, Any] | Refusal | None:
    """``value`` when it is a JSON-RPC 2.0 message as the specification writes it, else its :func:`refusal`: a request
    or notification has ``jsonrpc: "2.0"``, a string ``method``, ``params`` an object or an array when present, and a
    request a usable id; a response has a usable id and ``result`` or ``error``, not both."""
    if value.get("jsonrpc") == "2.0":
        if "method" in value:
            params_ok = "params" not in value or isinstance(value["params"], (dict, list))
            if isinstance(value["method"], str) and params_ok and ("id" not in value or usable_id(value["id"])):
                return value
        elif usable_id(value.get("id")) and ("result" in value) != ("error" in value):
            return value
    return refusal(value)


def read_line(source: BinaryIO, max_line: int) -> tuple[bytes, bool] | None:
    """The next line (without its newline) and whether it was cut at ``max_line`` bytes (the rest is skipped);
    ``None`` at the end of input."""
    line = source.readline(max_line + 1)
    if not line:
        return None
    if line.endswith(b"\n") or len(line) <= max_line:
        return line.rstrip(b"\r\n"), False
    while True:  # too long: skip to the end of the line without keeping it
        rest = source.readline(max_line)
        if not rest or rest.endswith(b"\n"):
            return _head(line, max_line), True


HEAD: Final = 4096
"""Bytes kept of a line longer than the limit: enough to find its id for the refusal."""


def _head(line: bytes, max_line: int) -> bytes:
    """What is kept of an over-long line: its first :data:`HEAD` bytes, never more than :func:`read_line` has read of
    it (``max_line + 1`` bytes), so both readers keep the same head whatever the two bounds are."""
    return line[:min(HEAD, max_line + 1)]


class Lines:
    """Splits what a pipe delivers into lines as :func:`read_line` reads them from a file: ``(line, cut)``, the line
    without its newline (trailing ``\\r`` too), ``cut`` when it was longer than ``max_line`` bytes (then only its
    first :data:`HEAD` bytes are kept, to find its id, and the rest is skipped). Holds at most one line's worth."""

    def __init__(self, max_line: int) -> None:
        self.max_line = max_line
        self._buffer = bytearray()
        self._head: bytes | None = None
        """The start of a line longer than the limit whose rest is being skipped."""

    def feed(self, data: bytes) -> list[tuple[bytes, bool]]:
        lines: list[tuple[bytes, bool]] = []
        max_line = self.max_line
        start = 0
        while start < len(data):
            end = data.find(b"\n", start)
            if self._head is not None:
                if end < 0:
                    break
                lines.append((self._head, True))
                self._head = None
            elif end < 0:
                self._buffer += data[start:]
                if len(self._buffer) > max_line:
                    self._head = _head(bytes(self._buffer), max_line)
                    self._buffer.clear()
                break
            else:
                if self._buffer:
                    self._buffer += data[start:end]
                    line = bytes(self._buffer)
                    self._buffer.clear()
                else:
                    line = data[start:end]
                lines.append((_head(line, max_line), True) if len(line) > max_line else (line.rstrip(b"\r\n"), False))
            start = end + 1
        return lines

    def end(self) -> list[tuple[bytes, bool]]:
        """The last line, when the input ended without a newline."""
        if self._head is not None:
            return [(self._head, True)]
        return [(bytes(self._buffer).rstrip(b"\r\n"), False)] if self._buffer else []


def raw_json(value: Any) -> str:
    """Compact JSON for a parsed value, :class:`RawNumber` and non-finite floats written as numbers the client could
    have sent (``1e400``), never as ``null``: the text ``tool/call`` records must parse back to what was sent."""
    try:
        text = dumps_bytes(value)
    except (TypeError, ValueError, RecursionError):  # a RawNumber, or nesting too deep for the encoders
        pass
    else:
        if b"null" not in text:  # a non-finite float is written as null: without any null, nothing was one
            return text.decode("utf-8")
    try:
        if not _has_unusual_number(value):
            return dumps(value)
    except RecursionError:
        pass
    return "".join(_raw_parts(value))


def _has_unusual_number(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, RawNumber) or (isinstance(item, float) and not math.isfinite(item)):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


def _raw_parts(value: Any) -> Iterator[str]:
    """The pieces of :func:`raw_json`'s text, depth-first without recursion."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, (_Literal, RawNumber)):
            yield item.text
        elif isinstance(item, float) and not math.isfinite(item):
            yield "1e400" if item > 0 else "-1e400"
        elif isinstance(item, dict):
            pieces: list[Any] = [_Literal("{")]
            for index, (key, child) in enumerate(item.items()):
                pieces += [_Literal(("," if index else "") + dumps(key) + ":"), child]
            stack.extend(reversed([*pieces, _Literal("}")]))
        elif isinstance(item, (list, tuple)):
            pieces = [_Literal("[")]
            for index, child in enumerate(item):
                pieces += [_Literal(","), child] if index else [child]
            stack.extend(reversed([*pieces, _Literal("]")]))
        else:
            yield dumps(item)


class _Literal:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text
