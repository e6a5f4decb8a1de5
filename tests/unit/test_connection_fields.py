"""One connection option, read where it is used: every connection field of an
MCP server is carried into the ToolSet's ``ServerEntry`` and into the listing's
key, unless declared out, and discovery hands the server's ``tls`` whole to the
transport (docs/architecture.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skillop.model import mcpserver
from skillop.model.mcpserver import (
    CONNECTION_FIELDS,
    SELECTION_FIELDS,
    STDIO_FIELDS,
    UNKEYED,
    McpServer,
)
from skillop.model.names import ObjectRef
from skillop.model.toolset import ServerEntry
from skillop.operator.mcpconnect import connection
from skillop.resolve.toolset import server_entry

SKILL = ObjectRef("team-a", "internal")
URL_SERVER: dict[str, Any] = {
    "name": "srv", "url": "https://Tools.svc:443/mcp", "transport": "sse",
    "headersFrom": {"secretRef": {"name": "token"}},
    "tls": {"caSecretRef": {"name": "ca", "key": "bundle.pem"}},
}
STDIO_SERVER: dict[str, Any] = {
    "name": "local", "command": ["run-mcp"], "args": ["--quiet"],
    "env": [{"name": "A", "value": "1"},
            {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
    "tools": [{"name": "build"}],
}


def test_every_field_of_a_server_is_declared_connection_or_selection() -> None:
    declared = [*CONNECTION_FIELDS, *SELECTION_FIELDS]
    assert sorted(declared) == sorted(McpServer.model_fields)
    assert len(set(declared)) == len(declared)
    assert set(UNKEYED) <= set(CONNECTION_FIELDS) and set(STDIO_FIELDS) <= set(CONNECTION_FIELDS)


def test_the_toolset_entry_has_a_field_for_every_connection_field() -> None:
    assert set(CONNECTION_FIELDS) <= set(ServerEntry.model_fields)


@pytest.mark.parametrize("spec", [URL_SERVER, STDIO_SERVER], ids=["url", "stdio"])
def test_the_entry_carries_each_connection_field_as_written(spec: dict[str, Any]) -> None:
    server = McpServer.model_validate(spec)
    entry = server_entry(SKILL, server)
    written = server.model_dump(mode="json", by_alias=True, exclude_none=True)
    carried = entry.model_dump(mode="json", by_alias=True, exclude_none=True)
    for name in CONNECTION_FIELDS:
        alias = McpServer.model_fields[name].alias or name
        if name == "transport" or (name in STDIO_FIELDS) != (server.url is None):
            continue
        assert carried.get(alias) == written.get(alias), name
    assert carried["transport"] == server.effective_transport
    # A field of the other kind of server is not in the set at all.
    other = {"command", "args", "env"} if server.url else {"url", "headersFrom", "tls"}
    assert not other & carried.keys()


class _Future(McpServer):
    """A server with a connection option that does not exist yet."""

    region: str | None = None


def test_a_new_connection_field_enters_the_listing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mcpserver, "CONNECTION_FIELDS", (*CONNECTION_FIELDS, "region"))
    plain = _Future.model_validate(URL_SERVER).discovery_key("team-a")
    east = _Future.model_validate({**URL_SERVER, "region": "east"}).discovery_key("team-a")
    west = _Future.model_validate({**URL_SERVER, "region": "west x"}).discovery_key("team-a")
    assert plain is not None and east is not None and west is not None
    assert len({plain, east, west}) == 3 and len({plain.text, east.text, west.text}) == 3
    assert east.options == (("region", '"east"'),)
    assert east == _Future.model_validate({**URL_SERVER, "region": "east"}).discovery_key("team-a")
    # Spaces in a value are encoded: where the URL starts is never in doubt.
    assert west.text.endswith(" https://tools.svc/mcp") and west.text.count(" ") == 3


def test_a_field_declared_unkeyed_stays_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mcpserver, "CONNECTION_FIELDS", (*CONNECTION_FIELDS, "region"))
    monkeypatch.setattr(mcpserver, "UNKEYED", {**UNKEYED, "region": "for the test"})
    assert (_Future.model_validate({**URL_SERVER, "region": "east"}).discovery_key("team-a")
            == _Future.model_validate(URL_SERVER).discovery_key("team-a"))


NAMES = st.sampled_from(["a", "b"])


@given(st.fixed_dictionaries({
    "url": st.sampled_from(["https://x.svc/mcp", "https://X.svc:443/mcp", "https://y.svc/mcp"]),
    "transport": st.sampled_from(["sse", "streamable-http"]),
    "headersFrom": st.none() | NAMES.map(lambda n: {"secretRef": {"name": n}}),
    "tls": st.none() | st.tuples(st.sampled_from(["caConfigMapRef", "caSecretRef"]), NAMES)
    .map(lambda t: {t[0]: {"name": t[1]}}),
}), st.sampled_from(["team-a", "team-b"]))
def test_todays_keys_are_what_they_were(spec: dict[str, Any], namespace: str) -> None:
    # Every connection setting there is today has a slot of its own in the key.
    server = McpServer.model_validate({"name": "s", **{k: v for k, v in spec.items() if v}})
    key = server.discovery_key(namespace)
    assert key is not None and key.options == () and key.tls == server.tls
    assert key.url == server.endpoint


class _Reader:
    async def read_secret(self, ref: ObjectRef) -> Mapping[str, str]:
        return {"bundle.pem": "SERVER PEM"} if ref.name == "ca" else {"Authorization": "x"}

    async def read_configmap(self, ref: ObjectRef) -> Mapping[str, object] | None:
        return None


def test_discovery_hands_the_servers_tls_whole_to_the_transport() -> None:
    server = McpServer.model_validate(URL_SERVER)
    key = server.discovery_key("team-a")
    assert key is not None
    conn = asyncio.run(connection(key, reader=_Reader(), configmaps={}, ca_file=None))
    assert conn.trust.tls is server.tls and conn.trust.ca_bundles == ("SERVER PEM",)
