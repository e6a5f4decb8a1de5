"""An Actor's spec.callers: its bounds, and the copy the ToolSet document carries
(what the gateway reads from its mount, and ``skillop tools -o json`` shows)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from skillkit import actor, resolve_actor, skill

from skillop.model.actorspec import ActorSpec
from skillop.model.toolset import ToolSetDocument

CALLERS = {"issuer": "https://idp.example.com/realms/acme", "audiences": ["skillop-gateway"],
           "groupsClaim": "roles", "anonymous": "Allow", "clockSkewSeconds": 30}


def _callers(**fields: Any) -> ActorSpec:
    return ActorSpec.model_validate({"callers": {**CALLERS, **fields}})


def test_defaults_and_the_fields_as_given() -> None:
    spec = ActorSpec.model_validate({"callers": {"issuer": "https://idp.example.com",
                                                 "audiences": ["gw"]}}).callers
    assert spec is not None
    assert (spec.header, spec.subject_claim, spec.groups_claim, spec.anonymous,
            spec.clock_skew_seconds, spec.jwks_uri) == (
        "Authorization", "sub", "groups", "Deny", 60, None)


@pytest.mark.parametrize(("fields", "where"), [
    ({"issuer": "http://idp.example.com"}, "issuer"),
    ({"issuer": "http://127.0.0.1.evil.example/x"}, "issuer"),
    ({"issuer": "https://user:pw@idp.example.com"}, "issuer"),
    ({"issuer": "https://idp.example.com/?q=1"}, "issuer"),
    ({"issuer": "ftp://idp.example.com"}, "issuer"),
    ({"jwksUri": "http://keys.example.com/jwks"}, "jwksUri"),
    ({"audiences": []}, "audiences"),
    ({"audiences": [f"a{i}" for i in range(9)]}, "audiences"),
    ({"header": "X Token"}, "header"),
    ({"header": ""}, "header"),
    ({"clockSkewSeconds": 301}, "clockSkewSeconds"),
    ({"clockSkewSeconds": -1}, "clockSkewSeconds"),
    ({"anonymous": "Maybe"}, "anonymous"),
    ({"tokenTypo": 1}, "tokenTypo"),
])
def test_out_of_bounds_fields_are_refused_naming_the_field(fields: dict[str, Any],
                                                           where: str) -> None:
    with pytest.raises(ValidationError) as caught:
        _callers(**fields)
    assert f"callers.{where}" in str(caught.value)


@pytest.mark.parametrize("issuer", ["http://127.0.0.1:8080/realms/a", "http://localhost",
                                    "http://[::1]:9000", "https://idp.example.com:8443/a/b"])
def test_https_anywhere_and_http_on_a_loopback_host(issuer: str) -> None:
    assert _callers(issuer=issuer).callers is not None


@given(st.from_regex(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}", fullmatch=True))
def test_any_header_name_token_is_a_header(name: str) -> None:
    assert _callers(header=name).callers.header == name  # type: ignore[union-attr]


@given(st.text(min_size=1, max_size=40).filter(
    lambda s: any(c in s for c in ' \t\r\n:()<>@,;\\"/[]?={}') or not s.isascii()))
def test_no_header_name_with_a_separator_or_beyond_ascii(name: str) -> None:
    with pytest.raises(ValidationError):
        _callers(header=name)


DOCS = [skill(
    "s", mcpServers=[{"name": "up", "url": "http://up.tools.svc/mcp",
                      "tools": [{"name": "t", "inputSchema": {"type": "object"}}]}])]


def test_the_toolset_carries_the_actors_callers_and_only_when_set() -> None:
    with_callers = resolve_actor([*DOCS, actor("bot", skills=["s"], callers=CALLERS)], "team-a/bot")
    without = resolve_actor([*DOCS, actor("bot", skills=["s"])], "team-a/bot")
    doc = json.loads(with_callers.text)
    assert doc["callers"] == {**CALLERS, "header": "Authorization", "subjectClaim": "sub"}
    assert "callers" not in json.loads(without.text)
    # The writer's text and the document the CLI reads agree; the hash covers callers.
    assert with_callers.document["callers"] == doc["callers"]
    assert doc["hash"] != json.loads(without.text)["hash"]
    parsed = ToolSetDocument.parse(with_callers.text).callers
    assert parsed is not None and parsed.issuer == CALLERS["issuer"]


def test_skillop_tools_json_shows_the_callers(tmp_path: Path) -> None:
    manifests = tmp_path / "all.yaml"
    manifests.write_text(yaml.safe_dump_all(
        [*DOCS, actor("bot", skills=["s"], callers=CALLERS)]))
    out = subprocess.run([sys.executable, "-m", "skillop", "tools", "-f", str(manifests),
                          "-n", "team-a", "-o", "json", "bot"],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["callers"]["issuer"] == CALLERS["issuer"]
