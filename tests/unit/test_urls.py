"""One server, one identity: RFC 3986 equal URLs are one server to skillop too."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from skillkit import NS, actor, by_name, resolve_actor, skill

from skillop.model.urls import normal_url

EQUAL = [
    ("http://MCP.tools.svc:80/mcp", "http://mcp.tools.svc/mcp"),
    ("HTTPS://Mcp.Tools.SVC:443", "https://mcp.tools.svc/"),
    ("http://mcp.tools.svc:/mcp", "http://mcp.tools.svc/mcp"),
    ("http://mcp.tools.svc/a%2fb%7e%41", "http://mcp.tools.svc/a%2Fb~A"),
    ("http://[::1]:80/mcp", "http://[::1]/mcp"),
    ("https://mcp.tools.svc:8443/mcp?x=%3d", "https://mcp.tools.svc:8443/mcp?x=%3D"),
]
DIFFERENT = [
    ("http://mcp.tools.svc/mcp", "http://mcp.tools.svc/MCP"),  # paths are case-sensitive
    ("http://mcp.tools.svc:8080/mcp", "http://mcp.tools.svc/mcp"),
    ("https://mcp.tools.svc:80/mcp", "http://mcp.tools.svc:80/mcp"),
    ("http://mcp.tools.svc/mcp?a", "http://mcp.tools.svc/mcp"),
]


@pytest.mark.parametrize(("one", "other"), EQUAL)
def test_equal_urls_have_one_normal_form(one: str, other: str) -> None:
    assert normal_url(one) == normal_url(other) == other


@pytest.mark.parametrize(("one", "other"), DIFFERENT)
def test_different_urls_stay_different(one: str, other: str) -> None:
    assert normal_url(one) != normal_url(other)


hosts = st.from_regex(r"[a-zA-Z][a-zA-Z0-9-]{0,10}(\.[a-zA-Z][a-zA-Z0-9-]{0,10}){0,3}",
                      fullmatch=True)
paths = st.from_regex(r"(/([a-zA-Z0-9._~-]|%[0-9a-fA-F]{2}){0,8}){0,3}", fullmatch=True)


@given(st.sampled_from(["http", "https", "HTTP", "Https"]), hosts,
       st.sampled_from(["", ":", ":80", ":443", ":8080"]), paths)
def test_normal_form_is_stable_and_lower_case_where_rfc_3986_says(
        scheme: str, host: str, port: str, path: str) -> None:
    url = f"{scheme}://{host}{port}{path}"
    normal = normal_url(url)
    assert normal_url(normal) == normal
    assert normal.startswith(f"{scheme.lower()}://{host.lower()}")
    assert normal_url(f"{scheme.upper()}://{host.upper()}{port}{path}") == normal
    assert not normal.endswith((":80/", ":443/")) or normal.startswith(
        "https://" if normal.endswith(":80/") else "http://")


def _docs(url_a: str, url_b: str) -> list[Any]:
    deploy = {"name": "deploy", "description": "Deploy",
              "inputSchema": {"type": "object", "properties": {}}}
    return [
        skill("a", mcpServers=[{"name": "ops", "url": url_a, "tools": [deploy], "overrides": {
            "deploy": {"capabilities": {"requiresApproval": True}}}}]),
        skill("b", mcpServers=[{"name": "ops", "url": url_b, "tools": [deploy]}]),
        actor("dev", skills=["a", "b"]),
    ]


def test_one_server_spelled_two_ways_gives_an_actor_one_tool() -> None:
    """Seen before: `a.deploy` with approval and `b.deploy` without, one tool of one
    server reached through two spellings of its URL."""
    same = by_name(resolve_actor(_docs("http://mcp.tools.svc/mcp",
                                       "http://mcp.tools.svc/mcp"), f"{NS}/dev"))
    spelled = by_name(resolve_actor(_docs("http://MCP.tools.svc:80/mcp",
                                          "http://mcp.tools.svc/mcp"), f"{NS}/dev"))
    assert list(spelled) == list(same) == ["deploy"]
    assert spelled["deploy"]["capabilities"]["requiresApproval"] is True
    assert spelled["deploy"]["digest"] == same["deploy"]["digest"]
