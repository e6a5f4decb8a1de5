"""The gateway's HTTP protocol subclasses uvicorn internals (``gateway.uvicorn_private``):
the check run when that module is imported passes on the installed uvicorn and
names what is missing on one that changed."""

from __future__ import annotations

from typing import Any

import pytest
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from pinkit import installed_within_pin
from skillop.gateway.uvicorn_private import IncompatibleUvicorn, check


def test_the_installed_uvicorn_is_the_minor_pyproject_pins() -> None:
    installed_within_pin("uvicorn")


def test_the_installed_uvicorn_has_everything_the_gateway_relies_on() -> None:
    check()


def test_a_protocol_without_the_task_hook_is_named() -> None:
    class Renamed(HttpToolsProtocol):
        _start_asgi_task = None  # type: ignore[assignment]

    with pytest.raises(IncompatibleUvicorn, match=r"HttpToolsProtocol|Renamed") as raised:
        check(protocol=Renamed)
    assert "no method '_start_asgi_task'" in str(raised.value)
    assert "uvicorn " in str(raised.value) and "pyproject.toml" in str(raised.value)


def test_a_hook_with_other_parameters_is_named() -> None:
    class Changed(HttpToolsProtocol):
        def _start_asgi_task(self, task: Any) -> None:  # type: ignore[override]
            return None

    with pytest.raises(IncompatibleUvicorn, match=r"Changed\._start_asgi_task takes \(task\),"
                                                  r" not \(cycle, app\)"):
        check(protocol=Changed)


def test_a_cycle_without_an_attribute_it_read_is_named() -> None:
    class Cycle:
        def __init__(self) -> None:
            self.scope: dict[str, Any] = {}

        async def run_asgi(self, app: Any) -> None:
            return None

        async def send_500_response(self) -> None:
            return None

    with pytest.raises(IncompatibleUvicorn, match="Cycle has no attribute 'body'"):
        check(cycle=Cycle)
