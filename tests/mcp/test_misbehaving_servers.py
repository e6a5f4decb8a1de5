"""Servers that misbehave: every failure is one bounded line with the right reason.

A broken deployment, a login page, a proxy's error page, something that is not
HTTP at all: discovery must say so in one line naming the reason, within its
timeout, and the SDK's own tracebacks and log lines must reach neither the
CLI's stderr nor the log (they are relayed as DEBUG records only).
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bad_servers import Behaviour, CannedServer, self_signed_tls

from skillop.sources.egress import EgressGuard
from skillop.sources.mcp_discovery import DiscoveryError, DiscoveryLimits, McpTransport, one_line
from skillop.sources.mcp_session import _SDK_LOGGERS, list_tools

pytestmark = pytest.mark.timeout(60)

SKILLOP = str(Path(sys.executable).with_name("skillop"))
LOCAL = EgressGuard(["127.0.0.1"])
LIMITS = DiscoveryLimits(connect_timeout=1.0, total_timeout=2.0)
MAX_LINE = 2048 + 400  # URL (capped) + reason + the capped detail

# (behaviour, transport, reason, a word the message must contain)
CASES = [
    (Behaviour.HANG, "streamable-http", "Timeout", "in time"),
    (Behaviour.HANG, "sse", "Timeout", "in time"),
    (Behaviour.STATUS_500, "streamable-http", "HTTPError", "HTTP 500"),
    (Behaviour.STATUS_500, "sse", "HTTPError", "HTTP 500"),
    (Behaviour.GARBAGE_JSON, "streamable-http", "ProtocolError", "JSON-RPC"),
    (Behaviour.GARBAGE_JSON, "sse", "ProtocolError", "not an SSE endpoint"),
    (Behaviour.HTML, "streamable-http", "ProtocolError", "text/html"),
    (Behaviour.HTML, "sse", "ProtocolError", "not an SSE endpoint"),
    (Behaviour.RAW_BYTES, "streamable-http", "ProtocolError", "not valid HTTP"),
    (Behaviour.RAW_BYTES, "sse", "ProtocolError", "not valid HTTP"),
    (Behaviour.SSE_SILENCE, "streamable-http", "Timeout", "in time"),
    (Behaviour.SSE_SILENCE, "sse", "Timeout", "in time"),
    (Behaviour.REDIRECT, "streamable-http", "Redirected", "login.example.com"),
    (Behaviour.REDIRECT, "sse", "Redirected", "login.example.com"),
    (Behaviour.NOT_FOUND, "streamable-http", "HTTPError", "transport: sse"),
    (Behaviour.METHOD_NOT_ALLOWED, "streamable-http", "HTTPError", "transport: sse"),
    (Behaviour.NOT_FOUND, "sse", "HTTPError", "transport: streamable-http"),
    (Behaviour.METHOD_NOT_ALLOWED, "sse", "HTTPError", "transport: streamable-http"),
]


def _path(transport: str) -> str:
    return "/sse" if transport == "sse" else "/mcp"


def _fail(url: str, transport: McpTransport) -> DiscoveryError:
    with pytest.raises(DiscoveryError) as caught:
        asyncio.run(list_tools(url, transport=transport, guard=LOCAL, limits=LIMITS))
    return caught.value


def _client_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """Records that reach the root logger (the operator's log, the CLI's last resort).

    pytest also hooks its handler onto non-propagating loggers, so the SDK's own
    records show up in ``caplog``; they stop there in a real process.
    """
    return [r for r in caplog.records
            if not r.name.startswith(("uvicorn", "mcp.server", *_SDK_LOGGERS))]


def test_sdk_loggers_do_not_propagate() -> None:
    for name in _SDK_LOGGERS:
        assert logging.getLogger(name).propagate is False


@pytest.mark.parametrize(("behaviour", "transport", "reason", "word"), CASES,
                         ids=[f"{c[0].value}-{c[1]}" for c in CASES])
def test_one_line_right_reason_bounded_time(
        behaviour: Behaviour, transport: McpTransport, reason: str, word: str,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with CannedServer(behaviour) as server:
        started = time.monotonic()
        error = _fail(server.url(_path(transport)), transport)
        elapsed = time.monotonic() - started
    assert error.reason == reason, str(error)
    assert word in str(error)
    text = str(error)
    assert "\n" not in text and "\r" not in text and len(text) <= MAX_LINE
    assert elapsed < LIMITS.total_timeout + 2.0
    # The SDK's account of the failure is DEBUG detail, one line, without a traceback.
    loud = [r for r in _client_records(caplog) if r.levelno > logging.DEBUG or r.exc_info]
    assert loud == [], [r.getMessage() for r in loud]


def test_self_signed_tls_is_a_tls_error() -> None:
    with CannedServer(Behaviour.HTML, tls=self_signed_tls()) as server:
        error = _fail(server.url(), "streamable-http")
    assert error.reason == "TLSError"
    assert "not trusted" in str(error) and "--ca-file" in str(error)


def _cli(url: str, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run([SKILLOP, "discover", url, "--allow", "127.0.0.1", "--timeout", "2",
                           *args], capture_output=True, text=True, timeout=60, check=False)
    return done, time.monotonic() - started


CLI_CASES = [
    (Behaviour.HANG, "streamable-http", "Timeout"),
    (Behaviour.STATUS_500, "streamable-http", "HTTPError"),
    (Behaviour.GARBAGE_JSON, "streamable-http", "ProtocolError"),
    (Behaviour.GARBAGE_JSON, "sse", "ProtocolError"),
    (Behaviour.HTML, "streamable-http", "ProtocolError"),
    (Behaviour.HTML, "sse", "ProtocolError"),
    (Behaviour.RAW_BYTES, "streamable-http", "ProtocolError"),
    (Behaviour.SSE_SILENCE, "streamable-http", "Timeout"),
    (Behaviour.REDIRECT, "streamable-http", "Redirected"),
]


@pytest.mark.parametrize(("behaviour", "transport", "reason"), CLI_CASES,
                         ids=[f"{c[0].value}-{c[1]}" for c in CLI_CASES])
def test_cli_prints_exactly_one_line(behaviour: Behaviour, transport: str, reason: str) -> None:
    with CannedServer(behaviour) as server:
        done, elapsed = _cli(server.url(_path(transport)), "--transport", transport)
    # A server that does not answer is an outage (3); one that answers wrongly, 1.
    assert done.returncode == (3 if reason == "Timeout" else 1)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert f"({reason})" in lines[0] and "Traceback" not in done.stderr
    assert elapsed < 2 + 20  # the timeout, plus a generous interpreter start on a busy machine


def test_cli_tls_error_is_one_line() -> None:
    with CannedServer(Behaviour.HTML, tls=self_signed_tls()) as server:
        done, _ = _cli(server.url())
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "(TLSError)" in done.stderr


@pytest.mark.parametrize("text", ["a\nb", "a\r\n\tb", "a\x00b\x1bc", "a\u2028b", "  a  "])
def test_one_line_collapses_control_characters(text: str) -> None:
    flat = one_line(text)
    assert flat.isprintable() and flat.startswith("a") and not flat.endswith(" ")


def test_one_line_caps_length() -> None:
    assert len(one_line("x" * 10_000)) == 300
    assert one_line("x" * 10_000).endswith("...")
    error = DiscoveryError("ProtocolError", "http://a.svc/mcp", "line one\nline two" * 500)
    assert "\n" not in str(error) and len(error.detail) <= 300
