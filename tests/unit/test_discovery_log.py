"""A server that stays unreachable is warned about once per state, not per poll."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from skillop.model.serverkeys import ServerKey
from skillop.operator.discovery import Discovery
from skillop.operator.serverwatch import ServerWatch
from skillop.operator.settings import OperatorConfig
from skillop.operator.store import Store

URL = "http://docker-mcp.tools.svc:8080/mcp"


class _Reconciler:
    metrics = None

    def __init__(self) -> None:
        self.marked: list[set[Any]] = []

    def mark(self, keys: set[Any]) -> None:
        self.marked.append(keys)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "skillop.discovery" and r.levelno >= logging.WARNING]


def test_the_same_failure_on_every_poll_is_warned_once(
        caplog: pytest.LogCaptureFixture) -> None:
    discovery = Discovery(Store(), _Reconciler(), writer=None,  # type: ignore[arg-type]
                          config=OperatorConfig())
    watch = ServerWatch(ServerKey(URL), "streamable-http")
    caplog.set_level(logging.DEBUG, logger="skillop.discovery")
    unresolved = "cannot resolve host docker-mcp.tools.svc"
    for _ in range(5):
        discovery.failed(watch, "Unreachable", unresolved)
    assert _warnings(caplog) == [f"MCP discovery failed: {unresolved}"]
    discovery.failed(watch, "Timeout", "no answer within 10s")
    discovery.failed(watch, "Timeout", "no answer within 10s")
    assert _warnings(caplog)[1:] == ["MCP discovery failed: no answer within 10s"]
    # Every poll's failure is still there for whoever turns debug on.
    assert sum("MCP discovery failed" in r.getMessage() for r in caplog.records) == 7
