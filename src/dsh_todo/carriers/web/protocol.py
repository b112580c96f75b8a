"""The web carrier's envelopes (SPEC §6.3): requests in, responses and push frames out, all as exact bytes.

A request body is ``{"type":"client-request","rpcId":…,"method":…,"payload":{…}}``; its answer is
``{"type":"server-response","rpcId":<echo>,"result":{"ok":true,"value":…}}`` or, on failure,
``{"ok":false,"error":{"code","message","details"}}``. Push frames go out over SSE as
``{"type":"server-request","rpcId":<fresh uuid>,"method":<frame type>,"payload":<frame>}``. Every byte is written by
:func:`dsh_todo.jsonutil.dumps_bytes`, the project's one canonical encoder.

Everything a request names is validated here before any other code sees it: a session id is a bounded string without
control characters, sequence numbers are plain integers, and a body is bounded in size.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from dsh_todo.harness.errors import InputError
from dsh_todo.ids import random_uuid
from dsh_todo.jsonutil import dumps_bytes, loads

MAX_BODY_BYTES: Final = 64 * 1024
"""Largest request body accepted; a history request is a few hundred bytes."""

MAX_SESSION_ID_CHARS: Final = 256
MAX_RPC_ID_CHARS: Final = 128
DEFAULT_MAX_MESSAGES: Final = 200
MAX_MAX_MESSAGES: Final = 2000

_BAD_ID_CHARS = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")


class RpcError(InputError):
    """A failed request: ``code`` and ``message`` reach the client inside the error envelope (an
    :class:`~dsh_todo.harness.errors.InputError`: the client sent something this server cannot serve)."""

    def __init__(self, code: str, message: str, *, status: int = 400, details: Mapping[str, Any] | None = None,
                 rpc_id: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.details: dict[str, Any] = dict(details or {})
        self.rpc_id = rpc_id

    def body(self) -> bytes:
        return error_response(self.rpc_id, self.code, self.message, self.details)


def too_large(limit: int = MAX_BODY_BYTES) -> RpcError:
    return RpcError("payload-too-large", f"request body exceeds the {limit}-byte limit", status=413,
                    details={"limit": limit})


def ok_response(rpc_id: str | None, value: Any) -> bytes:
    return dumps_bytes({"type": "server-response", "rpcId": rpc_id, "result": {"ok": True, "value": value}})


def error_response(rpc_id: str | None, code: str, message: str, details: Mapping[str, Any] | None = None) -> bytes:
    return dumps_bytes({"type": "server-response", "rpcId": rpc_id,
                        "result": {"ok": False, "error": {"code": code, "message": message,
                                                          "details": dict(details or {})}}})


def push_frame(frame: Mapping[str, Any]) -> bytes:
    """One SSE message carrying ``frame`` in the ``server-request`` envelope, ending with the blank line."""
    envelope = {"type": "server-request", "rpcId": random_uuid(), "method": frame["type"], "payload": frame}
    return b"data: " + dumps_bytes(envelope) + b"\n\n"


CONNECTED: Final = b": connected\n\n"
"""The comment line every mux stream opens with."""


def parse_request(body: bytes, method: str) -> tuple[str, dict[str, Any]]:
    """``(rpcId, payload)`` of a ``client-request`` for ``method``; raises :class:`RpcError` naming what is wrong."""
    try:
        message = loads(body)
    except ValueError:
        raise RpcError("invalid-request", "request body is not JSON") from None
    if not isinstance(message, dict):
        raise RpcError("invalid-request", "request body must be a JSON object")
    rpc_id = message.get("rpcId")
    if not isinstance(rpc_id, str) or not 0 < len(rpc_id) <= MAX_RPC_ID_CHARS or _BAD_ID_CHARS.search(rpc_id):
        raise RpcError("invalid-request", f"rpcId must be a string of 1 to {MAX_RPC_ID_CHARS} printable characters")
    if message.get("type") != "client-request":
        raise RpcError("invalid-request", 'type must be "client-request"', rpc_id=rpc_id)
    if message.get("method") != method:
        raise RpcError("invalid-request", f'method must be "{method}" on this endpoint', rpc_id=rpc_id)
    payload = message.get("payload", {})
    if not isinstance(payload, dict):
        raise RpcError("invalid-request", "payload must be an object", rpc_id=rpc_id)
    return rpc_id, payload


def session_id_of(value: Any, *, rpc_id: str | None = None) -> str:
    """A session id from a request: a string of 1–256 characters with no control characters or lone surrogates.

    Ids reach the filesystem only through the store's segment encoding, which escapes every other character, so this
    bound is about sanity (no log spam, no terminal escapes), not about path safety.
    """
    if not isinstance(value, str) or not 0 < len(value) <= MAX_SESSION_ID_CHARS or _BAD_ID_CHARS.search(value):
        raise RpcError("invalid-request",
                       f"sessionId must be a string of 1 to {MAX_SESSION_ID_CHARS} characters without control "
                       "characters", rpc_id=rpc_id)
    return value


def int_field(payload: Mapping[str, Any], key: str, *, minimum: int, maximum: int | None = None,
              rpc_id: str | None = None) -> int | None:
    """An optional integer field (booleans and floats refused)."""
    if key not in payload or payload[key] is None:
        return None
    value = payload[key]
    if type(value) is not int or value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f"at least {minimum}"
        raise RpcError("invalid-request", f"{key} must be an integer {bound}", rpc_id=rpc_id)
    return value


def int_param(text: str | None, key: str, *, minimum: int) -> int | None:
    """An optional integer query parameter."""
    if text is None or text == "":
        return None
    if not re.fullmatch(r"-?[0-9]{1,18}", text):
        raise RpcError("invalid-request", f"{key} must be an integer")
    value = int(text)
    if value < minimum:
        raise RpcError("invalid-request", f"{key} must be at least {minimum}")
    return value
