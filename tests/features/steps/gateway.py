"""``skillop gateway`` serving an Actor's tool set, called with the MCP SDK client."""

from __future__ import annotations

from typing import Any

from behave import given, then, when
from gatewaykit import GatewayProcess, Volume, call_once, text_of, toolset_files

from skillop.sources.mcp_session import first


@given('the gateway serves the tool set of the Actor "{ref}"')
def gateway(context: Any, ref: str) -> None:
    folder = context.manifests.folder
    volume = Volume(folder / "toolset")
    volume.write(toolset_files(context.manifests.docs(), ref))
    (folder / "secrets").mkdir()
    context.gateway = GatewayProcess(volume.root, folder / "secrets").__enter__()
    context.add_cleanup(context.gateway.stop)


@when('the Actor calls "{name}"')
def call(context: Any, name: str) -> None:
    context.result, context.error = None, None
    context.calls_before = len(context.docker.calls)
    try:
        context.result = call_once(context.gateway.url, name)
    except Exception as err:  # the MCP error the gateway answers, inside the SDK's groups
        context.error = first(err, Exception)


@then("the call is answered")
def answered(context: Any) -> None:
    assert context.error is None, context.error
    assert not context.result.is_error, text_of(context.result)


@then('the call is refused with "{message}"')
def refused(context: Any, message: str) -> None:
    assert context.result is None, text_of(context.result)
    assert message in str(context.error), repr(context.error)


def _called(context: Any) -> list[str]:
    """What the MCP server was asked to call since the Actor's call."""
    return [called for called, _ in context.docker.calls[context.calls_before:]]


@then('the MCP server received a call of "{name}"')
def server_called(context: Any, name: str) -> None:
    assert name in _called(context), _called(context)


@then('the MCP server received no call of "{name}"')
def server_not_called(context: Any, name: str) -> None:
    assert name not in _called(context), _called(context)
