"""The one mapper at the transport seam: each library exception becomes one kind
of ``errors.UpstreamError``, whose audit text never carries the upstream's words."""

from __future__ import annotations

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from skillop.gateway import errors
from skillop.sources.redaction import Redactor

SECRET = "s3cr3t-value-1234"


def _validation_error() -> ValidationError:
    class Model(BaseModel):
        n: int

    try:
        Model.model_validate({"n": "x"})
    except ValidationError as exc:
        return exc
    raise AssertionError("validated")


@pytest.mark.parametrize(("raised", "kind", "agent"), [
    (errors.Unreachable(f"unexpected answer type 'text/{SECRET}'", audit="the answer is neither"
                        " JSON nor an event stream"), errors.ConnectionLost,
     "upstream up unavailable: unexpected answer type 'text/[redacted]'"),
    (errors.RpcFailed(-32000, f"boom {SECRET}"), errors.RpcError,
     "upstream up answered MCP error -32000: boom [redacted]"),
    (MCPError(-32001, f"said {SECRET}"), errors.RpcError,
     "upstream up answered MCP error -32001: said [redacted]"),
    (MCPError(types.CONNECTION_CLOSED, "closed"), errors.ConnectionLost,
     "upstream up unavailable: connection lost"),
    (httpx2.ConnectError("refused"), errors.ConnectionLost,
     "upstream up unavailable: connection lost"),
    (anyio.ClosedResourceError(), errors.ConnectionLost,
     "upstream up unavailable: connection lost"),
    (ConnectionResetError(), errors.ConnectionLost, "upstream up unavailable: connection lost"),
    (RuntimeError("schema"), errors.BadAnswer,
     "upstream up answered structured content that does not match its output schema"),
    (_validation_error(), errors.BadAnswer,
     "upstream up answered something that is not a tool result"),
], ids=["unreachable", "rpc", "sdk-rpc", "sdk-closed", "httpx", "anyio", "os", "schema",
        "invalid"])
def test_each_failure_maps_to_one_kind_with_safe_texts(
        raised: BaseException, kind: type[errors.CallFailed], agent: str) -> None:
    with pytest.raises(kind) as caught, errors.Mapped("up", Redactor([SECRET])):
        raise raised
    assert isinstance(caught.value, errors.CallFailed)
    assert str(caught.value) == agent
    assert SECRET not in caught.value.audit and "[redacted]" not in caught.value.audit
    assert caught.value.audit.startswith("upstream up ")


@pytest.mark.parametrize("ours", [errors.SessionLost(), errors.asks_input("up")])
def test_the_gateways_own_errors_pass_unchanged(ours: errors.UpstreamError) -> None:
    with pytest.raises(type(ours)) as caught, errors.Mapped("up", Redactor(())):
        raise ours
    assert caught.value is ours


def test_the_names_the_call_path_catches_are_kinds_of_one_base() -> None:
    assert issubclass(errors.ConnectTimedOut, errors.UpstreamUnavailable)
    for kind in (errors.UpstreamUnavailable, errors.CallFailed, errors.SessionLost):
        assert issubclass(kind, errors.UpstreamError)
