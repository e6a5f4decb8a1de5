"""Reading the mounted ToolSet and Secrets: what is served, and one clear line for
anything that cannot be."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from gatewaykit import SKILLOP, Volume, echo_tool, toolset_files
from hypothesis import given, settings
from hypothesis import strategies as st
from skillkit import actor, skill, skill_md

from skillop.gateway.secrets import SecretMissing, env_of, headers_of
from skillop.gateway.served import ToolSetError, load_served_set, parse_served_set
from skillop.model.toolset import TOOLS_KEY

ACTOR = "team-a/dev"


def _document() -> dict[str, Any]:
    docs = [skill("srv", mcpServers=[{"name": "up", "url": "http://up.tools.svc/mcp",
                                      "headersFrom": {"secretRef": {"name": "up-token"}},
                                      "tools": [echo_tool("echo", "up")]}],
                  builtins=["git_operations"], agentSkills=[{"inline": skill_md("notes")}]),
            actor("dev", skills=["srv"])]
    parsed: dict[str, Any] = json.loads(toolset_files(docs, ACTOR)[TOOLS_KEY])
    return parsed


def test_the_resolvers_document_is_served_as_is(tmp_path: Path) -> None:
    files = toolset_files([skill("srv", mcpServers=[{"name": "up", "url": "http://u.svc/mcp",
                                                     "tools": [echo_tool("echo", "up")]}],
                                 agentSkills=[{"inline": skill_md("notes")}]),
                           actor("dev", skills=["srv"])], ACTOR)
    Volume(tmp_path).write(files)
    served = load_served_set(tmp_path)
    document = json.loads(files[TOOLS_KEY])
    assert (served.actor, served.hash) == (ACTOR, document["hash"])
    assert set(served.tools) == {"echo", "notes"}
    echo = served.tools["echo"]
    assert (echo.upstream, echo.upstream_name) == (("team-a/srv", "up"), "echo")
    assert echo.upstream_digest == document["tools"][0]["upstreamDigest"]
    assert served.tools["notes"].body == files["agent-skill.notes.md"]
    assert list(served.upstreams) == [("team-a/srv", "up")]


@pytest.mark.parametrize(("mutate", "line"), [
    (lambda d: d.update(kind="Pod"), "kind: Input should be 'ToolSet'"),
    (lambda d: d["tools"][0].pop("bindingName"), "tools[0].bindingName: Field required"),
    (lambda d: d["tools"][0].update(bindingName="has space"), "tools[0].bindingName: String"),
    (lambda d: d["mcpServers"].clear(), "tools[0].mcpServer: no mcpServers entry 'up'"),
    (lambda d: d["mcpServers"][0].pop("url"), "mcpServers[0]: neither url nor command"),
    (lambda d: d["tools"][0].pop("upstreamName"), "tools[0].upstreamName: required for an mcp"),
    (lambda d: d["agentSkills"].clear(), "name: no agentSkills entry 'notes'"),
    (lambda d: d["agentSkills"][0].update(key="../notes.md"),
     "agentSkills[0].key: String should match pattern"),
    (lambda d: d["tools"].append(dict(d["tools"][0])), "bindingName: echo appears twice"),
    (lambda d: d["mcpServers"][0].update(tls={}),
     "mcpServers[0].tls: exactly one of caConfigMapRef and caSecretRef must be set"),
    (lambda d: d["mcpServers"][0].update(tls={"caSecretRef": {"name": "../x"}}),
     "mcpServers[0].tls.caSecretRef.name: String should match pattern"),
    (lambda d: d["mcpServers"][0].update(tls={"caConfigMapRef": {"name": "ca", "key": "a/b"}}),
     "mcpServers[0].tls.caConfigMapRef.key: String should match pattern"),
])
def test_a_bad_document_is_one_line_naming_the_field(mutate: Any, line: str) -> None:
    doc = _document()
    mutate(doc)
    with pytest.raises(ToolSetError) as caught:
        parse_served_set(json.dumps(doc), path="/etc/skillop/tools.json")
    message = str(caught.value)
    assert message.startswith("/etc/skillop/tools.json: ") and line in message
    assert "\n" not in message


def test_an_agent_skills_body_is_read_from_the_key_the_document_names() -> None:
    doc = _document()
    doc["agentSkills"][0]["key"] = "agent-skill.elsewhere.md"
    served = parse_served_set(json.dumps(doc), body=lambda key: f"body of {key}")
    assert served.tools["notes"].body == "body of agent-skill.elsewhere.md"


def test_a_missing_toolset_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ToolSetError, match=r"tools.json: cannot read"):
        load_served_set(tmp_path)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(_json)
def test_any_json_is_served_or_refused_in_one_line(value: Any) -> None:
    try:
        parse_served_set(json.dumps(value))
    except ToolSetError as exc:
        assert "\n" not in str(exc)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["tools", "mcpServers"]), st.integers(0, 0), st.text(max_size=12),
       _json)
def test_any_field_of_a_real_document_replaced_is_served_or_refused(
        section: str, index: int, key: str, value: Any) -> None:
    doc = _document()
    doc[section][index][key or "name"] = value
    try:
        served = parse_served_set(json.dumps(doc))
    except ToolSetError as exc:
        assert "\n" not in str(exc)
    else:
        assert set(served.tools) <= {"echo", "notes"} or key == "bindingName"


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_are_served_or_refused(raw: bytes) -> None:
    try:
        parse_served_set(raw)
    except ToolSetError as exc:
        assert "\n" not in str(exc)


def test_secrets_are_read_from_one_directory_per_secret(tmp_path: Path) -> None:
    served = parse_served_set(json.dumps(_document()))
    (upstream,) = served.upstreams.values()
    with pytest.raises(SecretMissing) as missing:
        headers_of(upstream, tmp_path)
    assert str(missing.value) == f"Secret up-token is not mounted at {tmp_path / 'up-token'}"
    Volume(tmp_path / "up-token").write({"Authorization": "Bearer abc123\n"})
    assert headers_of(upstream, tmp_path) == {"Authorization": "Bearer abc123"}
    assert env_of(upstream, tmp_path) == {}


def test_the_cli_refuses_a_bad_listen_address_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run([SKILLOP, "gateway", "--toolset-dir", str(tmp_path),
                           "--listen", "nowhere"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == "skillop gateway: --listen 'nowhere': expected HOST:PORT\n"
    assert done.stdout == ""


def test_the_gateway_never_loads_the_kubernetes_client_or_kopf() -> None:
    """It reads mounted files only: no API client in the sidecar's process."""
    code = ("import sys; import skillop.gateway.server, skillop.gateway.command;"
            " import skillop.cli.main;"
            " print(sorted(m for m in sys.modules if m.split('.')[0] in"
            " ('kopf', 'kubernetes')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "[]"
