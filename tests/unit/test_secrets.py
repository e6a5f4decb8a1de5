"""Secrets stay in Secrets (API "Secrets and tenancy"), in the model and the resolver.

A URL with userinfo is refused without repeating it; credential-looking query
parameters and literal env values under credential-looking names are warned
about (names only); ``env[].valueFrom.secretKeyRef`` is a reference in the
ToolSet; ``refreshInterval`` has a floor of 10s.
"""

from __future__ import annotations

import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from skillkit import actor, parse_problems, resolve_actor, resolve_skill, skill

from skillop.model import problems as P
from skillop.model.credentials import (
    credential_query_names,
    has_userinfo,
    looks_like_credential,
)
from skillop.model.durations import duration_seconds
from skillop.model.specs import MIN_REFRESH_SECONDS, EnvVar, McpServer

URL = "http://gateway.tools.svc/mcp"
PASSWORD = "hunter2-Secr3t"


def server(**fields: Any) -> dict[str, Any]:
    return {"name": "gw", "url": URL, **fields}


def stdio(*env: dict[str, Any]) -> dict[str, Any]:
    return {"name": "local", "command": ["mcp-server"], "env": list(env),
            "tools": [{"name": "run"}]}


# -- userinfo ------------------------------------------------------------------------


@pytest.mark.parametrize("url", [
    f"http://bot:{PASSWORD}@gateway.tools.svc/mcp",
    f"https://bot:{PASSWORD}@gateway.tools.svc:8443/mcp?x=1",
    f"http://{PASSWORD}@gateway.tools.svc/mcp",
])
def test_a_url_with_userinfo_is_invalid_spec_naming_the_field_not_the_password(url: str) -> None:
    problems = parse_problems(skill("gw", mcpServers=[server(url=url)]))
    assert [(p.field, p.reason) for p in problems] == [("spec.mcpServers[0].url", P.INVALID_SPEC)]
    assert "headersFrom" in problems[0].message
    assert PASSWORD not in problems[0].line()


@pytest.mark.parametrize("url", [
    "http://gateway.tools.svc/mcp/@user",      # '@' in the path is no userinfo
    "http://gateway.tools.svc/mcp?who=a@b",    # nor in the query
    "http://gateway.tools.svc:8080/mcp#@",
])
def test_an_at_sign_after_the_host_is_no_userinfo(url: str) -> None:
    assert parse_problems(skill("gw", mcpServers=[server(url=url)])) == []


_HOST = st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z0-9-]{1,10}){0,3}", fullmatch=True)
_TAIL = st.from_regex(r"(:[0-9]{1,5})?(/[A-Za-z0-9@._~-]*){0,3}(\?[A-Za-z0-9@=&._~-]*)?",
                      fullmatch=True)
_USERINFO_CHARS = string.ascii_letters + string.digits + "%!$&'()*+,;=-._~"
_USER = st.text(alphabet=_USERINFO_CHARS, max_size=12)
_PASSWORD = st.text(alphabet=_USERINFO_CHARS + ":", min_size=6, max_size=30)


@settings(max_examples=200, deadline=None)
@given(scheme=st.sampled_from(["http", "https"]), user=_USER, password=_PASSWORD, host=_HOST,
       tail=_TAIL)
def test_userinfo_is_always_found_and_the_password_never_repeated(
        scheme: str, user: str, password: str, host: str, tail: str) -> None:
    secret = f"pw{password}"
    url = f"{scheme}://{user}:{secret}@{host}{tail}"
    assert has_userinfo(url)
    problems = parse_problems(skill("gw", mcpServers=[server(url=url)]))
    assert [(p.field, p.reason) for p in problems] == [("spec.mcpServers[0].url", P.INVALID_SPEC)]
    assert secret not in problems[0].line()


@settings(max_examples=200, deadline=None)
@given(scheme=st.sampled_from(["http", "https"]), host=_HOST, tail=_TAIL)
def test_urls_without_userinfo_are_accepted(scheme: str, host: str, tail: str) -> None:
    url = f"{scheme}://{host}{tail}"
    assert not has_userinfo(url)
    assert parse_problems(skill("gw", mcpServers=[server(url=url)])) == []


# -- credential-looking names --------------------------------------------------------


@pytest.mark.parametrize("name", [
    "token", "access_token", "accessToken", "accesstoken", "api_key", "apiKey", "APIKEY",
    "x-api-key", "key", "client_secret", "password", "passwd", "DB_PASSWORD", "pwd", "auth",
    "Authorization", "oauth_token", "sig", "X-Amz-Signature", "X-Amz-Credential",
    "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "jwt", "SECRET",
])
def test_credential_like_names(name: str) -> None:
    assert looks_like_credential(name)


@pytest.mark.parametrize("name", [
    "page", "limit", "cursor", "q", "format", "region", "PATH", "HOME", "LANG", "LOG_LEVEL",
    "design", "HTTPSProxy", "version", "sv", "MODE",
])
def test_ordinary_names(name: str) -> None:
    assert not looks_like_credential(name)


_WORD = st.from_regex(r"[a-z]{1,8}", fullmatch=True)
_CRED = st.sampled_from(["token", "key", "secret", "password", "auth", "sig"])


@settings(max_examples=300, deadline=None)
@given(before=st.lists(_WORD, max_size=3), word=_CRED, after=st.lists(_WORD, max_size=3),
       sep=st.sampled_from(["_", "-", "."]), upper=st.booleans())
def test_a_credential_word_as_a_word_part_is_always_found(before: list[str], word: str,
                                                          after: list[str], sep: str,
                                                          upper: bool) -> None:
    name = sep.join([*before, word, *after])
    assert looks_like_credential(name.upper() if upper else name)
    # camelCase, as in accessToken or xApiKey
    camel = "".join([*before[:1], *(w.capitalize() for w in [*before[1:], word, *after])])
    assert looks_like_credential(camel)


def test_credential_query_names_are_listed_once_in_order() -> None:
    url = f"{URL}?page=2&access_token=abc&Signature=x&token=1&token=2"
    assert credential_query_names(url) == ["access_token", "Signature", "token"]
    assert credential_query_names(URL) == []


# -- warnings, with names and never values ---------------------------------------------


def test_credential_query_parameters_warn_on_the_skill_and_the_actor() -> None:
    url = f"{URL}?team=a&api_key={PASSWORD}"
    docs = [skill("gw", mcpServers=[server(url=url)]), actor("agent", skills=["gw"])]
    for resolution in (resolve_skill(docs, "team-a/gw"), resolve_actor(docs, "team-a/agent")):
        assert resolution.ok
        warned = [w for w in resolution.warnings if "api_key" in w]
        assert len(warned) == 1, resolution.warnings
        assert "spec.mcpServers[0].url" in warned[0] and "ConfigMaps" in warned[0]
        assert "team" not in warned[0].split("parameter(s)")[1].split("look")[0]
        assert PASSWORD not in " ".join(resolution.warnings)


def test_a_url_without_credential_parameters_warns_nothing() -> None:
    docs = [skill("gw", mcpServers=[server(url=f"{URL}?page=1")])]
    assert resolve_skill(docs, "team-a/gw").warnings == ()


def test_literal_env_values_under_credential_names_warn_and_references_do_not() -> None:
    docs = [skill("local", mcpServers=[stdio(
        {"name": "MODE", "value": "fast"},
        {"name": "GITHUB_TOKEN", "value": PASSWORD},
        {"name": "API_KEY", "valueFrom": {"secretKeyRef": {"name": "keys", "key": "api"}}},
    )])]
    resolution = resolve_skill(docs, "team-a/local")
    assert resolution.ok
    assert len(resolution.warnings) == 1, resolution.warnings
    warning = resolution.warnings[0]
    assert "spec.mcpServers[0].env[1]" in warning and "GITHUB_TOKEN" in warning
    assert "valueFrom.secretKeyRef" in warning and PASSWORD not in warning


# -- env: value xor valueFrom; a reference in the ToolSet ----------------------------------


@pytest.mark.parametrize("entry", [
    {"name": "A"},
    {"name": "A", "value": "1", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
])
def test_env_needs_exactly_one_of_value_and_value_from(entry: dict[str, Any]) -> None:
    problems = parse_problems(skill("local", mcpServers=[stdio(entry)]))
    assert [(p.field, p.reason) for p in problems] == [
        ("spec.mcpServers[0].env[0]", P.INVALID_SPEC)]
    assert "exactly one of value and valueFrom" in problems[0].message


@pytest.mark.parametrize("value_from", [
    {},
    {"secretKeyRef": {"name": "s"}},
    {"secretKeyRef": {"name": "s", "key": "k"}, "value": "leaked"},
    {"configMapKeyRef": {"name": "c", "key": "k"}},
    {"secretKeyRef": {"name": "Not A Name", "key": "k"}},
])
def test_value_from_is_a_secret_key_reference_and_nothing_else(value_from: Any) -> None:
    entry = {"name": "A", "valueFrom": value_from}
    problems = parse_problems(skill("local", mcpServers=[stdio(entry)]))
    assert problems and all(p.reason == P.INVALID_SPEC for p in problems)
    assert all(p.field.startswith("spec.mcpServers[0].env[0].valueFrom") for p in problems)


def test_the_toolset_carries_value_from_as_a_reference() -> None:
    docs = [skill("local", mcpServers=[stdio(
        {"name": "MODE", "value": "fast"},
        {"name": "GITHUB_TOKEN", "valueFrom": {"secretKeyRef": {"name": "gh", "key": "token"}}},
    )]), actor("agent", skills=["local"])]
    document = resolve_actor(docs, "team-a/agent").document
    [entry] = document["mcpServers"]
    assert entry["skill"] == "team-a/local" and entry["transport"] == "stdio"
    assert entry["env"] == [
        {"name": "MODE", "value": "fast"},
        {"name": "GITHUB_TOKEN", "valueFrom": {"secretKeyRef": {"name": "gh", "key": "token"}}},
    ]
    assert "value" not in entry["env"][1]


def test_env_var_model() -> None:
    ref = EnvVar.model_validate({"name": "T", "valueFrom": {"secretKeyRef":
                                                            {"name": "s", "key": "k"}}})
    assert ref.value is None and ref.value_from is not None
    assert ref.value_from.secret_key_ref.name == "s" and ref.value_from.secret_key_ref.key == "k"


# -- refreshInterval floor -------------------------------------------------------------


@pytest.mark.parametrize("interval", ["1ms", "9s", "9999ms", "9s999ms", "0s", "0m"])
@pytest.mark.parametrize("where", ["skill", "server"])
def test_refresh_interval_below_ten_seconds_is_invalid(interval: str, where: str) -> None:
    if where == "skill":
        doc = skill("gw", mcpServers=[server()], refreshInterval=interval)
        field = "spec.refreshInterval"
    else:
        doc = skill("gw", mcpServers=[server(refreshInterval=interval)])
        field = "spec.mcpServers[0].refreshInterval"
    problems = parse_problems(doc)
    assert [(p.field, p.reason) for p in problems] == [(field, P.INVALID_SPEC)]
    assert "10s" in problems[0].message


@pytest.mark.parametrize("interval", ["10s", "10000ms", "9s1000ms", "1m", "5m", "1h30m", "24h"])
def test_refresh_interval_of_ten_seconds_or_more_is_valid(interval: str) -> None:
    assert parse_problems(skill("gw", mcpServers=[server(refreshInterval=interval)],
                                refreshInterval=interval)) == []


def test_refresh_interval_beyond_a_kubernetes_duration_is_invalid() -> None:
    problems = parse_problems(skill("gw", mcpServers=[server()],
                                    refreshInterval="9999999999999h"))
    assert [p.field for p in problems] == ["spec.refreshInterval"]


_PART = st.tuples(st.integers(0, 20000), st.sampled_from(["ms", "s", "m", "h"]))


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(_PART, min_size=1, max_size=4))
def test_the_floor_is_exactly_ten_seconds(parts: list[tuple[int, str]]) -> None:
    text = "".join(f"{n}{unit}" for n, unit in parts)
    problems = parse_problems(skill("gw", mcpServers=[server(refreshInterval=text)]))
    assert (problems == []) == (duration_seconds(text) >= MIN_REFRESH_SECONDS)


def test_the_model_refuses_what_the_crd_refuses() -> None:
    with pytest.raises(ValueError, match="10s"):
        McpServer.model_validate({"name": "x", "url": URL, "refreshInterval": "1ms"})
