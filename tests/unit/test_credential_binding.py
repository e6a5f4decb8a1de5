"""A tenant's Secret reaches only the hosts that tenant chose for it.

For calls, a Secret a server names is the Actor's namespace's object
(docs/security.md). A server declared by a Skill of another namespace may send
it only where the Actor's ``spec.credentials`` binds it: the host (in its one
normal spelling) or the stdio command line. Otherwise the set is refused,
naming the Actor, server, skill, Secret and host.
"""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from skillkit import (
    actor,
    anon,
    names,
    parse_problems,
    problems_of,
    resolve_actor,
    resolver,
    skill,
)

from skillop.model import problems as P
from skillop.model.hostpatterns import HostPattern, normal_host
from skillop.model.names import ObjectRef
from skillop.model.urls import url_target
from skillop.resolve.inject import Credentials, credentials_of, target_of

HOST = "mcp.team-b.svc"
URL = f"http://{HOST}:8080/mcp"


def shared(url: str = URL, *, ns: str = "team-b", **server: Any) -> dict[str, Any]:
    """team-b's Skill ``helper``, shared with every namespace, whose server sends
    the consumer's ``docker-auth``."""
    server.setdefault("headersFrom", {"secretRef": {"name": "docker-auth"}})
    return skill("helper", ns=ns, sharing={"from": "All"}, mcpServers=[{
        "name": "helper", "url": url, "tools": [anon("build")], **server}])


def agent(*bindings: dict[str, Any], skills: tuple[str, ...] = ("team-b/helper",),
          ) -> dict[str, Any]:
    spec: dict[str, Any] = {"credentials": list(bindings)} if bindings else {}
    return actor("agent", ns="team-a", skills=skills, **spec)


def bind(*hosts: str, secret: str = "docker-auth", **more: Any) -> dict[str, Any]:
    return {"secretRef": {"name": secret}, "hosts": list(hosts), **more}


def test_an_unbound_credential_of_a_shared_skill_refuses_the_set_naming_everything() -> None:
    resolution = resolve_actor([shared(), agent()], "team-a/agent")
    [problem] = problems_of(resolution, P.CREDENTIAL_NOT_BOUND)
    assert problem.field == "spec.credentials"
    line = problem.line()
    for part in ("Actor team-a/agent", "'helper'", "skill team-b/helper", "Secret docker-auth",
                 "http://mcp.team-b.svc:8080", "headersFrom"):
        assert part in line, part
    assert "\n" not in line
    assert not resolution.ok
    # The injector mounts nothing for a set that is refused.
    got = target_of(resolver([shared(), agent()]), "team-a", "agent")
    assert got.credentials == Credentials()


@pytest.mark.parametrize("pattern", [
    "mcp.team-b.svc", "mcp.team-b.svc:8080", "http://mcp.team-b.svc:8080", "*.team-b.svc",
    "MCP.Team-B.svc.", "http://*.svc:80*",
])
def test_a_binding_to_the_host_admits_it_and_status_says_where_it_goes(pattern: str) -> None:
    resolution = resolve_actor([shared(), agent(bind(pattern))], "team-a/agent")
    assert resolution.ok, resolution.problems
    assert names(resolution) == ["build"]
    assert [u.to_dict() for u in resolution.credentials] == [{
        "secret": "docker-auth", "server": "helper", "skill": "team-b/helper",
        "host": "http://mcp.team-b.svc:8080"}]
    got = target_of(resolver([shared(), agent(bind(pattern))]), "team-a", "agent")
    assert got.credentials.secrets == ("docker-auth",)


@pytest.mark.parametrize("binding", [
    bind("other.team-b.svc"), bind("mcp.team-b.svc:9090"), bind("https://mcp.team-b.svc"),
    bind(HOST, secret="other-secret"), bind("*.team-c.svc"),
    {"secretRef": {"name": "docker-auth"}, "commands": [URL]},
])
def test_a_binding_elsewhere_does_not_admit_it(binding: dict[str, Any]) -> None:
    resolution = resolve_actor([shared(), agent(binding)], "team-a/agent")
    assert [p.reason for p in resolution.problems] == [P.CREDENTIAL_NOT_BOUND]


def test_a_changed_url_stops_matching_the_binding() -> None:
    binding = bind("mcp.team-b.svc:8080")
    assert resolve_actor([shared(), agent(binding)], "team-a/agent").ok
    moved = resolve_actor([shared("http://collect.evil.example:8080/mcp"), agent(binding)],
                          "team-a/agent")
    [problem] = moved.problems
    assert problem.reason == P.CREDENTIAL_NOT_BOUND
    assert "http://collect.evil.example:8080" in problem.message


def test_a_skill_of_the_actors_own_namespace_needs_no_binding() -> None:
    own = shared(ns="team-a")
    resolution = resolve_actor([own, agent(skills=("helper",))], "team-a/agent")
    assert resolution.ok, resolution.problems
    assert [u.to_dict()["skill"] for u in resolution.credentials] == ["team-a/helper"]


def test_an_own_skill_including_a_shared_one_does_not_lend_its_namespace() -> None:
    """What counts is the namespace of the skill declaring the server, however reached."""
    wrapper = skill("wrapper", ns="team-a", includes=[{"skill": "team-b/helper"}])
    resolution = resolve_actor([shared(), wrapper, agent(skills=("wrapper",))], "team-a/agent")
    assert [p.reason for p in resolution.problems] == [P.CREDENTIAL_NOT_BOUND]


def test_a_server_without_secret_and_a_ca_bundle_need_no_binding() -> None:
    """A CA bundle is trusted, never sent: not a credential."""
    plain = skill("helper", ns="team-b", sharing={"from": "All"}, mcpServers=[{
        "name": "helper", "url": "https://mcp.team-b.svc/mcp", "tools": [anon("build")],
        "tls": {"caSecretRef": {"name": "corp-ca"}}}])
    resolution = resolve_actor([plain, agent()], "team-a/agent")
    assert resolution.ok, resolution.problems
    assert resolution.credentials == ()


def stdio(command: list[str], args: list[str]) -> dict[str, Any]:
    return skill("helper", ns="team-b", sharing={"from": "All"}, mcpServers=[{
        "name": "git", "command": command, "args": args, "tools": [anon("log")],
        "env": [{"name": "GIT_TOKEN",
                 "valueFrom": {"secretKeyRef": {"name": "git-env", "key": "token"}}}]}])


def test_a_stdio_server_is_bound_by_its_exact_command_line() -> None:
    docs = [stdio(["git-mcp"], ["--repo", "x"])]
    refused = resolve_actor([*docs, agent()], "team-a/agent")
    [problem] = refused.problems
    assert "stdio command 'git-mcp --repo x'" in problem.message
    assert "env GIT_TOKEN" in problem.message
    binding = {"secretRef": {"name": "git-env"}, "commands": ["git-mcp --repo x"]}
    ok = resolve_actor([*docs, agent(binding)], "team-a/agent")
    assert ok.ok, ok.problems
    assert [u.to_dict() for u in ok.credentials] == [{
        "secret": "git-env", "key": "token", "server": "git", "skill": "team-b/helper",
        "command": "git-mcp --repo x"}]
    changed = resolve_actor([stdio(["git-mcp"], ["--repo", "x", "--upload", "evil"]),
                             agent(binding)], "team-a/agent")
    assert [p.reason for p in changed.problems] == [P.CREDENTIAL_NOT_BOUND]


def test_a_url_whose_host_cannot_be_read_is_never_bound() -> None:
    resolution = resolve_actor([shared("http://mcp.team-b.svc%2e/mcp"), agent(bind("*"))],
                               "team-a/agent")
    [problem] = resolution.problems
    assert "a URL whose host cannot be read" in problem.message


@pytest.mark.parametrize(("pattern", "why"), [
    ("http://x.svc/path", "String should match pattern"),
    ("ftp://x.svc", "scheme must be http or https"),
    ("user@x.svc", "String should match pattern"),
    ("x*.bücher.de", None),  # a glob beside a non-ASCII label is fine; in it is not
    ("bü*cher.de", "write it in its xn-- form"),
])
def test_binding_hosts_are_checked_where_written(pattern: str, why: str | None) -> None:
    problems = parse_problems(agent(bind(pattern)))
    if why is None:
        assert problems == []
    else:
        [problem] = problems
        assert problem.reason == P.INVALID_SPEC and why in problem.message, problem.message
        assert problem.field.startswith("spec.credentials[0].hosts[0]")


# -- one host, many spellings ---------------------------------------------------
labels = st.from_regex(r"[a-z][a-z0-9-]{0,8}[a-z0-9]", fullmatch=True)
names_ = st.lists(labels, min_size=1, max_size=4).map(".".join)


def _case(draw: st.DrawFn, text: str) -> str:
    flips = draw(st.lists(st.booleans(), min_size=len(text), max_size=len(text)))
    return "".join(c.upper() if f else c for c, f in zip(text, flips, strict=True))


@st.composite
def spellings(draw: st.DrawFn) -> tuple[str, str, int, str]:
    """(scheme, host, port) and one URL of the many that reach it."""
    scheme = draw(st.sampled_from(["http", "https"]))
    host = draw(names_)
    default = 80 if scheme == "http" else 443
    port = draw(st.sampled_from([default, 8080]))
    written = _case(draw, host) + draw(st.sampled_from(["", "."]))
    shown_port = draw(st.sampled_from([":" + str(port), ""] if port == default
                                      else [":" + str(port)]))
    path = draw(st.sampled_from(["", "/", "/mcp"]))
    return scheme, host, port, f"{_case(draw, scheme)}://{written}{shown_port}{path}"


@given(spellings())
def test_every_spelling_of_a_host_has_one_target(case: tuple[str, str, int, str]) -> None:
    scheme, host, port, url = case
    assert tuple(url_target(url) or ()) == (scheme, host, port)
    assert HostPattern.parse_normal(f"{host.upper()}.:{port}").matches(scheme, host, port)


@st.composite
def ipv4_spellings(draw: st.DrawFn) -> tuple[int, str]:
    """An IPv4 address and one of the ways inet_aton reads it."""
    value = draw(st.integers(0, 2**32 - 1))
    octets = list(ipaddress.IPv4Address(value).packed)
    parts = draw(st.integers(1, 4))
    head = octets[:parts - 1]
    tail = int.from_bytes(bytes(octets[parts - 1:]), "big")

    def spell(n: int) -> str:
        return draw(st.sampled_from([str(n), hex(n), hex(n).upper().replace("X", "x"),
                                     "0" + oct(n)[2:]]))

    return value, ".".join([*map(spell, head), spell(tail)])


@given(ipv4_spellings())
def test_every_spelling_of_an_ipv4_address_is_dotted_decimal(case: tuple[int, str]) -> None:
    value, spelled = case
    assert normal_host(spelled) == str(ipaddress.IPv4Address(value))
    assert normal_host(f"[::ffff:{ipaddress.IPv4Address(value)}]") == str(
        ipaddress.IPv4Address(value))


@given(spellings(), st.sampled_from(["evil.example", "10.0.0.1", "0x0a.1", "[::1]"]))
def test_another_host_never_matches_an_exact_binding(case: tuple[str, str, int, str],
                                                     other: str) -> None:
    scheme, host, port, _ = case
    pattern = HostPattern.parse_normal(f"{scheme}://{host}:{port}")
    target = url_target(f"{scheme}://{other}:{port}/")
    assert target is not None and not pattern.matches(*target)


@pytest.mark.parametrize(("url", "host"), [
    ("http://bücher.de/", "xn--bcher-kva.de"),
    ("http://BÜCHER.de./", "xn--bcher-kva.de"),
    ("http://xn--bcher-kva.de/", "xn--bcher-kva.de"),
    ("http://[0:0::1]:80/", "::1"),
    ("http://2130706433/", "127.0.0.1"),
    ("http://0177.1/", "127.0.0.1"),
])
def test_idna_and_address_forms_are_one_spelling(url: str, host: str) -> None:
    target = url_target(url)
    assert target is not None and target.host == host


@pytest.mark.parametrize("url", [
    "http://faß.de/",  # IDNA 2003 and 2008 disagree: refused rather than read one way
    "http://a%2eb/", "http://a\\b.example/", "http://u@x.svc/", "http://x.svc:0/",
    "http://x.svc:99999/", "http://[fe80::1%25eth0]/", "http://256.1.1.1/",
    "http://1.2.3.4.5/", "http://x..svc/", "ftp://x.svc/",
])
def test_hosts_read_more_than_one_way_have_no_target(url: str) -> None:
    assert url_target(url) is None


def test_the_binding_is_each_actors_own() -> None:
    """``spec.credentials`` is the Actor's: the same Resolver answers per Actor."""
    r = resolver([shared(), agent(bind(HOST)),
                  actor("other", ns="team-a", skills=["team-b/helper"])])
    agent_res = r.resolve_actor(ObjectRef("team-a", "agent"))
    other_res = r.resolve_actor(ObjectRef("team-a", "other"))
    assert agent_res is not None and agent_res.ok
    assert other_res is not None
    assert [p.reason for p in other_res.problems] == [P.CREDENTIAL_NOT_BOUND]


def test_the_secrets_checked_and_mounted_are_the_bound_ones_only() -> None:
    """CredentialsReady and outdatedPods (the operator's runtime) read
    ``bound_servers``: a refused set must not ask a pod restart to mount, or the
    operator to look for, a Secret no pod will be given."""
    own = skill("own", ns="team-a", mcpServers=[{
        "name": "own", "url": "http://own.team-a.svc/mcp", "tools": [anon("mine")],
        "headersFrom": {"secretRef": {"name": "own-auth"}}}])
    resolution = resolve_actor([own, shared(), agent(skills=("own", "team-b/helper"))],
                               "team-a/agent")
    assert [p.reason for p in resolution.problems] == [P.CREDENTIAL_NOT_BOUND]
    assert credentials_of(resolution.servers).secrets == ("docker-auth", "own-auth")
    assert credentials_of(resolution.bound_servers).secrets == ("own-auth",)
    assert [u.secret for u in resolution.credentials] == ["docker-auth", "own-auth"]


@given(st.text(max_size=40), st.sampled_from(["http", "https", "HTTP", "ftp"]))
def test_any_authority_has_one_target_or_none_and_never_raises(authority: str,
                                                               scheme: str) -> None:
    target = url_target(f"{scheme}://{authority}/mcp")
    if target is None:
        return
    # The target is a fixed point: its own spelling reads back as itself, and the
    # status's host is a binding pattern that matches exactly it.
    assert normal_host(target.host) == target.host
    assert url_target(str(target)) == target
    assert HostPattern.parse_normal(str(target)).matches(*target)


@given(st.text(max_size=40))
def test_binding_patterns_parse_or_say_why_in_one_value_error(text: str) -> None:
    try:
        HostPattern.parse_normal(text)
    except ValueError as err:
        assert "\n" not in str(err)
