"""The front's answers written by the HTTP protocol itself (gateway/direct.py), seen on
the wire: pipelined requests answered in order, a body sent in pieces or chunked,
``connection: close`` and HTTP/1.0 honoured, a request the front does not answer
still served by the SDK on the same connection, between direct answers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from gatewaykit import serving
from mcp_servers import ServerHandle, make_tool

pytestmark = pytest.mark.timeout(60)

_MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
           "io.modelcontextprotocol/clientInfo": {"name": "by-hand", "version": "0"},
           "io.modelcontextprotocol/clientCapabilities": {}}


@pytest.fixture
def upstream() -> Iterator[ServerHandle]:
    with ServerHandle(tools=[make_tool("echo")]) as srv:
        yield srv


def _call(ident: int, text: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": {
        "name": "echo", "arguments": {"text": text}, "_meta": _MODERN}}).encode()


def _head(body: bytes, *, extra: str = "", length: bool = True, version: str = "1.1") -> bytes:
    return (f"POST /mcp HTTP/{version}\r\nhost: HOST\r\ncontent-type: application/json\r\n"
            "accept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\n"
            "mcp-method: tools/call\r\nmcp-name: echo\r\n" + extra
            + (f"content-length: {len(body)}\r\n" if length else "") + "\r\n").encode()


def _answers(data: bytes) -> list[tuple[int, dict[str, str], Any]]:
    """The HTTP answers in ``data``, in order: status, headers, JSON body."""
    out = []
    while data:
        head, _, data = data.partition(b"\r\n\r\n")
        status_line, *lines = head.decode().split("\r\n")
        headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
        length = int(headers["content-length"])
        body, data = data[:length], data[length:]
        out.append((int(status_line.split()[1]), headers, json.loads(body)))
    return out


async def _exchange(url: str, pieces: list[bytes], *, answers: int) -> tuple[bytes, int, bool]:
    """Send ``pieces`` (a pause between them; HOST is the gateway's) and read until
    ``answers`` answers are in; what came, in how many reads, and whether the
    server closed afterwards."""
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    stream = await anyio.connect_tcp("127.0.0.1", port)
    async with stream:
        for piece in pieces:
            await stream.send(piece.replace(b"HOST", b"127.0.0.1:%d" % port))
            await anyio.sleep(0.05)
        data, reads, closed = b"", 0, False
        with anyio.fail_after(10):
            while data.count(b"HTTP/1.") < answers or not _complete(data, answers):
                data += await stream.receive()
                reads += 1
            with anyio.move_on_after(0.3):
                try:
                    more = await stream.receive()
                    data += more
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    closed = True
    return data, reads, closed


def _complete(data: bytes, answers: int) -> bool:
    try:
        return len(_answers(data)) >= answers
    except (ValueError, KeyError, IndexError):
        return False


def _text(body: dict[str, Any]) -> str:
    """The ``text`` argument the echo tool was called with, from its answer."""
    return str(json.loads(body["result"]["content"][0]["text"])["arguments"]["text"])


def _texts(data: bytes) -> list[str]:
    return [_text(body) for _, _, body in _answers(data)]


def test_direct_answers_on_the_wire(tmp_path: Path, upstream: ServerHandle) -> None:
    async def main() -> dict[str, tuple[bytes, int, bool]]:
        out = {}
        async with serving(tmp_path, upstream) as gateway:
            url = gateway.url
            one, two, three = _call(1, "a"), _call(2, "b"), _call(3, "c")
            out["one"] = await _exchange(url, [_head(one) + one], answers=1)
            out["pipelined"] = await _exchange(
                url, [_head(one) + one + _head(two) + two + _head(three) + three], answers=3)
            out["in pieces"] = await _exchange(
                url, [_head(one) + one[:10], one[10:30], one[30:]], answers=1)
            chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(two), two)
            out["chunked"] = await _exchange(
                url, [_head(two, extra="transfer-encoding: chunked\r\n", length=False) + chunked],
                answers=1)
            out["close"] = await _exchange(
                url, [_head(one, extra="connection: close\r\n") + one], answers=1)
            out["http/1.0"] = await _exchange(url, [_head(one, version="1.0") + one], answers=1)
            listing = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/list",
                                  "params": {"_meta": _MODERN}}).encode()
            bogus = json.dumps({"jsonrpc": "2.0", "id": 8, "method": "bogus/method",
                                "params": {"_meta": _MODERN}}).encode()
            out["mixed"] = await _exchange(url, [
                _head(bogus).replace(b"mcp-method: tools/call", b"mcp-method: bogus/method")
                + bogus + _head(one) + one + _head(listing).replace(
                    b"mcp-method: tools/call\r\nmcp-name: echo", b"mcp-method: tools/list")
                + listing], answers=3)
        return out

    out = anyio.run(main)
    data, _, closed = out["one"]
    ((status, headers, body),) = _answers(data)
    assert (status, body["id"], _text(body)) == (200, 1, "a")
    assert not closed  # kept alive
    assert "date" in headers and headers["content-type"] == "application/json"
    assert _texts(out["pipelined"][0]) == ["a", "b", "c"]  # in the order asked
    assert _texts(out["in pieces"][0]) == ["a"]
    assert _texts(out["chunked"][0]) == ["b"]  # by the app, as before
    data, _, closed = out["close"]
    assert _answers(data)[0][1]["connection"] == "close" and closed
    data, _, closed = out["http/1.0"]
    assert _answers(data)[0][1]["connection"] == "close" and closed
    (bogus_answer, call_answer, list_answer) = _answers(out["mixed"][0])
    assert bogus_answer[2]["id"] == 8 and bogus_answer[2]["error"]["code"] == -32601
    assert _text(call_answer[2]) == "a"
    assert [t["name"] for t in list_answer[2]["result"]["tools"]] == ["echo"]
