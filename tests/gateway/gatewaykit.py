"""The gateway under test, as the pod runs it: a `skillop gateway` process reading a
kubelet-style volume, with the official SDK's client as the agent.

* `Volume`: a directory updated the way kubelet updates ConfigMap and Secret
  volumes (files in a timestamped directory, `..data` swapped atomically, one
  top-level symlink per key);
* `toolset_files`: the ToolSet and Agent Skill bodies the real resolver writes for
  an actor (the ConfigMap's data);
* `GatewayProcess`: `skillop gateway --listen 127.0.0.1:0` with its stdout (audit)
  and stderr captured;
* `agent`: an initialized SDK `ClientSession` to the gateway, over HTTP or stdio.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp.client.session import ClientSession, ElicitationFnT, MessageHandlerFnT
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from skillkit import actor, resolve_actor, skill

from skillop.resolve.toolset import configmap_data

SKILLOP = str(Path(sys.executable).parent / "skillop")


class Volume:
    """A directory kubelet manages: `write` swaps the whole content at once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self._generation = 0

    def write(self, data: Mapping[str, str | bytes]) -> None:
        """The volume's files become ``data``'s keys (bytes: a ``binaryData`` key)."""
        self._generation += 1
        stamp = f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}.{self._generation}.{time.time_ns()}"
        target = self.root / stamp
        target.mkdir()
        for key, value in data.items():
            if isinstance(value, bytes):
                (target / key).write_bytes(value)
            else:
                (target / key).write_text(value)
        old = os.readlink(self.root / "..data") if (self.root / "..data").is_symlink() else None
        tmp = self.root / "..data_tmp"
        os.symlink(stamp, tmp)
        os.rename(tmp, self.root / "..data")  # the atomic swap
        for key in data:
            link = self.root / key
            if not link.is_symlink():
                os.symlink(f"..data/{key}", link)
        for entry in self.root.iterdir():
            if (entry.is_symlink() and not entry.name.startswith("..")
                    and entry.name not in data):
                entry.unlink()
        if old is not None:
            for stale in (self.root / old).iterdir():
                stale.unlink()
            (self.root / old).rmdir()


def toolset_files(docs: Iterable[Any], actor: str) -> dict[str, str]:
    """The Actor ConfigMap's data, as the operator writes it."""
    resolution = resolve_actor(list(docs), actor)
    return configmap_data(resolution.text, resolution.tools)


def echo_tool(name: str, server: str) -> dict[str, Any]:
    """A declared MCP tool equal to what `mcp_servers.make_tool(name)` serves."""
    return {"name": name, "description": f"Tool {name}",
            "inputSchema": {"type": "object", "properties": {}}}


class GatewayProcess:
    """`skillop gateway` as a child process; `url` once it serves."""

    def __init__(self, toolset: Path, secrets: Path, *extra: str,
                 env: Mapping[str, str] | None = None) -> None:
        self.args = [SKILLOP, "gateway", "--toolset-dir", str(toolset), "--secrets-dir",
                     str(secrets), "--listen", "127.0.0.1:0", "--allow", "127.0.0.1:*",
                     "--poll", "0.1", *extra]
        self.env = {**os.environ, **(env or {})}
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self.url = ""
        self._proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> GatewayProcess:
        self._proc = subprocess.Popen(self.args, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, env=self.env)
        threading.Thread(target=self._pump, args=(self._proc.stdout, self.stdout),
                         daemon=True).start()
        threading.Thread(target=self._pump, args=(self._proc.stderr, self.stderr),
                         daemon=True).start()
        deadline = time.monotonic() + 30
        while not self.url:
            for line in list(self.stderr):
                if " at http://" in line:
                    self.url = line.rsplit(" at ", 1)[1].strip()
            if time.monotonic() > deadline or self._proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"gateway did not start: {''.join(self.stderr)}")
            time.sleep(0.02)
        return self

    @staticmethod
    def _pump(stream: Any, sink: list[str]) -> None:
        for line in stream:
            sink.append(line)

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def audit(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout if line.strip()]

    def wait_audit(self, count: int, timeout: float = 10) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while len(self.audit()) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.audit()

    def logs(self) -> str:
        return "".join(self.stdout) + "".join(self.stderr)


@asynccontextmanager
async def agent(url: str, *, elicitation: ElicitationFnT | None = None,
                on_message: MessageHandlerFnT | None = None,
                timeout: float = 30) -> AsyncIterator[ClientSession]:
    """The SDK client, as an agent would hold it, connected to the gateway over HTTP
    (``timeout``: how long it waits for any answer, a call's result included)."""
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(httpx2.AsyncClient(timeout=timeout))
        read, write = await stack.enter_async_context(
            streamable_http_client(url, http_client=http))
        session = await stack.enter_async_context(ClientSession(
            read, write, elicitation_callback=elicitation, message_handler=on_message))
        await session.initialize()
        yield session


def call_once(url: str, name: str, arguments: dict[str, Any] | None = None,
              ) -> types.CallToolResult:
    """One call of ``name`` by a fresh agent session (connect, initialize, call)."""
    async def call() -> types.CallToolResult:
        async with agent(url) as session:
            result: types.CallToolResult = await session.call_tool(name, arguments or {})
            return result

    return anyio.run(call)


@asynccontextmanager
async def stdio_agent(toolset: Path, secrets: Path, errlog: Any,
                      *extra: str) -> AsyncIterator[ClientSession]:
    """The SDK client running `skillop gateway --stdio` as its server process."""
    params = StdioServerParameters(
        command=SKILLOP,
        args=["gateway", "--stdio", "--toolset-dir", str(toolset), "--secrets-dir",
              str(secrets), "--allow", "127.0.0.1:*", "--poll", "0.1", *extra],
        # The SDK passes a few variables only: PYTHONPATH names the source under test.
        env=dict(os.environ))
    async with AsyncExitStack() as stack:
        read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        yield session


@asynccontextmanager
async def serving(tmp_path: Path, upstream: Any, *, tools: list[dict[str, Any]] | None = None,
                  disclosure: dict[str, Any] | None = None,
                  callers: dict[str, Any] | None = None, audit: io.StringIO | None = None,
                  server: dict[str, Any] | None = None,
                  spec: dict[str, Any] | None = None, **options: Any) -> AsyncIterator[Any]:
    """A `Gateway` in this process serving HTTP on a free port, its set ``tools``
    (default: `echo`) of `upstream` (a `mcp_servers.ServerHandle`), audit lines written
    to ``audit`` (default: dropped); ``disclosure``, ``callers``: the Actor's, and
    ``spec`` any more of its spec's fields; ``server``: more fields of the
    upstream's ``mcpServers`` entry."""
    Volume(tmp_path / "tools").write(toolset_files([
        skill("srv", mcpServers=[{"name": "up", "url": upstream.url,
                                  "tools": tools or [echo_tool("echo", "up")],
                                  **(server or {})}]),
        # These tests ask the client (elicitation, input-required); approval by a
        # ToolCallApproval is the real-API tier's (tests/realapi/test_realapi_approvals.py).
        actor("dev", skills=["srv"], approval={"via": "Elicitation"},
              **({"disclosure": disclosure} if disclosure else {}),
              **({"callers": callers} if callers else {}), **(spec or {}))],
        "team-a/dev"))
    async with gateway_on(tmp_path, audit=audit, poll_interval=0.05, **options) as gateway:
        yield gateway


@asynccontextmanager
async def gateway_on(tmp_path: Path, *, audit: Any = None, **options: Any) -> AsyncIterator[Any]:
    """A `Gateway` in this process serving HTTP on a free port the set already laid out
    in ``tmp_path / "tools"``, audit lines written to ``audit`` (default: dropped)."""
    from skillop.gateway.audit import AuditLog
    from skillop.gateway.options import Options
    from skillop.gateway.server import Gateway

    (tmp_path / "secrets").mkdir(exist_ok=True)
    gateway = Gateway(Options.build(toolset_dir=tmp_path / "tools",
                                    secrets_dir=tmp_path / "secrets",
                                    allow=("127.0.0.1:*",), **options),
                      audit=AuditLog(lambda: audit or io.StringIO()))
    async with gateway.running(), anyio.create_task_group() as tasks:
        tasks.start_soon(gateway.serve_http, "127.0.0.1", 0)
        with anyio.fail_after(10):
            while gateway.url is None:
                await anyio.sleep(0.01)
        try:
            yield gateway
        finally:
            tasks.cancel_scope.cancel()


async def handshake(http: httpx2.AsyncClient, url: str,
                    more: Mapping[str, str] | None = None) -> dict[str, str]:
    """A session opened by hand (``more`` headers on every request, such as a caller's
    token): the headers a request in it carries."""
    headers = {"accept": "application/json, text/event-stream",
               "content-type": "application/json", **(more or {})}
    opened = await http.post(url, headers=headers, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "by-hand", "version": "0"}}})
    headers |= {"mcp-session-id": opened.headers["mcp-session-id"],
                "mcp-protocol-version": "2025-11-25"}
    ready = await http.post(url, headers=headers,
                            json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert ready.status_code == 202
    return headers


def text_of(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


NODE_CLIENTS = Path(__file__).with_name("node")


def node_clients() -> Path:
    """``tests/gateway/node`` installed (``npm ci``, the pinned lock file) in a cache
    directory named after the lock file; skips the test when npm is not installed."""
    from npmkit import installed_or_skip

    return installed_or_skip(NODE_CLIENTS, "node-clients",
                             needed_for="the TypeScript SDK and the MCP Inspector CLI")


def fastmcp_answering(action: str, asked: list[str]) -> Any:
    """A fastmcp elicitation handler that records each prompt in ``asked`` and answers
    ``action`` (accept approves; decline or cancel as fastmcp says them)."""
    import fastmcp

    async def elicit(message: str, response_type: Any, params: Any, context: Any) -> Any:
        asked.append(message)
        if action == "accept":
            return {"approve": True}
        return fastmcp.client.elicitation.ElicitResult(action=action)
    return elicit
