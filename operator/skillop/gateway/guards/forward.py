"""The call upstream, under the tool's name there, within its ``timeoutSeconds``.

The result goes back as the upstream gave it, minus any secret value it echoes
(the link redacts it). An upstream that forgot the session (restarted, expired
it) gets the call once more, in a new one, the definition checked again. The
server called must have had the caller's token exchanged for it if it wants one
(``token_exchange``): checked before each attempt, against the link it goes to.
"""

from __future__ import annotations

import asyncio
import time

from skillop.gateway.guards.definition_pin import pin
from skillop.gateway.guards.token_exchange import TokenExchange
from skillop.gateway.observe import NOTHING, Observer
from skillop.gateway.pipeline import CONTINUE, Call, Done, Refuse, Verdict, failed
from skillop.gateway.served import ServedSet, ServedTool
from skillop.gateway.upstream import SessionLost


class Forward:
    __slots__ = ("_exchange", "_observer")

    def __init__(self, *, observer: Observer = NOTHING,
                 exchange: TokenExchange | None = None) -> None:
        """``observer``: the forward's span (its time is the record's upstream share);
        ``exchange``: the call path's token exchange, for a server that wants one
        the call was not exchanged for (None: such a call is refused)."""
        self._observer = observer
        self._exchange = exchange

    def applies(self, served: ServedSet, tool: ServedTool | None) -> bool:
        return tool is not None and tool.source != "agent_skill"

    async def __call__(self, call: Call) -> Verdict:
        tool = call.tool
        assert tool is not None
        timeout = tool.timeout_seconds or call.default_timeout
        bound = Bound(timeout)
        began = time.perf_counter()
        name = tool.upstream_name
        assert name is not None
        try:
            if self._observer.tracing is None:  # no span: not even an empty one
                return await self._attempts(call, name)
            with self._observer.upstream(call.label or "", name):
                return await self._attempts(call, name)
        except asyncio.CancelledError:
            if bound.expired_alone():
                return failed(f"timed out after {timeout:g} s (timeoutSeconds)")
            raise
        finally:
            bound.disarm()
            call.upstream_seconds += time.perf_counter() - began


    async def _attempts(self, call: Call, name: str) -> Verdict:
        """``name``: the tool's upstream name. ``CallFailed`` is the transport's: the
        pipeline turns it into a verdict."""
        link = call.link
        assert link is not None and call.conn is not None
        if link.upstream.token_exchange is not None or call.exchanged is not None:
            verdict = await self._exchanged(call)
            if verdict is not CONTINUE:
                return verdict
        try:
            return Done(await link.call(call.conn, name, call.arguments,
                                        exchanged=call.exchanged))
        except SessionLost:
            pass
        verdict = await pin(call)
        if verdict is CONTINUE:
            verdict = await self._exchanged(call)
        if verdict is not CONTINUE:
            return verdict
        assert call.link is not None and call.conn is not None
        try:
            return Done(await call.link.call(call.conn, name, call.arguments,
                                             exchanged=call.exchanged))
        except SessionLost:
            return failed(f"upstream {call.link.label} unavailable: it lost the new session"
                          " too")

    async def _exchanged(self, call: Call) -> Verdict:
        """``CONTINUE`` when the call carries what the server it goes to wants: no
        exchanged token (it wants none), or one exchanged for it; else the token
        exchange's verdict, made now (fails closed)."""
        link = call.link
        assert link is not None
        server = link.upstream
        if server.token_exchange is None and call.exchanged is None:
            return CONTINUE
        if call.exchanged is not None and (call.exchanged_for is server
                                           or call.exchanged_for == server):
            return CONTINUE
        call.exchanged = call.exchanged_for = None
        if server.token_exchange is None:
            return CONTINUE  # a token exchanged for another server is not sent here
        if self._exchange is None:
            return Refuse(f"server {link.label} is called with tokens exchanged for the"
                          " caller's (tokenExchange), which this call path cannot do")
        return await self._exchange(call)


class Bound:
    """A forward's ``timeoutSeconds``: one timer of the event loop that cancels the
    calling task when it fires (the gateway runs on anyio's asyncio backend).

    An anyio cancel scope bounded the forward before; made and left on every call,
    with the anyio state it keeps for each new task (every request's is new), it
    cost a call through an idle gateway about a tenth of its CPU
    (bench/gateway_ab.py ``--pause``). This is what ``asyncio.timeout`` does, less
    its own bookkeeping (about half as costly again): the cancellation it sends is
    told from any other by the task's cancel count, as ``asyncio.timeout`` tells
    it, so a cancellation from outside (the client's ``notifications/cancelled``,
    its disconnect, the gateway's shutdown) stays a cancellation, even when the
    timer fired too."""

    __slots__ = ("_cancelling", "_expired", "_task", "_timer")

    def __init__(self, seconds: float) -> None:
        # The loop asked once: each asking is a getpid() system call (CPython checks
        # the running loop's process), and ``current_task()`` would ask again.
        loop = asyncio.get_running_loop()
        task = asyncio.current_task(loop)
        assert task is not None  # a call runs in a task
        self._task = task
        self._cancelling = task.cancelling()
        self._expired = False
        self._timer = loop.call_later(seconds, self._expire)

    def _expire(self) -> None:
        self._expired = True
        self._task.cancel()

    def expired_alone(self) -> bool:
        """Whether the cancellation being raised is the timer's alone (its own is
        taken back; nobody else's is pending)."""
        return self._expired and self._task.uncancel() <= self._cancelling

    def disarm(self) -> None:
        self._timer.cancel()
