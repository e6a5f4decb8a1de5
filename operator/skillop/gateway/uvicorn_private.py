"""Every part of uvicorn's private API the gateway relies on, in one place.

The gateway's HTTP protocol is uvicorn's httptools one with a request deadline
and a head bound (``deadline``) and, on the fast path, answers written before any
ASGI app runs (``direct``). Both subclass uvicorn internals and read its request
cycle's state; none of it is uvicorn's public API, so a new uvicorn may change
it without notice (``pyproject.toml`` pins uvicorn to the minor this was written
against). ``check`` verifies, when this module is imported (before the gateway
serves anything), that every class, method (with its parameters) and attribute
used is there, and fails with one line naming what is missing.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Final

import uvicorn
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import (
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)

__all__ = ["STATUS_LINE", "HttpToolsProtocol", "IncompatibleUvicorn", "RequestResponseCycle",
           "check"]

_Methods = dict[str, tuple[str, ...]]

#: Methods overridden or called, with the parameters they are called with.
_PROTOCOL_METHODS: Final[_Methods] = {
    "connection_made": ("transport",), "data_received": ("data",),
    "connection_lost": ("exc",), "on_message_begin": (), "on_headers_complete": (),
    "on_message_complete": (), "_start_asgi_task": ("cycle", "app"),
}
#: Attributes read of a protocol (set by its own code).
_PROTOCOL_ATTRIBUTES: Final = ("transport", "loop", "cycle", "pipeline", "tasks", "flow",
                               "config")
_CYCLE_METHODS: Final[_Methods] = {"run_asgi": ("app",), "send_500_response": ()}
_CYCLE_ATTRIBUTES: Final = (
    "scope", "body", "more_body", "disconnected", "message_event", "flow", "logger",
    "response_started", "response_complete", "waiting_for_100_continue", "keep_alive",
    "default_headers", "access_log", "on_response")
_FLOW_METHODS: Final[_Methods] = {"drain": (), "resume_reading": ()}
_FLOW_ATTRIBUTES: Final = ("write_paused",)
_CONFIG_ATTRIBUTES: Final = ("reset_contextvars",)


class IncompatibleUvicorn(RuntimeError):
    """The installed uvicorn lacks something the gateway's protocol relies on."""


def check(protocol: type = HttpToolsProtocol, cycle: type = RequestResponseCycle,
          flow: type = FlowControl, config: type = uvicorn.Config) -> None:
    """Raise ``IncompatibleUvicorn`` naming the first missing piece (the classes are
    parameters so that a test can hand in an incompatible one)."""
    missing = next(_missing(protocol, cycle, flow, config), None)
    if missing is not None:
        raise IncompatibleUvicorn(
            f"uvicorn {uvicorn.__version__} is not the one skillop's gateway was written"
            f" for: {missing} (skillop.gateway.deadline and skillop.gateway.direct rely"
            " on it; install the uvicorn version pyproject.toml pins)")


def _missing(protocol: type, cycle: type, flow: type, config: type) -> Iterator[str]:
    if not (isinstance(STATUS_LINE, dict) and isinstance(STATUS_LINE.get(200), bytes)):
        yield "httptools_impl.STATUS_LINE is no map of status codes to status lines"
    for cls, methods, attributes in (
            (protocol, _PROTOCOL_METHODS, _PROTOCOL_ATTRIBUTES),
            (cycle, _CYCLE_METHODS, _CYCLE_ATTRIBUTES),
            (flow, _FLOW_METHODS, _FLOW_ATTRIBUTES),
            (config, _Methods(), _CONFIG_ATTRIBUTES)):
        yield from _missing_methods(cls, methods)
        known = _assigned(cls)
        yield from (f"{cls.__name__} has no attribute {name!r}" for name in attributes
                    if name not in known and not hasattr(cls, name))


def _missing_methods(cls: type, methods: _Methods) -> Iterator[str]:
    for name, parameters in methods.items():
        method = getattr(cls, name, None)
        if not callable(method):
            yield f"{cls.__name__} has no method {name!r}"
            continue
        has = tuple(inspect.signature(method).parameters)[1:]  # after self
        if has[:len(parameters)] != parameters:
            yield (f"{cls.__name__}.{name} takes ({', '.join(has)}), not"
                   f" ({', '.join(parameters)})")


def _assigned(cls: type) -> set[str]:
    """The attribute names the class's own code reads or sets (``self.x = ...``)."""
    names: set[str] = set()
    for klass in cls.__mro__:
        for value in vars(klass).values():
            code = getattr(value, "__code__", None)
            if code is not None:
                names.update(code.co_names)
    return names


check()
