"""A server with ``tokenExchange`` is called with a token exchanged for the caller's
(RFC 8693; ``gateway.exchange``), never with a shared credential.

The caller must be verified (its token is what is exchanged): an anonymous call
is refused, as is one the Actor's ``spec.callers.tokenExchange`` does not
provide for, and one whose exchange fails (the issuer refused it, or could not
be reached): the reason says which, and never falls back to the server's
Secret. The exchanged token goes on the call (``Call.exchanged``) for the
forward to send in place of the server's header of that name.

Whether a call meets this guard is decided from its set (its tool's server has
``tokenExchange`` there); the forward checks again against the server it is
about to call (a reload may have given it ``tokenExchange`` since), and has the
token exchanged then if it was not for that server: a call never reaches a
server that wants an exchanged token without one.
"""

from __future__ import annotations

from pathlib import Path

from skillop.gateway.exchange import ExchangeFailed, Exchanger
from skillop.gateway.pipeline import CONTINUE, Call, Refuse, Verdict
from skillop.gateway.served import ServedSet, ServedTool
from skillop.model.callers import CallersSpec


class TokenExchange:
    """Exchanges the caller's token for servers that ask for it; one ``Exchanger``
    kept while the set's ``spec.callers`` issuer and client stay the same."""

    __slots__ = ("_ca_file", "_exchanger", "_secrets_dir")

    def __init__(self, secrets_dir: Path, *, ca_file: Path | None = None) -> None:
        """``secrets_dir``: where the client Secret is mounted; ``ca_file``: trusted
        for the issuer besides the system's CAs."""
        self._secrets_dir = secrets_dir
        self._ca_file = ca_file
        self._exchanger: Exchanger | None = None

    def applies(self, served: ServedSet, tool: ServedTool | None) -> bool:
        server = (served.upstreams.get(tool.upstream)
                  if tool is not None and tool.upstream is not None else None)
        return server is not None and server.token_exchange is not None

    async def __call__(self, call: Call) -> Verdict:
        link = call.link
        wanted = link.upstream.token_exchange if link is not None else None
        if link is None or wanted is None:
            return CONTINUE
        said = f"server {link.label} is called with tokens exchanged for the caller's"
        token = call.caller.token
        if call.caller.anonymous or token is None:
            return Refuse(f"{said} (tokenExchange), and this call has no verified caller")
        exchanger = self._exchanger_for(call.served.callers)
        if exchanger is None:
            return Refuse(f"{said} (tokenExchange), and the Actor's spec.callers.tokenExchange"
                          " is not set")
        try:
            call.exchanged = await exchanger.token(token, link.upstream.key, wanted)
        except ExchangeFailed as failed:
            return Refuse(f"{said}, and the exchange failed: {failed}")
        call.exchanged_for = link.upstream
        return CONTINUE

    def _exchanger_for(self, callers: CallersSpec | None) -> Exchanger | None:
        client = callers.token_exchange if callers is not None else None
        if callers is None or client is None:
            return None
        kept = self._exchanger
        if kept is None or kept.issuer != callers.issuer or kept.client != client:
            # Other settings: nothing exchanged under the old ones is used again.
            kept = self._exchanger = Exchanger(callers.issuer, client, self._secrets_dir,
                                               ca_file=self._ca_file)
        return kept
