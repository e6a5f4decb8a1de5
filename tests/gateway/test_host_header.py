"""A request with more than one Host header is answered 400 (RFC 9110, 7.2) on every
way the gateway's HTTP front serves: its fast path and the SDK's apps behind it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from gatewaykit import serving
from mcp_servers import ServerHandle, make_tool

_BODY = (b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":'
         b'{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
         b'"io.modelcontextprotocol/clientCapabilities":{}}}}')


@pytest.fixture
def upstream() -> Iterator[ServerHandle]:
    with ServerHandle(tools=[make_tool("echo")]) as srv:
        yield srv


def _request(port: int, hosts: list[str], *, method: str = "POST", path: str = "/mcp") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", *(f"host: {host}" for host in hosts),
             "content-type: application/json", "accept: application/json, text/event-stream",
             "mcp-protocol-version: 2026-07-28", "mcp-method: tools/list",
             f"content-length: {len(_BODY)}", "connection: close"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + _BODY


async def _exchange(port: int, request: bytes) -> bytes:
    stream = await anyio.connect_tcp("127.0.0.1", port)
    async with stream:
        await stream.send(request)
        answer = b""
        with anyio.fail_after(10):
            try:
                while True:
                    answer += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                pass
    return answer


@pytest.mark.parametrize("fast_path", [True, False])
def test_two_host_headers_are_answered_400(tmp_path: Path, upstream: ServerHandle,
                                           fast_path: bool) -> None:
    async def main() -> list[bytes]:
        async with serving(tmp_path, upstream, fast_path=fast_path) as gateway:
            assert gateway.url is not None
            port = int(gateway.url.rsplit(":", 1)[1].split("/")[0])
            own = f"127.0.0.1:{port}"
            return [await _exchange(port, request) for request in (
                _request(port, [own]),
                _request(port, [own, own]),
                _request(port, [own, "elsewhere.example"]),
                _request(port, [own, own], method="GET", path="/other"),
            )]

    one, same_twice, two, elsewhere = anyio.run(main)
    assert one.startswith(b"HTTP/1.1 200 "), one[:200]
    for answer in (same_twice, two, elsewhere):
        assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
        assert answer.endswith(b"more than one Host header")
