"""The answer to a forwarded call, as the gateway writes it, is the SDK serializer's:
byte for byte what the pipeline before the union's member was asked alone wrote
(``_old_shaped``, kept here as the reference), for any tool result an upstream may
send, valid or not (docs/gateway.md, Performance)."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from mcp_types import SERVER_INFO_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from skillop.gateway.server import _shaped, _surface

_SERVER_INFO = {"name": "skillop-gateway", "version": "0.0.0"}
_VERSIONS = sorted({*MODERN_PROTOCOL_VERSIONS, "2025-11-25", "2025-06-18"})


def _old_shaped(method: str, version: str, result: types.Result,
                server_info: dict[str, Any]) -> bytes:
    """The serializer pipeline as it was: the whole union, always."""
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    if version in MODERN_PROTOCOL_VERSIONS:
        dumped.setdefault("resultType", "complete")
        meta = dumped.get("_meta")
        dumped["_meta"] = {**(meta if isinstance(meta, dict) else {}),
                           SERVER_INFO_META_KEY: server_info}
    surface = _surface(method, version)
    return surface.dump_json(surface.validate_python(dumped, by_name=False), by_alias=True,
                             exclude_none=True)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8)
_anything = _json | st.just(float("nan")) | st.just(float("inf")) | st.just(10**30)


def _mostly(value: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``value``, or now and then anything at all (an upstream's mistake)."""
    return st.integers(0, 19).flatmap(lambda i: _anything if i == 0 else value)


def _maybe(key: str, value: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(st.just({}), value.map(lambda v: {key: v}))


def _item(kind: str, fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    parts = [_mostly(v).map(lambda value, key=k: {key: value}) for k, v in fields.items()]
    parts += [_maybe("annotations", st.fixed_dictionaries(
        {}, optional={"audience": st.lists(_mostly(st.sampled_from(["user", "assistant"])),
                                           max_size=2),
                      "priority": st.floats(allow_nan=False) | st.integers(),
                      "lastModified": st.text(max_size=25)})),
              _maybe("_meta", _json), _maybe("extra", _anything)]
    return st.tuples(st.sampled_from([kind] * 19 + ["other"]), *parts).map(
        lambda t: {"type": t[0]} | {k: v for d in t[1:] for k, v in d.items()})


_resource = st.fixed_dictionaries(
    {"uri": st.sampled_from(["file:///a", "https://x/y", "not a uri", ""])},
    optional={"mimeType": st.text(max_size=8), "text": st.text(max_size=20),
              "blob": st.sampled_from(["aGk=", "not base64!", ""]), "_meta": _json})
_content: st.SearchStrategy[Any] = st.one_of(
    _item("text", {"text": st.text(max_size=40)}),
    _item("image", {"data": st.sampled_from(["aGk=", "!!", ""]),
                    "mimeType": st.sampled_from(["image/png", ""])}),
    _item("audio", {"data": st.sampled_from(["aGk=", "!!"]),
                    "mimeType": st.sampled_from(["audio/wav", ""])}),
    _item("resource_link", {"uri": st.sampled_from(["file:///a", "x", ""]),
                            "name": st.text(max_size=8), "title": st.text(max_size=8),
                            "size": st.integers()}),
    _item("resource", {"resource": _resource}),
)
_meta = _mostly(st.dictionaries(st.sampled_from([SERVER_INFO_META_KEY, "k", "progressToken"]),
                                _json, max_size=3))
_results = st.fixed_dictionaries(
    {"content": _mostly(st.lists(_mostly(_content), max_size=4))},
    optional={
              "structuredContent": _mostly(st.dictionaries(st.text(max_size=5), _json,
                                                           max_size=3)),
              "isError": _mostly(st.booleans()),
              "resultType": _mostly(st.sampled_from(["complete"] * 5
                                                    + ["input_required", "", "x"])),
              "_meta": _meta,
              "inputRequests": _mostly(st.dictionaries(st.text(max_size=3), _json,
                                                       max_size=2)),
              "requestState": _mostly(st.text(max_size=5)),
              "extra": _anything})


def _outcome(shape: Any, result: types.Result, version: str) -> tuple[str, Any]:
    try:
        return "bytes", shape("tools/call", version, result, _SERVER_INFO)
    except Exception as exc:  # the kind and words of any failure must agree
        return type(exc).__name__, str(exc)


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=_results, version=st.sampled_from([*_VERSIONS, *MODERN_PROTOCOL_VERSIONS * 4]))
def test_a_forwarded_result_is_answered_as_the_whole_union_answers_it(
        raw: dict[str, Any], version: str) -> None:
    try:  # as the gateway's forward reads an upstream's answer (upstream.py)
        result = types.CallToolResult.model_validate(raw)
    except ValidationError as exc:
        event(f"not a tool result: {exc.errors()[0]['type']} {exc.errors()[0]['loc'][:3]}")
        return  # "not a tool result": answered before any serializer
    outcome = _outcome(_shaped, result, version)
    event(f"{version}: {outcome[0]}")
    assert outcome == _outcome(_old_shaped, result, version)


@settings(max_examples=300, deadline=None)
@given(text=st.text(), is_error=st.booleans(), version=st.sampled_from(_VERSIONS))
def test_the_gateways_own_results_are_answered_as_the_whole_union_answers_them(
        text: str, is_error: bool, version: str) -> None:
    result = types.CallToolResult(content=[types.TextContent(text=text)], is_error=is_error)
    assert _outcome(_shaped, result, version) == _outcome(_old_shaped, result, version)


def test_valid_results_of_every_content_kind_take_the_member_and_agree() -> None:
    raw = {"content": [{"type": "text", "text": "hi"},
                       {"type": "image", "data": "aGk=", "mimeType": "image/png"},
                       {"type": "audio", "data": "aGk=", "mimeType": "audio/wav"},
                       {"type": "resource_link", "uri": "file:///a", "name": "a"},
                       {"type": "resource", "resource": {"uri": "file:///a", "text": "t"}},
                       {"type": "resource", "resource": {"uri": "file:///b", "blob": "aGk="}}],
           "structuredContent": {"a": [1, 2.5, None, "x"]}, "isError": True,
           "_meta": {"k": 1}}
    result = types.CallToolResult.model_validate(raw)
    for version in _VERSIONS:
        assert _shaped("tools/call", version, result, _SERVER_INFO) == \
            _old_shaped("tools/call", version, result, _SERVER_INFO)
