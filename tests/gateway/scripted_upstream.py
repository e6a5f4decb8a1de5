"""A streamable-HTTP MCP upstream written by hand, whose answers a test scripts:
the headers (and status) of its ``initialize`` and ``tools/call`` answers, the
``initialize`` result itself and its listing, for what the SDK's servers would never send
(an echoed credential in a header, a result that does not validate).

By default it lists one tool, ``echo``, as ``gatewaykit.echo_tool("echo", ...)``
declares it; it runs in a thread of the test's process (uvicorn on 127.0.0.1).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import uvicorn

TOOL = {"name": "echo", "description": "Tool echo",
        "inputSchema": {"type": "object", "properties": {}}}
JSON = {"content-type": "application/json"}


@dataclass
class Script:
    """How each method is answered: the status and headers (JSON by default)."""

    initialize: tuple[int, Mapping[str, str]] = (200, JSON)
    call: tuple[int, Mapping[str, str]] = (200, JSON)
    #: Merged into the ``initialize`` result (e.g. a field that does not validate).
    initialize_result: dict[str, Any] = field(default_factory=dict)
    #: What ``tools/list`` lists.
    tools: list[dict[str, Any]] = field(default_factory=lambda: [TOOL])


class ScriptedUpstream:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.calls = 0
        #: Each ``tools/call``'s request headers and ``params._meta``, as received.
        self.seen: list[tuple[dict[str, str], dict[str, Any]]] = []
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        self._server = uvicorn.Server(uvicorn.Config(self._app, log_level="error",
                                                     lifespan="off", interface="asgi3"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        daemon=True)

    def __enter__(self) -> ScriptedUpstream:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            assert time.monotonic() < deadline, "the scripted upstream did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(10)

    def _answer(self, message: dict[str, Any]) -> tuple[int, Mapping[str, str], bytes]:
        method, params = message.get("method"), message.get("params") or {}
        if "id" not in message:
            return 202, {}, b""
        if method == "initialize":
            status, headers = self.script.initialize
            result: dict[str, Any] = {
                "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                "capabilities": {"tools": {}}, "serverInfo": {"name": "scripted", "version": "0"},
                **self.script.initialize_result}
            headers = {**headers, "mcp-session-id": "s1"}
        elif method == "tools/call":
            self.calls += 1
            status, headers = self.script.call
            result = {"content": [{"type": "text", "text": "pong"}]}
        else:
            status, headers = 200, JSON
            result = {"tools": self.script.tools} if method == "tools/list" else {}
        return status, headers, json.dumps({"jsonrpc": "2.0", "id": message["id"],
                                            "result": result}).encode()

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        while True:
            event = await receive()
            body += event.get("body", b"")
            if not event.get("more_body"):
                break
        if scope["method"] != "POST":
            status, headers, payload = 405, {}, b""
        else:
            message = json.loads(body)
            if message.get("method") == "tools/call":
                self.seen.append(({k.decode("latin-1"): v.decode("latin-1")
                                   for k, v in scope["headers"]},
                                  (message.get("params") or {}).get("_meta") or {}))
            status, headers, payload = self._answer(message)
        await send({"type": "http.response.start", "status": status,
                    "headers": [(k.encode("latin-1"), v.encode("latin-1"))
                                for k, v in headers.items()]})
        await send({"type": "http.response.body", "body": payload})
