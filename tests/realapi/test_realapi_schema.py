"""The generated CRDs on a real API server: accepted, served as generated, and enforced.

The emulated API validates nothing; here each invalid object goes through the
real ``kubectl apply`` and the message it prints is the one docs/webhook.md
promises. Manifests go to kubectl as JSON: kubectl reads YAML 1.1, where an
unquoted ``y`` that PyYAML writes is a boolean.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import skillkit
from realkit import ROOT, RealCluster

from skillop.model.crd import all_crds

pytestmark = pytest.mark.realapi

NS = "realapi-schema"
DOCS = (ROOT / "docs" / "webhook.md").read_text()


@pytest.fixture(scope="module")
def ns(real: RealCluster) -> Any:
    real.namespace(NS)
    yield real
    real.delete_namespaces(NS)


def test_generated_crds_are_accepted_and_served_as_generated(real: RealCluster) -> None:
    from kubernetes import client

    api = client.ApiextensionsV1Api(real.api_client)
    for doc in all_crds().values():
        served = api.read_custom_resource_definition(doc["metadata"]["name"])
        conditions = {c.type: c.status for c in served.status.conditions}
        assert conditions["Established"] == "True"
        assert conditions["NamesAccepted"] == "True"
        assert "NonStructuralSchema" not in conditions
        raw = real.api_client.sanitize_for_serialization(served)
        # Nothing of the generated schema was dropped or rewritten by the server.
        assert raw["spec"]["versions"] == doc["spec"]["versions"]


def skill(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A Skill with exactly ``spec`` (what the API server is asked to admit)."""
    return {**skillkit.skill(name, NS), "spec": spec}


def actor(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """An Actor with exactly ``spec``."""
    return {**skillkit.actor(name, NS), "spec": spec}


URL = "http://mcp.tools.svc/mcp"
INVALID = {
    "unknown-field": (skill("unknown", {"bogus": 1}),
                      'strict decoding error: unknown field "spec.bogus"'),
    "wrong-type": (
        skill("wrong-type", {"anonymousTools": [{"name": "t", "capabilities": {"writes": "yes"}}]}),
        'spec.anonymousTools[0].capabilities.writes: Invalid value: "string": '
        "spec.anonymousTools[0].capabilities.writes in body must be of type boolean"),
    "pattern": (
        skill("pattern", {"anonymousTools": [{"name": "Bad Name"}]}),
        'spec.anonymousTools[0].name: Invalid value: "Bad Name": spec.anonymousTools[0].name'
        " in body should match '^[A-Za-z0-9_.-]{1,128}$'"),
    "minimum": (
        actor("minimum", {"skills": ["x"], "skillAccessPolicy": {"maxTools": 0}}),
        "spec.skillAccessPolicy.maxTools: Invalid value: 0: spec.skillAccessPolicy.maxTools"
        " in body should be greater than or equal to 1"),
    "glob-that-never-matches": (
        actor("never", {"skills": ["x"], "skillAccessPolicy": {"deny": ["*/ok", "deployer"]}}),
        "spec.skillAccessPolicy.deny[1]: Invalid value: \"deployer\": a skill glob without '/'"
        " or '*' can never match namespace/name"),
    "url-and-command": (
        skill("both", {"mcpServers": [{"name": "x", "url": URL, "command": ["srv"]}]}),
        "spec.mcpServers[0]: Invalid value: exactly one of url and command must be set"),
    "neither-url-nor-command": (
        skill("neither", {"mcpServers": [{"name": "x"}]}),
        "spec.mcpServers[0]: Invalid value: exactly one of url and command must be set"),
    "command-over-sse": (
        skill("command-sse", {"mcpServers": [{"name": "x", "command": ["srv"],
                                              "transport": "sse", "tools": [{"name": "t"}]}]}),
        "spec.mcpServers[0]: Invalid value: a command server uses transport stdio"),
    "url-over-stdio": (
        skill("url-stdio", {"mcpServers": [{"name": "x", "url": URL, "transport": "stdio"}]}),
        "spec.mcpServers[0]: Invalid value: a url server cannot use transport stdio"),
    "command-without-tools": (
        skill("no-tools", {"mcpServers": [{"name": "x", "command": ["srv"]}]}),
        "spec.mcpServers[0]: Invalid value: a stdio server (command) declares its tools:"
        " the operator never runs it"),
    "url-with-env": (
        skill("url-env", {"mcpServers": [{"name": "x", "url": URL,
                                          "env": [{"name": "A", "value": "1"}]}]}),
        "spec.mcpServers[0]: Invalid value: args and env are for stdio servers (command),"
        " not url ones"),
    "command-with-headers": (
        skill("cmd-headers", {"mcpServers": [{"name": "x", "command": ["srv"],
                                              "tools": [{"name": "t"}],
                                              "headersFrom": {"secretRef": {"name": "s"}}}]}),
        "spec.mcpServers[0]: Invalid value: headersFrom and tls are for url servers, not stdio"
        " ones (command)"),
    "sse-token-exchange": (
        skill("sse-xchg", {"mcpServers": [{"name": "x", "url": URL, "transport": "sse",
                                           "tokenExchange": {"audience": "a"}}]}),
        "spec.mcpServers[0]: Invalid value: tokenExchange is for streamable-http url servers"),
    "inline-and-configmap": (
        skill("agent", {"agentSkills": [{"inline": "---\nname: x\n---\n",
                                         "configMapRef": {"name": "notes"}}]}),
        "spec.agentSkills[0]: Invalid value: exactly one of configMapRef and inline must be set"),
    "selector-without-from": (
        skill("sharing", {"sharing": {"from": "Selector"}}),
        "spec.sharing: Invalid value: selector is required with from: Selector, and only then"),
    "url-with-userinfo": (
        skill("userinfo", {"mcpServers": [{"name": "x",
                                           "url": "http://bot:hunter2-pw@mcp.tools.svc/mcp"}]}),
        "spec.mcpServers[0]: Invalid value: url must not carry credentials (user:password@);"
        " name a Secret in headersFrom instead"),
    "env-value-and-value-from": (
        skill("env-both", {"mcpServers": [{"name": "x", "command": ["srv"],
                                           "tools": [{"name": "t"}], "env": [
            {"name": "A", "value": "1",
             "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}]}),
        "spec.mcpServers[0].env[0]: Invalid value: exactly one of value and valueFrom must be"
        " set"),
    "env-neither-value-nor-value-from": (
        skill("env-neither", {"mcpServers": [{"name": "x", "command": ["srv"],
                                              "tools": [{"name": "t"}],
                                              "env": [{"name": "A"}]}]}),
        "spec.mcpServers[0].env[0]: Invalid value: exactly one of value and valueFrom must be"
        " set"),
    "refresh-below-floor": (
        skill("refresh", {"refreshInterval": "1ms"}),
        'spec.refreshInterval: Invalid value: "1ms": refreshInterval must be at least 10s'),
    "server-refresh-below-floor": (
        skill("server-refresh", {"mcpServers": [{"name": "x", "url": URL,
                                                 "refreshInterval": "9s999ms"}]}),
        'spec.mcpServers[0].refreshInterval: Invalid value: "9s999ms": refreshInterval must be'
        " at least 10s"),
    "callers-issuer-over-plain-http": (
        actor("plain-issuer", {"skills": ["x"], "callers": {
            "issuer": "http://idp.example.com", "audiences": ["gw"]}}),
        'spec.callers.issuer: Invalid value: "http://idp.example.com": issuer must be an https'
        " URL without user, query or fragment (http only for a loopback host: localhost,"
        " 127.x.x.x, [::1])"),
    "caller-rule-without-tools": (
        actor("rule-for-nothing", {"skills": ["x"], "skillAccessPolicy": {
            "callerRules": [{"effect": "Deny", "callers": {"groups": ["g"]}}]}}),
        "spec.skillAccessPolicy.callerRules[0]: Invalid value: a caller rule"
        " needs skills or tools (the tools it covers)"),
    "from-without-selector": (
        skill("sharing-all", {"sharing": {"from": "All", "selector": {"matchLabels": {"a": "b"}}}}),
        "spec.sharing: Invalid value: selector is required with from: Selector, and only then"),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_objects_are_rejected_with_the_documented_message(ns: RealCluster,
                                                                   case: str) -> None:
    doc, message = INVALID[case]
    out = ns.kubectl("apply", "-f", "-", stdin=json.dumps(doc))
    assert out.returncode == 1
    assert message in out.stderr, out.stderr
    assert f'"{doc["metadata"]["name"]}"' in out.stderr or "unknown field" in out.stderr
    assert "Traceback" not in out.stderr
    # The message, in the form the docs show it (table cells quote it in backticks).
    assert message.split(": Invalid value: ")[-1].split(" in body")[0].strip('"') in DOCS
    # Nothing was stored.
    assert ns.kubectl("get", doc["kind"].lower(), doc["metadata"]["name"], "-n", NS
                      ).returncode == 1


def test_a_valid_object_with_every_rule_satisfied_is_accepted(ns: RealCluster) -> None:
    doc = skill("valid", {"mcpServers": [{"name": "x", "url": URL, "transport": "sse",
                                          "refreshInterval": "9s1000ms"},
                                         {"name": "y", "command": ["srv"], "transport": "stdio",
                                          "tools": [{"name": "t"}], "env": [
                                              {"name": "MODE", "value": "fast"},
                                              {"name": "TOKEN", "valueFrom": {"secretKeyRef": {
                                                  "name": "srv-token", "key": "token"}}}]}],
                          "refreshInterval": "10s",
                          "agentSkills": [{"configMapRef": {"name": "notes"}}],
                          "sharing": {"from": "Selector", "selector": {"matchLabels": {"a": "b"}}},
                          "anonymousTools": [{"name": "t", "capabilities": {"writes": True}}]})
    out = ns.kubectl("apply", "-f", "-", stdin=json.dumps(doc))
    assert out.returncode == 0, out.stderr
    for name, issuer in (("loopback-issuer", "http://127.0.0.1:8080/realms/a"),
                         ("https-issuer", "https://idp.example.com/realms/a")):
        doc = actor(name, {"skills": ["x"], "callers": {
            "issuer": issuer, "audiences": ["gw"], "jwksUri": f"{issuer}/keys"}})
        out = ns.kubectl("apply", "-f", "-", stdin=json.dumps(doc))
        assert out.returncode == 0, out.stderr


def _words(text: str) -> str:
    return " ".join(text.split())


def test_kubectl_explain_shows_the_models_descriptions(real: RealCluster) -> None:
    # What a newcomer types: the real kubectl reads the served OpenAPI schema, so
    # this proves the descriptions reach the API server's published schema.
    from skillop.model.fielddocs import field_docs
    from skillop.model.specs import AccessPolicy, ActorSpec

    shown = real.kubectl("explain", "actors.spec.skillAccessPolicy")
    assert shown.returncode == 0, shown.stderr
    text = _words(shown.stdout)
    assert "<no description>" not in text, shown.stdout
    expected = [field_docs(ActorSpec)["skill_access_policy"],
                *field_docs(AccessPolicy).values()]
    for description in expected:
        assert description and _words(description) in text, (description, shown.stdout)
    for path in ("actors.spec", "actors.status", "skills.spec", "skills.status",
                 "skills.spec.mcpServers", "tools.spec"):
        out = real.kubectl("explain", path)
        assert out.returncode == 0, out.stderr
        assert "<no description>" not in out.stdout, f"kubectl explain {path}:\n{out.stdout}"



def test_kubectl_get_tools_names_the_override_column_for_what_it_is(ns: RealCluster) -> None:
    """A Tool is called by metadata.name unless spec.name overrides it. NAME always
    holds a name; the second column is the override, empty when there is none (it
    was TOOL-NAME, empty for every Tool that leaves spec.name to its default)."""
    ns.apply(skillkit.tool("run-pytest", NS, description="run the tests"))
    ns.apply(skillkit.tool("lint-tool", NS, description="lint", name="lint"))
    table = ns.kubectl("get", "tools", "-n", NS)
    assert table.returncode == 0, table.stderr
    header = table.stdout.splitlines()[0].split()
    assert header[:2] == ["NAME", "NAME-OVERRIDE"]
    rows = {line.split()[0]: line.split()[1:] for line in table.stdout.splitlines()[1:]}
    assert len(rows["lint-tool"]) == 2 and rows["lint-tool"][0] == "lint"
    assert len(rows["run-pytest"]) == 1  # no override: only its AGE follows NAME
