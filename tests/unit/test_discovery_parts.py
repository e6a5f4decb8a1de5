"""The pure parts of discovery: a server's Listing, first acceptance of a pinned
server, what a connection reads from the cluster, and the Actors' warnings."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

import pytest

from skillop.model.manifest import ConfigMapData, Meta
from skillop.model.names import ObjectRef
from skillop.model.serverkeys import CaSource, ServerKey
from skillop.model.status import McpServerStatus
from skillop.operator import pinning
from skillop.operator.listing import Listing
from skillop.operator.mcpconnect import CABundleMissing, connection
from skillop.operator.servernotes import actor_warnings
from skillop.operator.serverwatch import ServerWatch, failure
from skillop.sources.mcp_tools import McpToolInfo, info_digest, tools_digest

T0, T1 = "2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z"
BUILD = McpToolInfo("build", "Build an image")
PUSH = McpToolInfo("push", "Push it")
URL = "https://docker.tools.svc/mcp"


def test_last_sync_moves_only_when_the_list_does() -> None:
    first = Listing().succeeded((BUILD,), watched=False, skipped=(), changes=(), now=T0)
    assert (first.tool_count, first.last_sync, first.tools_digest) == (
        1, T0, tools_digest((BUILD,)))
    same = first.succeeded((BUILD,), watched=True, skipped=(), changes=(), now=T1)
    assert (same.last_sync, same.watched) == (T0, True)
    grown = same.succeeded((BUILD, PUSH), watched=True, skipped=(), changes=(), now=T1)
    assert (grown.last_sync, grown.tool_count) == (T1, 2)


def test_a_restart_over_an_unchanged_list_keeps_the_recorded_last_sync() -> None:
    recorded = McpServerStatus(name="docker", last_sync=T0, tools_digest=tools_digest((BUILD,)))
    after = Listing.recorded(recorded).succeeded((BUILD,), watched=False, skipped=(),
                                                 changes=(), now=T1)
    assert after.last_sync == T0
    assert Listing.recorded(None) == Listing()


def test_a_failure_keeps_the_last_good_list_and_a_success_clears_it() -> None:
    good = Listing().succeeded((BUILD,), watched=True, skipped=("bad name",), changes=(),
                               now=T0)
    failed = good.failed("Unreachable", "connection refused")
    assert (failed.tool_count, failed.tools_digest, failed.skipped) == (
        1, good.tools_digest, ("bad name",))
    assert (failed.error, failed.reason, failed.watched) == (
        "connection refused", "Unreachable", False)
    healed = failed.succeeded((BUILD,), watched=False, skipped=(), changes=(), now=T1)
    assert (healed.error, healed.reason, healed.last_sync) == (None, None, T0)


def test_first_acceptance_after_a_restart_takes_only_what_the_status_recorded() -> None:
    changed = McpToolInfo("build", "Build and push an image")
    assert pinning.first_accepted((BUILD, PUSH), None) == (BUILD, PUSH)
    recorded = {"build": info_digest(BUILD), "push": info_digest(PUSH)}
    assert pinning.first_accepted((changed, PUSH), recorded) == (PUSH,)
    state = pinning.pin_state((PUSH,), (changed, PUSH))
    assert dict(state.digests) == {"push": info_digest(PUSH)}
    assert state.violations == (f"build: new tool {info_digest(changed)} not accepted",)


class _Reader:
    def __init__(self, secrets: Mapping[ObjectRef, Mapping[str, str]],
                 configmaps: Mapping[ObjectRef, Mapping[str, object]]) -> None:
        self.secrets, self.configmaps = secrets, configmaps

    async def read_secret(self, ref: ObjectRef) -> Mapping[str, str]:
        if ref not in self.secrets:
            raise LookupError(f"secret {ref} not found")
        return self.secrets[ref]

    async def read_configmap(self, ref: ObjectRef) -> Mapping[str, object] | None:
        return self.configmaps.get(ref)


AUTH = ObjectRef("team-a", "docker-auth")
CA = ObjectRef("team-a", "corp-ca")


def test_a_connection_reads_headers_and_every_ca_bundle(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text("OPERATOR PEM")
    reader = _Reader({AUTH: {"Authorization": "Bearer t"}},
                     {CA: {"data": {"ca.crt": "SERVER PEM"}}})
    key = ServerKey(URL, AUTH, CaSource("ConfigMap", CA, "ca.crt"))
    conn = asyncio.run(connection(key, reader=reader, configmaps={},
                                  ca_file=str(tmp_path / "ca.pem")))
    assert dict(conn.headers) == {"Authorization": "Bearer t"}
    assert conn.trust.ca_bundles == ("OPERATOR PEM", "SERVER PEM")
    # A bundle the store holds is not read from the API.
    held = {CA: ConfigMapData(Meta("team-a", "corp-ca"), {"ca.crt": "HELD PEM"})}
    conn = asyncio.run(connection(key, reader=_Reader({AUTH: {}}, {}), configmaps=held,
                                  ca_file=None))
    assert conn.trust.ca_bundles == ("HELD PEM",)


@pytest.mark.parametrize(("key", "ca_file", "message"), [
    (ServerKey(URL, None, CaSource("ConfigMap", CA, "ca.crt")), None,
     "tls: ConfigMap team-a/corp-ca has no key ca.crt"),
    (ServerKey(URL, None, CaSource("Secret", CA, "ca.crt")), None,
     "tls: Secret team-a/corp-ca cannot be read (LookupError)"),
    (ServerKey(URL), "/nonexistent/ca.pem",
     "the operator's CA file /nonexistent/ca.pem cannot be read (FileNotFoundError)"),
])
def test_a_bundle_that_cannot_be_read_is_one_line(key: ServerKey, ca_file: str | None,
                                                  message: str) -> None:
    with pytest.raises(CABundleMissing) as err:
        asyncio.run(connection(key, reader=_Reader({}, {CA: {"data": {}}}), configmaps={},
                               ca_file=ca_file))
    assert str(err.value) == message
    assert failure(URL, err.value) == (
        "TLSError", f"MCP discovery at {URL} failed (TLSError): {message}")


def test_a_header_secret_that_cannot_be_read_fails_the_listing_in_one_line() -> None:
    with pytest.raises(LookupError) as err:
        asyncio.run(connection(ServerKey(URL, AUTH), reader=_Reader({}, {}), configmaps={},
                               ca_file=None))
    assert failure(URL, err.value) == (
        "DiscoveryFailed", "LookupError: secret team-a/docker-auth not found")


def test_warnings_name_each_reached_skill_and_skip_pinned_changes() -> None:
    skill_a, skill_b = ObjectRef("team-a", "a"), ObjectRef("team-a", "b")
    key = ServerKey(URL)
    watch = ServerWatch(key, "streamable-http", users={(skill_a, "docker"), (skill_b, "d")})
    watch.state = Listing(error="MCP discovery failed", skipped=("tool 'x y': bad name",),
                          changes=(("build", ("description",)),))
    warnings = actor_warnings({key: watch}, {skill_a, skill_b}, {(skill_b, "d")})
    assert warnings == [
        "MCP server docker of skill team-a/a: MCP discovery failed; using the last good tool"
        " list (or the declared tools before any success)",
        "MCP server d of skill team-a/b: MCP discovery failed; using the last good tool"
        " list (or the declared tools before any success)",
        "ToolDefinitionChanged: tool build of MCP server docker (skill team-a/a) changed"
        " description",
        "MCP server docker of skill team-a/a: tool 'x y': bad name",
        "MCP server d of skill team-a/b: tool 'x y': bad name",
    ]
    assert actor_warnings({key: watch}, {ObjectRef("team-a", "other")}, set()) == []
