"""The mounts are read once per change: the gateway's start reads and parses the set
once, and polling an unchanged volume never parses it again (at 5,000 tools a parse
costs over a second of the event loop's time)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from gatewaykit import Volume, echo_tool, toolset_files
from skillkit import actor, skill

from skillop.gateway import served as served_module
from skillop.gateway.mount import Mounts
from skillop.gateway.options import Options
from skillop.gateway.served import ServedSet

ACTOR = "team-a/dev"


def _files(url: str, *tools: str) -> dict[str, str]:
    return toolset_files([skill("srv", mcpServers=[{
        "name": "up", "url": url, "tools": [echo_tool(name, "up") for name in tools]}]),
        actor("dev", skills=["srv"], disclosure={"mode": "Search"})], ACTOR)


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every parse of a ToolSet document, by the path it was read from."""
    seen: list[str] = []
    parse = served_module.parse_served_set

    def counted(raw: bytes | str, **kwargs: object) -> ServedSet:
        seen.append(str(kwargs.get("path")))
        return parse(raw, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(served_module, "parse_served_set", counted)
    yield seen


def _options(tmp_path: Path, *, poll: float = 1.0) -> tuple[Options, Volume]:
    volume = Volume(tmp_path / "tools")
    (tmp_path / "secrets").mkdir()
    options = Options.build(toolset_dir=volume.root, secrets_dir=tmp_path / "secrets",
                            allow=("127.0.0.1:9",), poll_interval=poll, semantic_search=False)
    return options, volume


def test_a_set_is_parsed_once_and_not_again_until_the_volume_changes(
        tmp_path: Path, parses: list[str]) -> None:
    options, volume = _options(tmp_path)
    volume.write(_files("http://127.0.0.1:9/mcp", "echo", "other"))
    mounts = Mounts(options, lambda line: None)
    first = mounts.read_if_changed(ServedSet.empty())
    assert first is not None and set(first.tools) == {"echo", "other"}
    # The set read has upstreams the empty set had not: that is no change of the mounts.
    assert mounts.read_if_changed(first) is None
    assert mounts.read_if_changed(first) is None
    assert len(parses) == 1
    volume.write(_files("http://127.0.0.1:9/mcp", "echo"))
    second = mounts.read_if_changed(first)
    assert second is not None and set(second.tools) == {"echo"}
    assert mounts.read_if_changed(second) is None
    assert len(parses) == 2


def test_reading_a_set_does_not_build_its_search_tables(tmp_path: Path) -> None:
    options, volume = _options(tmp_path)
    volume.write(_files("http://127.0.0.1:9/mcp", "echo", "other"))
    served = Mounts(options, lambda line: None).read_if_changed(ServedSet.empty())
    assert served is not None and served.search is not None
    assert not served.search.built
    assert served.search.find("echo", limit=1).matches[0][0] == "echo"
    assert served.search.built


def test_the_gateway_parses_its_set_once_across_polls(tmp_path: Path,
                                                      parses: list[str]) -> None:
    from skillop.gateway.audit import AuditLog
    from skillop.gateway.server import Gateway

    options, volume = _options(tmp_path, poll=0.02)
    volume.write(_files("http://127.0.0.1:9/mcp", "echo"))
    gateway = Gateway(options, audit=AuditLog(lambda: io.StringIO()))

    async def main() -> None:
        async with gateway.running():
            await anyio.sleep(0.5)  # about 25 polls

    anyio.run(main)
    assert set(gateway.served.tools) == {"echo"}
    assert len(parses) == 1
