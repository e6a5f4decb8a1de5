"""A stdio upstream: a child process of the gateway, its stderr relayed redacted."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Final

from mcp.client.session import ClientSession, MessageHandlerFnT
from mcp.client.stdio import StdioServerParameters, stdio_client

from skillop.gateway import errors
from skillop.gateway.secrets import env_of, secret_values
from skillop.gateway.transport.base import CLIENT_INFO, Bounds, Calls, Transport
from skillop.gateway.transport.session import SessionCalls
from skillop.sources.redaction import Redactor


class StdioTransport(Transport):
    """The upstream's ``command`` and ``args``, started with its ``env`` (Secret
    values among them), called through the SDK session."""

    @asynccontextmanager
    async def open(self, bounds: Bounds, on_message: MessageHandlerFnT,
                   ) -> AsyncIterator[tuple[ClientSession, Calls]]:
        """The initialized session to the child, whose stderr is relayed redacted (a
        server printing its environment would print its Secret values)."""
        upstream = self.upstream
        env = env_of(upstream, self.settings.secrets_dir)
        self._secret_values(secret_values(upstream, env))
        command = list(upstream.command or ())
        async with AsyncExitStack() as stack:
            errlog = stack.enter_context(_RedactedStderr(self.redactor, self.label))
            read, write = await stack.enter_async_context(stdio_client(StdioServerParameters(
                command=command[0], args=[*command[1:], *(upstream.args or ())], env=env),
                errlog=errlog.writer))
            errlog.started()
            session = await stack.enter_async_context(ClientSession(
                read, write, message_handler=on_message, client_info=CLIENT_INFO))
            await session.initialize()
            yield session, SessionCalls(session, self)

    def explain(self, exc: BaseException, bounds: Bounds) -> tuple[str, str]:
        command = self.upstream.command or ("",)
        return errors.explain(exc, bounds, self.redactor, command=command[0])


class _RedactedStderr:
    """A pipe for a stdio child's stderr, relayed line by line to the gateway's own
    stderr with every Secret value redacted, each line marked as the child's (a
    child cannot write what reads as the gateway's audit line).

    A line is redacted whole, then bounded: one read up to ``_READ`` characters,
    of which at most the first ``_SHOWN`` are relayed, so a value is never cut in
    two before it is recognised (a value cut off at the read's end lies far past
    what is shown); the rest of a longer line is read and dropped."""

    _READ: Final = 1024 * 1024
    _SHOWN: Final = 64 * 1024

    def __init__(self, redactor: Redactor, label: str) -> None:
        self._redactor = redactor
        self._label = label
        read, write = os.pipe()
        self._read = os.fdopen(read, "r", encoding="utf-8", errors="replace")
        self.writer = os.fdopen(write, "w")

    def __enter__(self) -> _RedactedStderr:
        threading.Thread(target=self._relay, daemon=True,
                         name=f"stderr of {self._label}").start()
        return self

    def started(self) -> None:
        """The child holds its copy of the pipe: ours closes, so that the relay ends
        when the child does."""
        self.writer.close()

    def __exit__(self, *exc: object) -> None:
        self.writer.close()

    def _relay(self) -> None:
        with self._read:
            while line := self._read.readline(self._READ):
                whole = line.endswith("\n")
                text = self._redactor(line.rstrip("\n"))
                cut = " [line cut]" if len(text) > self._SHOWN or not whole else ""
                sys.stderr.write(f"[upstream {self._label} stderr] {text[:self._SHOWN]}{cut}\n")
                sys.stderr.flush()
                while not whole and (line := self._read.readline(self._READ)):
                    whole = line.endswith("\n")
