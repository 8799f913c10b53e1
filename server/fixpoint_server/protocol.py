"""The JSON-RPC edge of the server: every request gets an answer, whatever the client sends.

pygls 2 turns each incoming message into lsprotocol types while json decodes it (an object_hook); when
that fails - a hover at line -1 (Position.line is an LSP uinteger), a code action without a range, an
id that is a list - pygls raises from inside the decoder, logs two tracebacks and drops the message,
and the client waits forever for its answer. FixpointProtocol decodes the same way but answers such a
request with a JSON-RPC InvalidParams error naming the method and the field, and logs one line.

It also answers the protocol errors that handlers raise (an unknown command: InvalidParams; a request
after shutdown, or a notification sent with an id: InvalidRequest) without a traceback in the log,
and shuts down without pygls' own "dictionary changed size during iteration": pygls cancels the
pending requests while iterating over the dict that the cancelled requests' callbacks remove
themselves from. A body that is not JSON at all is answered with a ParseError (id null, as JSON-RPC
says) and logged as one line (`answer_parse_error`, `OneLineParseErrors`).
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import attrs
import cattrs
from cattrs.v import format_exception
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcInvalidRequest
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.json_rpc import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    MsgId,
)
from pygls.protocol.language_server import lsp_method

from quantcore import display

log = logging.getLogger(__name__)
PROBLEM_MAX_CHARS = 500
"""A client's bad params are quoted in the error this far (a 10 MB string stays out of the log)."""


@dataclass(frozen=True)
class Unreadable:
    """A message whose fields do not have the types the LSP gives them; answered, never dispatched."""

    id: Any
    method: Any
    problem: str
    invalid_request: bool = False
    """Not a request at all (a notification's method with an id): InvalidRequest, not InvalidParams."""
    jsonrpc: str = "2.0"


class FixpointProtocol(LanguageServerProtocol):
    """pygls' LSP protocol, answering what pygls drops (see the module docstring)."""

    def structure_message(self, data: dict[str, Any]) -> Any:
        """`data` as the lsprotocol type of its method, or Unreadable (pygls' own logs and raises)."""
        if "jsonrpc" not in data:
            return data  # a nested object: structured with the message that holds it
        try:
            kind = self._message_type(data)
            if "id" in data and "method" in data and not _has_id(kind):
                return Unreadable(data["id"], data["method"], "a notification, sent with an id", True)
            return self._converter.structure(data, kind)
        except Exception as exc:  # any shape a client can send must become an answer, not a dropped message
            return Unreadable(data.get("id"), data.get("method"), describe(exc))

    def _message_type(self, data: dict[str, Any]) -> Any:
        if "id" not in data:
            return self.get_message_type(data.get("method", "")) or JsonRPCNotification
        if "error" in data:
            return lsp.ResponseErrorMessage
        if "method" in data:
            return self.get_message_type(data["method"]) or JsonRPCRequestMessage
        return self._result_types.pop(data["id"], None) or JsonRPCResponseMessage

    def handle_message(self, message: Any) -> None:
        if isinstance(message, Unreadable):
            self._answer_unreadable(message)
        elif not hasattr(message, "jsonrpc"):  # valid JSON that is no message object: `[1, 2]`, `5`
            log.warning("ignored a message that is not a JSON-RPC object: %s", _shown(message))
        elif self._shutdown and _is_request(message) and message.method != lsp.EXIT:
            error = JsonRpcInvalidRequest(f"{message.method}: the server is shutting down")
            self._send_response(message.id, error=error.to_response_error())
        else:
            super().handle_message(message)

    def _answer_unreadable(self, message: Unreadable) -> None:
        method = message.method if isinstance(message.method, str) else None
        if message.id is None or not isinstance(message.id, (int, str)):
            log.warning("ignored %s: %s", _shown(method or "a message"), message.problem)
            return
        problem = f"{_shown(method)}: {message.problem}" if method else message.problem
        log.warning("answered request %s with an error: %s", _shown(message.id), problem)
        kind = JsonRpcInvalidRequest if message.invalid_request else JsonRpcInvalidParams
        error = kind(problem).to_response_error()
        if method is not None:
            self._send_response(message.id, error=error)
        elif (future := self._request_futures.pop(message.id, None)) is not None and not future.done():
            # the client's answer to our request; one cancelled meanwhile (shutdown) waits for nothing
            future.set_exception(JsonRpcException.from_error(error))

    def _handle_cancel_notification(self, msg_id: MsgId) -> None:
        if not isinstance(msg_id, (int, str)):  # lsprotocol lets a list through; it is no request's id
            log.warning("ignored $/cancelRequest of %s: no request has that id", _shown(msg_id))
            return
        super()._handle_cancel_notification(msg_id)

    def _send_handler_result(self, future: Future[Any], *, msg_id: MsgId) -> None:
        """A handler's protocol error (an unknown command) is an answer like any other: no traceback."""
        error = None if future.cancelled() else future.exception()
        if isinstance(error, JsonRpcException):
            self._request_futures.pop(msg_id, None)
            log.warning("answered request %s with an error: %s", _shown(msg_id), error)
            self._send_response(msg_id, error=error.to_response_error())
            return
        super()._send_handler_result(future, msg_id=msg_id)

    @lsp_method(lsp.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Generator[Any, Any, None]:
        """pygls' shutdown, iterating over a copy of the pending requests while it cancels them."""
        if (user_handler := self.fm.features.get(lsp.SHUTDOWN)) is not None:
            yield user_handler, args, None
        current_id = self.msg_id
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current_id and not future.done():
                future.cancel()
        self._shutdown = True
        return None


NOT_JSON = (ValueError, RecursionError)
"""What json.loads raises for a body that is no JSON (UnicodeDecodeError is a ValueError too)."""


def answer_parse_error(protocol: FixpointProtocol, error: Exception) -> None:
    """Reply to a message body that is not JSON: ParseError with id null (the id was not readable)."""
    log.warning("answered a message that is not JSON with ParseError: %s", describe(error))
    error_object = {"code": lsp.ErrorCodes.ParseError.value, "message": f"not JSON: {describe(error)}"}
    protocol._send_data({"jsonrpc": "2.0", "id": None, "error": error_object})  # lsprotocol drops a None id


class OneLineParseErrors(logging.Filter):
    """pygls logs a body that is not JSON with a traceback through json's decoder; the one line of
    answer_parse_error says all there is to say, so the record is dropped. Other failures to handle a
    message (a bug) keep their traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not (record.getMessage() == "Unable to handle message" and isinstance(error, NOT_JSON))


def describe(exc: Exception) -> str:
    """What was wrong with a message, with the JSON path: "Position.line should be in range
    [0:2147483647], but was -1 @ $.params.position"."""
    if isinstance(exc, cattrs.BaseValidationError):
        problems = cattrs.transform_error(exc, path="$", format_exception=_format)
        text = "; ".join(problems) or str(exc)
    else:
        text = f"{type(exc).__name__}: {exc}"
    return display.printable(display.shorten(text, PROBLEM_MAX_CHARS))


def _format(exc: BaseException, type_: Any) -> str:
    # cattrs says only "invalid value" for a validator's ValueError; its own text names the field and range
    if isinstance(exc, ValueError) and not isinstance(exc, cattrs.BaseValidationError) and str(exc):
        return str(exc)
    return format_exception(exc, type_)


def _has_id(kind: Any) -> bool:
    """Whether messages of the lsprotocol (or pygls) type `kind` carry an id: requests and responses."""
    return not attrs.has(kind) or "id" in attrs.fields_dict(kind)


def _is_request(message: Any) -> bool:
    return getattr(message, "id", None) is not None and isinstance(getattr(message, "method", None), str)


def _shown(value: Any) -> str:
    return display.quoted(value, limit=80)
