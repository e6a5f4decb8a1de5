"""Tokens exchanged for an Actor's callers reach only the hosts the Actor chose.

A server with ``tokenExchange`` of a Skill from another namespace is sent, at
each call, a token the issuer made for the caller: the set is refused
(``TokenExchangeNotBound``) unless ``spec.callers.tokenExchange.hosts`` binds its
host. The server's fields reach the ToolSet (no secret), the client Secret is
mounted into the gateway of a set that needs it, and the field's rules hold
where it is written.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from skillkit import actor, anon, parse_problems, problems_of, resolve_actor, resolver, skill

from skillop.model import problems as P
from skillop.model.exchange import TokenExchange
from skillop.resolve.inject import target_of

HOST = "mcp.team-b.svc"
URL = f"https://{HOST}/mcp"
ISSUER = "https://idp.example.com/realms/acme"
EXCHANGE = {"audience": "https://mcp.team-b.svc", "scopes": ["tickets.read"]}


def server(url: str = URL, **more: Any) -> dict[str, Any]:
    return {"name": "helper", "url": url, "tools": [anon("build")],
            "tokenExchange": EXCHANGE, **more}


def shared(**more: Any) -> dict[str, Any]:
    return skill("helper", ns="team-b", sharing={"from": "All"}, mcpServers=[server(**more)])


def agent(*hosts: str, client: bool = True, skills: tuple[str, ...] = ("team-b/helper",),
          ) -> dict[str, Any]:
    callers: dict[str, Any] = {"issuer": ISSUER, "audiences": ["skillop-gateway"]}
    if client:
        callers["tokenExchange"] = {"clientSecretRef": {"name": "gw-client"},
                                    "hosts": list(hosts)}
    return actor("agent", ns="team-a", skills=skills, callers=callers)


def test_a_shared_server_at_an_unbound_host_refuses_the_set_naming_everything() -> None:
    resolution = resolve_actor([shared(), agent()], "team-a/agent")
    [problem] = problems_of(resolution, P.TOKEN_EXCHANGE_NOT_BOUND)
    assert problem.field == "spec.callers.tokenExchange.hosts"
    assert problem.line() == (
        "Actor team-a/agent: spec.callers.tokenExchange.hosts: TokenExchangeNotBound: server"
        " 'helper' of skill team-b/helper (another namespace's) would be sent tokens exchanged"
        f" for this Actor's callers at https://{HOST}, which"
        " spec.callers.tokenExchange.hosts does not bind; if this namespace trusts it, add"
        f" 'https://{HOST}' to spec.callers.tokenExchange.hosts")
    assert not resolution.ok
    assert target_of(resolver([shared(), agent()]), "team-a", "agent").credentials.secrets == ()


@pytest.mark.parametrize("pattern", [HOST, f"https://{HOST}", "*.team-b.svc", f"{HOST}:443"])
def test_a_bound_host_admits_the_server_and_its_gateway_mounts_the_client_secret(
        pattern: str) -> None:
    docs = [shared(), agent(pattern)]
    resolution = resolve_actor(docs, "team-a/agent")
    assert resolution.ok, [p.line() for p in resolution.problems]
    (entry,) = resolution.document["mcpServers"]
    assert entry["tokenExchange"] == {**EXCHANGE, "header": "Authorization"}
    assert target_of(resolver(docs), "team-a", "agent").credentials.secrets == ("gw-client",)
    keys = target_of(resolver(docs), "team-a", "agent").credentials.secret_keys
    assert keys == (("gw-client", "client_id"), ("gw-client", "client_secret"))


@pytest.mark.parametrize("pattern", ["other.team-b.svc", f"http://{HOST}", f"{HOST}:8443",
                                     "*.team-c.svc"])
def test_another_host_does_not_bind(pattern: str) -> None:
    resolution = resolve_actor([shared(), agent(pattern)], "team-a/agent")
    assert [p.reason for p in resolution.problems] == [P.TOKEN_EXCHANGE_NOT_BOUND]


def test_a_server_of_the_actors_own_namespace_needs_no_binding() -> None:
    own = skill("helper", ns="team-a", mcpServers=[server()])
    docs = [own, agent(skills=("helper",))]
    resolution = resolve_actor(docs, "team-a/agent")
    assert resolution.ok and resolution.warnings == ()
    assert target_of(resolver(docs), "team-a", "agent").credentials.secrets == ("gw-client",)


def test_without_an_exchange_client_the_set_warns_that_its_calls_are_refused() -> None:
    own = skill("helper", ns="team-a", mcpServers=[server()])
    resolution = resolve_actor([own, agent(skills=("helper",), client=False)],
                               "team-a/agent")
    assert resolution.ok
    assert resolution.warnings == (
        "Actor team-a/agent: server 'helper' of skill team-a/helper calls with exchanged"
        " tokens (tokenExchange) but spec.callers.tokenExchange is not set: its calls are"
        " refused",)


def test_a_set_without_exchange_mounts_no_client_secret() -> None:
    plain = skill("helper", ns="team-a", mcpServers=[{
        "name": "helper", "url": URL, "tools": [anon("build")]}])
    docs = [plain, agent(skills=("helper",))]
    assert resolve_actor(docs, "team-a/agent").ok
    assert target_of(resolver(docs), "team-a", "agent").credentials.secrets == ()


@pytest.mark.parametrize(("fields", "why"), [
    ({"transport": "sse"}, "tokenExchange is for streamable-http url servers: not sse"),
    ({"tokenExchange": {"audience": ""}}, "audience"),
    ({"tokenExchange": {"audience": "a", "scopes": ["two words"]}}, "scopes"),
    ({"tokenExchange": {"audience": "a", "header": "Bad Header"}}, "header"),
    ({"tokenExchange": {"audience": "a", "scopes": ["s"] * 33}}, "scopes"),
])
def test_the_fields_rules_hold_where_they_are_written(fields: dict[str, Any], why: str) -> None:
    problems = parse_problems(shared(**fields))
    assert len(problems) == 1 and why in problems[0].line(), [p.line() for p in problems]


def test_a_stdio_server_cannot_exchange() -> None:
    stdio = skill("local", mcpServers=[{"name": "local", "command": ["run"],
                                        "tools": [anon("t")], "tokenExchange": EXCHANGE}])
    (problem,) = parse_problems(stdio)
    assert "tokenExchange is for streamable-http url servers: not stdio" in problem.line()


@given(st.text(min_size=1, max_size=40))
def test_the_header_carries_the_token_as_its_scheme_says(token: str) -> None:
    assert TokenExchange(audience="a").value(token) == f"Bearer {token}"
    assert TokenExchange(audience="a", header="X-Token").value(token) == token
