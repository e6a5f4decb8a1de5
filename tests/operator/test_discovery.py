"""Live MCP discovery (API Semantics 9): the real operator, the emulated API, real MCP servers.

The operator reads SKILLOP_MCP_ALLOW (127.0.0.1 allowed) and a long
SKILLOP_MCP_REFRESH_SECONDS (600) from the environment set in conftest, so any
change seen within a test's timeout came from a list_changed notification, a
Skill's own ``refreshInterval`` or a Skill change, never from the default poll.
"""

from __future__ import annotations

import base64
import json
import logging
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
import skillkit
from mcp_servers import ServerHandle, make_tool
from operatorkit import Cluster, operator, wait_for

from skillop.model.toolset import TOOLS_KEY, default_configmap_name

NS = "disc"
TIMEOUT = 15.0


@pytest.fixture
def ns(running: Cluster) -> Iterator[Cluster]:
    running.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    yield running


def skill(name: str, *servers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A Skill of this test's namespace naming ``servers`` (skillkit's manifest)."""
    return skillkit.skill(name, NS, description=f"skill {name}", mcpServers=list(servers),
                          **spec)


def actor(name: str, *skills: str) -> dict[str, Any]:
    return skillkit.actor(name, NS, skills=skills)


def report(line: str) -> None:
    # kopf's runner (click's CliRunner) swaps sys.stdout while the operator runs.
    print(f"\n{line}", file=sys.__stdout__, flush=True)


def cm_tools(cluster: Cluster, actor_name: str) -> set[str] | None:
    cm = cluster.configmap(NS, default_configmap_name(actor_name))
    if cm is None:
        return None
    return {t["name"] for t in json.loads(cm.data[TOOLS_KEY])["tools"]}


def wait_tools(cluster: Cluster, actor_name: str, expected: set[str],
               timeout: float = TIMEOUT) -> None:
    wait_for(lambda: cm_tools(cluster, actor_name) == expected, timeout=timeout,
             message=f"ConfigMap of {actor_name} lists {sorted(expected)}"
                     f" (has {cm_tools(cluster, actor_name)})")


def discovered(cluster: Cluster, skill_name: str) -> dict[str, Any] | None:
    status = cluster.get("Skill", NS, skill_name).get("status") or {}
    return next((c for c in status.get("conditions", []) if c["type"] == "Discovered"), None)


def wait_discovered(cluster: Cluster, skill_name: str, value: str,
                    timeout: float = TIMEOUT) -> dict[str, Any]:
    return wait_for(lambda: (c := discovered(cluster, skill_name)) and c["status"] == value and c,
                    timeout=timeout, message=f"Skill {skill_name} Discovered={value}")


def test_discovered_tools_reach_the_configmap_and_list_changed_updates_it(ns: Cluster) -> None:
    with ServerHandle(tools=[make_tool("alpha"), make_tool("beta")], list_changed=True) as srv:
        ns.apply(skill("live", {"name": "srv", "url": srv.url,
                                "tools": [{"name": "declared_only"}]}))
        ns.apply(actor("agent", "live"))
        # The live list, not the declared one.
        wait_tools(ns, "agent", {"alpha", "beta"})
        ns.wait_ready("Actor", NS, "agent")
        cond = wait_discovered(ns, "live", "True")
        assert cond["reason"] == "Discovered"
        status = wait_for(lambda: (s := ns.get("Skill", NS, "live")["status"])
                          .get("mcpServers", [{}])[0].get("lastSync") and s, timeout=TIMEOUT)
        server = status["mcpServers"][0]
        assert server["name"] == "srv" and server["toolCount"] == 2
        assert server["url"] == srv.url and "error" not in server
        assert status["toolCount"] == 2

        # A change announced with list_changed arrives without any poll (refresh: 600 s).
        listed = srv.count("tools/list")
        wait_for(lambda: srv._sessions, timeout=TIMEOUT, message="the watch session is open")
        start = time.monotonic()
        srv.set_tools([make_tool("alpha"), make_tool("gamma")])
        wait_tools(ns, "agent", {"alpha", "gamma"})
        latency = time.monotonic() - start
        report(f"list_changed -> ConfigMap update: {latency * 1000:.0f} ms")
        assert srv.count("tools/list") > listed
        wait_for(lambda: ns.get("Actor", NS, "agent")["status"]["toolCount"] == 2
                 and {t["name"] for t in ns.get("Actor", NS, "agent")["status"]["tools"]}
                 == {"alpha", "gamma"}, timeout=TIMEOUT)


def test_skill_change_relists_a_watched_server_shared_by_two_skills(ns: Cluster) -> None:
    with ServerHandle(tools=[make_tool("first")], list_changed=True) as srv:
        ns.apply(skill("one", {"name": "srv", "url": srv.url}))
        ns.apply(skill("two", {"name": "srv", "url": srv.url}))
        ns.apply(actor("both", "one"))
        wait_tools(ns, "both", {"first"})
        wait_discovered(ns, "two", "True")
        # A change the server does not announce: only the Skill change can reveal it.
        srv.set_tools([make_tool("first"), make_tool("second")], notify=False)
        ns.patch_spec("Skill", NS, "two", {"description": "changed"})
        wait_tools(ns, "both", {"first", "second"})


def test_server_without_list_changed_is_polled_at_the_skill_refresh_interval(
        ns: Cluster) -> None:
    # 10s is the shortest refreshInterval a Skill may ask for (docs/security.md).
    with ServerHandle(tools=[make_tool("one")], list_changed=False) as srv:
        ns.apply(skill("polled", {"name": "srv", "url": srv.url}, refreshInterval="10s"))
        ns.apply(actor("poller", "polled"))
        wait_tools(ns, "poller", {"one"})
        srv.set_tools([make_tool("one"), make_tool("two")], notify=False)
        start = time.monotonic()
        wait_tools(ns, "poller", {"one", "two"}, timeout=TIMEOUT + 10)
        report(f"poll (refreshInterval 10s) -> ConfigMap update: "
               f"{(time.monotonic() - start) * 1000:.0f} ms")
        assert srv.count("notifications/tools/list_changed") == 0
        wait_for(lambda: ns.get("Skill", NS, "polled")["status"]["mcpServers"][0]["toolCount"]
                 == 2, timeout=TIMEOUT)


def test_stateless_server_announcing_list_changed_is_polled(ns: Cluster) -> None:
    """A stateless server (SDK ``stateless_http``) announces listChanged, opens no stream.

    Its first listing is not held up by a wait for a stream, and a tool added on
    the server reaches the Actor's ConfigMap within refreshInterval (10 s, the
    least allowed) plus a few seconds, although no notification ever comes.
    """
    with ServerHandle(tools=[make_tool("one")], list_changed=True, stateless=True) as srv:
        start = time.monotonic()
        ns.apply(skill("stateless", {"name": "srv", "url": srv.url}, refreshInterval="10s"))
        ns.apply(actor("scaled", "stateless"))
        wait_tools(ns, "scaled", {"one"})
        report(f"stateless server first listing -> ConfigMap: "
               f"{(time.monotonic() - start) * 1000:.0f} ms")
        srv.set_tools([make_tool("one"), make_tool("added")], notify=False)
        changed = time.monotonic()
        wait_tools(ns, "scaled", {"one", "added"}, timeout=10 + 6)
        report(f"stateless server change -> ConfigMap (refreshInterval 10s): "
               f"{(time.monotonic() - changed) * 1000:.0f} ms")
        assert not any(r.method == "GET" for r in srv.requests)


def test_server_down_keeps_last_good_tools_and_recovers(
        cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    # On a watched server the refresh interval bounds the quiet time between pings;
    # with the operator's default at 1s (a Skill may not ask for less than 10s),
    # the outage shows within about a second.
    monkeypatch.setenv("SKILLOP_MCP_REFRESH_SECONDS", "1")
    srv = ServerHandle(tools=[make_tool("sturdy")], list_changed=True).start()
    try:
        with operator():
            cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
            _outage_and_recovery(cluster, srv)
    finally:
        srv.stop()


def _outage_and_recovery(ns: Cluster, srv: ServerHandle) -> None:
    ns.apply(skill("fragile", {"name": "srv", "url": srv.url}))
    ns.apply(actor("survivor", "fragile"))
    wait_tools(ns, "survivor", {"sturdy"})
    wait_discovered(ns, "fragile", "True")
    # The ConfigMap is written before the Actor's status: wait for both.
    good = wait_for(lambda: ns.get("Actor", NS, "survivor").get("status", {}).get("toolsHash"),
                    timeout=TIMEOUT, message="the survivor's status")

    srv.stop()
    cond = wait_discovered(ns, "fragile", "False")
    assert cond["reason"] != "Discovered" and cond["message"].startswith("srv: ")
    server = ns.get("Skill", NS, "fragile")["status"]["mcpServers"][0]
    assert server["error"] and server["toolCount"] == 1
    warned = wait_for(lambda: (s := ns.get("Actor", NS, "survivor")["status"])
                      .get("warnings") and s, timeout=TIMEOUT,
                      message="the Actor warns about the failing server")
    assert any("MCP server srv" in w and "last good" in w for w in warned["warnings"])
    ready = ns.ready("Actor", NS, "survivor")
    assert ready is not None and ready["status"] == "True"
    assert warned["toolsHash"] == good
    assert cm_tools(ns, "survivor") == {"sturdy"}

    srv.start()  # same port
    wait_discovered(ns, "fragile", "True", timeout=30)
    wait_for(lambda: not ns.get("Actor", NS, "survivor")["status"].get("warnings"),
             timeout=TIMEOUT, message="the warning is gone")
    assert "error" not in ns.get("Skill", NS, "fragile")["status"]["mcpServers"][0]
    assert ns.get("Actor", NS, "survivor")["status"]["toolsHash"] == good


def test_disallowed_url_uses_declared_tools(ns: Cluster) -> None:
    ns.apply(skill("outside", {"name": "ext", "url": "http://example.com/mcp",
                               "tools": [{"name": "declared_a"}, {"name": "declared_b"}]}))
    ns.apply(actor("local", "outside"))
    cond = wait_discovered(ns, "outside", "False")
    assert cond["reason"] == "URLNotAllowed"
    assert "allow-list" in cond["message"]
    wait_tools(ns, "local", {"declared_a", "declared_b"})
    ns.wait_ready("Actor", NS, "local")
    server = ns.get("Skill", NS, "outside")["status"]["mcpServers"][0]
    assert server["toolCount"] == 2 and "lastSync" not in server


SECRET_VALUE = "Bearer s3cr3t-t0ken-9f8e7d"
ENV_SECRET_VALUE = "ghp_envS3cretValue0123456789"


def test_secret_headers_are_sent_and_never_written(ns: Cluster,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)  # everything anyone logs, the SDK's debug lines included
    ns.core.create_namespaced_secret(NS, {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "mcp-auth", "namespace": NS},
        "data": {"Authorization": base64.b64encode(SECRET_VALUE.encode()).decode()}})
    ns.core.create_namespaced_secret(NS, {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tool-env", "namespace": NS},
        "data": {"token": base64.b64encode(ENV_SECRET_VALUE.encode()).decode()}})
    srv = ServerHandle(tools=[make_tool("private")], list_changed=True).start()
    try:
        stdio = {"name": "local", "command": ["gh-mcp"], "tools": [{"name": "gh_issue"}],
                 "env": [{"name": "GH_TOKEN",
                          "valueFrom": {"secretKeyRef": {"name": "tool-env", "key": "token"}}}]}
        ns.apply(skill("authed", {"name": "srv", "url": srv.url,
                                  "headersFrom": {"secretRef": {"name": "mcp-auth"}}},
                       stdio, refreshInterval="10s"))
        ns.apply(actor("holder", "authed"))
        wait_tools(ns, "holder", {"private", "gh_issue"})
        wait_discovered(ns, "authed", "True")
        assert srv.requests and all(r.headers.get("authorization") == SECRET_VALUE
                                    for r in srv.requests)
        # The env Secret travels as the reference it is.
        doc = json.loads(ns.configmap(NS, default_configmap_name("holder")).data[TOOLS_KEY])
        local = next(s for s in doc["mcpServers"] if s["name"] == "local")
        assert local["env"] == [{"name": "GH_TOKEN", "valueFrom": {
            "secretKeyRef": {"name": "tool-env", "key": "token"}}}]
        assert_secret_nowhere(ns, caplog.text)
        # An error message is no leak either.
        srv.stop()
        wait_discovered(ns, "authed", "False")
        wait_for(lambda: ns.get("Actor", NS, "holder")["status"].get("warnings"),
                 timeout=TIMEOUT)
        assert_secret_nowhere(ns, caplog.text)
    finally:
        srv.stop()


def assert_secret_nowhere(cluster: Cluster, logs: str) -> None:
    api = cluster.handle.api_client
    dumped = [api.sanitize_for_serialization(cluster.core.list_namespaced_config_map(NS)),
              api.sanitize_for_serialization(cluster.core.list_namespaced_event(NS))]
    for plural in ("skills", "actors", "tools"):
        dumped.append(cluster.custom.list_namespaced_custom_object(
            "skillop.dev", "v1alpha1", NS, plural))
    text = json.dumps(dumped)
    assert "private" in text  # the listing is what we think it is
    assert "skillop" in logs and "authed" in logs  # the operator's logs were captured
    for needle in (SECRET_VALUE, "s3cr3t-t0ken-9f8e7d", ENV_SECRET_VALUE,
                   base64.b64encode(SECRET_VALUE.encode()).decode(),
                   base64.b64encode(ENV_SECRET_VALUE.encode()).decode()):
        assert needle not in text
        assert needle not in logs


def test_restart_and_unchanged_polls_write_nothing(
        cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """A restart re-lists every server; with nothing changed, nothing is written.

    Also: a poll that finds the same list leaves lastSync (and the status) alone.
    Polls come every second: the operator's default, which (unlike a Skill's
    refreshInterval) has no floor.
    """

    monkeypatch.setenv("SKILLOP_MCP_REFRESH_SECONDS", "1")
    with ServerHandle(tools=[make_tool("alpha"), make_tool("beta")]) as srv:
        with operator():
            cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
            cluster.apply(skill("polled", {"name": "srv", "url": srv.url}))
            cluster.apply(skill("unreachable", {"name": "gone",
                                                "url": "http://gone.example.svc/mcp",
                                                "tools": [{"name": "declared"}]}))
            cluster.apply(actor("agent", "polled", "unreachable"))
            wait_tools(cluster, "agent", {"alpha", "beta", "declared"})
            wait_discovered(cluster, "unreachable", "False")
            polls = srv.count("tools/list")
            wait_for(lambda: srv.count("tools/list") >= polls + 2, timeout=TIMEOUT,
                     message="two more polls")
            mark = cluster.emulator.write_mark()
            wait_for(lambda: srv.count("tools/list") >= polls + 4, timeout=TIMEOUT,
                     message="two more polls")
            assert cluster.emulator.filter_writes(since=mark) == []
        mark = cluster.emulator.write_mark()
        listed = srv.count("tools/list")
        with operator():
            wait_for(lambda: srv.count("tools/list") > listed, timeout=TIMEOUT,
                     message="the restarted operator lists the server")
            time.sleep(2.0)
        assert cluster.emulator.filter_writes(since=mark) == []


def test_discovery_off_uses_declared_tools_and_connects_nowhere(
        cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:

    monkeypatch.setenv("SKILLOP_MCP_DISCOVERY", "false")
    with ServerHandle(tools=[make_tool("live")], list_changed=True) as srv, operator():
        cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        cluster.apply(skill("declared", {"name": "srv", "url": srv.url,
                                         "tools": [{"name": "declared_only"}]}))
        cluster.apply(actor("agent", "declared"))
        wait_tools(cluster, "agent", {"declared_only"})
        cluster.wait_ready("Actor", NS, "agent")
        status = cluster.get("Skill", NS, "declared")["status"]
        assert "Discovered" not in {c["type"] for c in status["conditions"]}
        assert srv.count("initialize") == 0


def test_private_ca_from_a_configmap_is_trusted_and_its_absence_is_a_tls_error(
        ns: Cluster, tmp_path: Any) -> None:
    from bad_servers import make_ca

    ca = make_ca(tmp_path)
    with ServerHandle(tools=[make_tool("internal")], tls=ca.server_context()) as srv:
        ns.apply(skill("trusting", {"name": "srv", "url": srv.url,
                                    "tls": {"caConfigMapRef": {"name": "internal-ca"}},
                                    "tools": [{"name": "declared_only"}]}))
        ns.apply(skill("untrusting", {"name": "srv", "url": srv.url,
                                      "tools": [{"name": "declared_only"}]}))
        ns.apply(actor("inside", "trusting"))
        ns.apply(actor("outside", "untrusting"))
        missing = wait_discovered(ns, "trusting", "False")
        assert missing["reason"] == "TLSError" and "internal-ca" in missing["message"]
        # The bundle arrives after its Skill: used at once, not at the next refresh (5 min).
        ns.apply({"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "internal-ca", "namespace": NS},
                  "data": {"ca.crt": ca.ca_pem}})
        wait_tools(ns, "inside", {"internal"})
        cond = wait_discovered(ns, "untrusting", "False")
        assert cond["reason"] == "TLSError" and "not trusted" in cond["message"]
        wait_tools(ns, "outside", {"declared_only"})


def test_a_ca_configmap_that_existed_before_any_skill_referenced_it_is_trusted(
        ns: Cluster, tmp_path: Any) -> None:
    """The store keeps no data of a ConfigMap no Skill references; once a Skill
    names it as its CA bundle, the operator reads it (docs/decisions.md)."""
    from bad_servers import make_ca

    ca = make_ca(tmp_path)
    ns.apply({"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "early-ca", "namespace": NS},
              "data": {"ca.crt": ca.ca_pem}})
    time.sleep(1.0)  # the running operator's ConfigMap watch sees it (no Skill uses it yet)
    with ServerHandle(tools=[make_tool("internal")], tls=ca.server_context()) as srv:
        ns.apply(skill("trusting", {"name": "srv", "url": srv.url,
                                    "tls": {"caConfigMapRef": {"name": "early-ca"}},
                                    "tools": [{"name": "declared_only"}]}))
        ns.apply(actor("inside", "trusting"))
        wait_tools(ns, "inside", {"internal"})
        assert wait_discovered(ns, "trusting", "True")["reason"] == "Discovered"


def test_operator_wide_ca_file(cluster: Cluster, monkeypatch: pytest.MonkeyPatch,
                               tmp_path: Any) -> None:
    from bad_servers import make_ca

    ca = make_ca(tmp_path)
    bundle = tmp_path / "operator-ca.pem"
    bundle.write_text(ca.ca_pem)
    monkeypatch.setenv("SKILLOP_MCP_CA_FILE", str(bundle))
    with ServerHandle(tools=[make_tool("internal")], tls=ca.server_context()) as srv, \
            operator():
        cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        cluster.apply(skill("company", {"name": "srv", "url": srv.url}))
        cluster.apply(actor("agent", "company"))
        wait_tools(cluster, "agent", {"internal"})
