"""Where tokens exchanged for the Actor's callers may go (docs/security.md, Token
exchange).

A server with ``tokenExchange`` is sent, at each call, a token the issuer made
for the caller with the server's audience: the caller's authority at that
audience. A server declared by a Skill of the Actor's own namespace was chosen
there; one reached from a Skill of another namespace was chosen by that
namespace, which may point its URL anywhere and name any audience. Its calls
carry exchanged tokens only when the Actor's ``spec.callers.tokenExchange.hosts``
binds the server's host (``[scheme://]host[:port]`` globs over the host in its one
normal spelling, as ``spec.credentials`` binds Secrets); anything else is
``TokenExchangeNotBound``: the set is refused, and the last good one stays.

Pure: the CLI, the webhook and the operator read the same answer.
"""

from __future__ import annotations

from collections.abc import Iterable

from skillop.model import problems as P
from skillop.model.callers import CallersSpec
from skillop.model.hostpatterns import HostPattern
from skillop.model.problems import Problem, Subject
from skillop.model.toolset import ServerEntry
from skillop.model.urls import url_target
from skillop.resolve.credentials import UNREADABLE_HOST

FIELD = "spec.callers.tokenExchange.hosts"


def check_token_exchange(subject: Subject, callers: CallersSpec | None,
                         servers: Iterable[ServerEntry], *, origin: str | None = None,
                         ) -> tuple[tuple[Problem, ...], tuple[str, ...]]:
    """``TokenExchangeNotBound`` for each server of another namespace's Skill with
    ``tokenExchange`` at a host the Actor does not bind, and a warning for each
    server with ``tokenExchange`` the Actor cannot exchange tokens for (no
    ``spec.callers.tokenExchange``: its calls are refused)."""
    client = callers.token_exchange if callers is not None else None
    patterns: tuple[HostPattern, ...] | None = None
    problems: list[Problem] = []
    warnings: list[str] = []
    for server in servers:
        if server.token_exchange is None:
            continue
        if client is None:
            warnings.append(f"{subject}: server {server.name!r} of skill {server.skill} calls"
                            " with exchanged tokens (tokenExchange) but spec.callers."
                            "tokenExchange is not set: its calls are refused")
        if server.skill.partition("/")[0] == subject.namespace:
            continue
        if patterns is None:
            patterns = tuple(HostPattern.parse_normal(h) for h in client.hosts) if client else ()
        target = url_target(server.url) if server.url is not None else None
        if target is None or not any(p.matches(*target) for p in patterns):
            problems.append(Problem(subject, FIELD, P.TOKEN_EXCHANGE_NOT_BOUND,
                                    _unbound_message(server, target), origin))
    return tuple(problems), tuple(warnings)


def _unbound_message(server: ServerEntry, target: object) -> str:
    host = str(target) if target is not None else UNREADABLE_HOST
    fix = (f"; if this namespace trusts it, add {host!r} to {FIELD}"
           if target is not None else "")
    return (f"server {server.name!r} of skill {server.skill} (another namespace's) would be"
            f" sent tokens exchanged for this Actor's callers at {host}, which {FIELD} does"
            f" not bind{fix}")
