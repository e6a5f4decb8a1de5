"""Which of the Actor's Secrets its set sends where, and whether the Actor chose it.

For calls, a Secret a server names (``headersFrom.secretRef``,
``env[].valueFrom.secretKeyRef``) is the Actor's namespace's object of that name
(docs/security.md). A server declared by a Skill of the Actor's own namespace
was written there, with its host and its Secret: that namespace chose both. A
server reached from a Skill of another namespace was chosen by that namespace,
which may point it anywhere and change it at any time; the Actor's Secret goes
there only when the Actor's ``spec.credentials`` binds the Secret to the
server's host (a ``[scheme://]host[:port]`` glob, ``model.hostpatterns``, over
the host in its one normal spelling, ``model.urls.url_target``) or, for a stdio
server, to its exact command line. Anything else is ``CredentialNotBound``: the
set is refused, and the last good one stays. A CA bundle (``tls``) is not a
credential: it is never sent, only trusted, and needs no binding.

Pure: the CLI, the webhook and the operator read the same answer.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from skillop.model import problems as P
from skillop.model.hostpatterns import HostPattern
from skillop.model.problems import Problem, Subject
from skillop.model.specs import CredentialBinding
from skillop.model.toolset import ServerEntry
from skillop.model.urls import Target, url_target

#: What a use says of a URL whose host cannot be read (no binding matches it).
UNREADABLE_HOST = "a URL whose host cannot be read"


@dataclass(frozen=True, slots=True)
class CredentialUse:
    """One Secret a server of the set sends: names only, never values."""

    secret: str
    server: str
    #: The declaring skill, ``namespace/name``.
    skill: str
    #: How it is sent: ``headersFrom``, or ``env NAME``.
    via: str
    #: The key, for an env var (a headers Secret sends every key).
    key: str | None = None
    #: Where a URL server's requests go (None: a stdio server, or a URL whose
    #: host cannot be read).
    target: Target | None = None
    #: A stdio server's command line.
    command: str | None = None

    @property
    def host(self) -> str | None:
        """``scheme://host[:port]``: a host pattern matching exactly the target."""
        if self.command is not None:
            return None
        return str(self.target) if self.target is not None else UNREADABLE_HOST

    @property
    def destination(self) -> str:
        if self.command is not None:
            return f"stdio command {self.command!r}"
        return f"host {self.host}" if self.target is not None else UNREADABLE_HOST

    def to_dict(self) -> dict[str, str]:
        """The status item (``status.credentials``)."""
        out = {"secret": self.secret, "server": self.server, "skill": self.skill}
        for name in ("key", "host", "command"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


def credential_uses(server: ServerEntry) -> tuple[CredentialUse, ...]:
    """The Secrets ``server`` sends, headers first, then env vars in order."""
    out: list[CredentialUse] = []
    if server.url is not None:
        where: dict[str, Any] = {"target": url_target(server.url)}
    else:
        where = {"command": " ".join([*(server.command or ()), *(server.args or ())])}
    if server.headers_from is not None:
        out.append(CredentialUse(server.headers_from.secret_ref.name, server.name,
                                 server.skill, "headersFrom", **where))
    for var in server.env or ():
        if var.value_from is not None:
            ref = var.value_from.secret_key_ref
            out.append(CredentialUse(ref.name, server.name, server.skill, f"env {var.name}",
                                     key=ref.key, **where))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Bindings:
    """An Actor's ``spec.credentials``, by Secret, patterns parsed once."""

    hosts: dict[str, tuple[HostPattern, ...]]
    commands: dict[str, frozenset[str]]

    @classmethod
    def of(cls, bindings: Sequence[CredentialBinding]) -> Bindings:
        hosts: dict[str, tuple[HostPattern, ...]] = {}
        commands: dict[str, frozenset[str]] = {}
        for binding in bindings:
            name = binding.secret_ref.name
            hosts[name] = (*hosts.get(name, ()), *map(_pattern, binding.hosts))
            commands[name] = commands.get(name, frozenset()).union(binding.commands)
        return cls(hosts, commands)

    def bound(self, use: CredentialUse) -> bool:
        """Whether an entry sends ``use``'s Secret where it goes."""
        if use.command is not None:
            return use.command in self.commands.get(use.secret, ())
        target = use.target
        return target is not None and any(p.matches(*target)
                                          for p in self.hosts.get(use.secret, ()))


@functools.lru_cache(maxsize=4096)
def _pattern(text: str) -> HostPattern:
    return HostPattern.parse_normal(text)


#: ``credential_uses`` by (skill, server), kept while the entry is the very same.
UsesMemo = dict[tuple[str, str], tuple[ServerEntry, tuple[CredentialUse, ...]]]


def _uses(server: ServerEntry, memo: UsesMemo) -> tuple[CredentialUse, ...]:
    slot = (server.skill, server.name)
    found = memo.get(slot)
    if found is None or found[0] is not server:
        found = memo[slot] = (server, credential_uses(server))
    return found[1]


@dataclass(frozen=True, slots=True)
class CredentialCheck:
    """What ``check_credentials`` found for one Actor's set."""

    #: Every Secret the set sends (its status).
    uses: tuple[CredentialUse, ...] = ()
    #: ``CredentialNotBound``, one per Secret sent where it is not bound.
    problems: tuple[Problem, ...] = ()
    #: The servers sending one, as (skill, server): no pod mounts their Secrets.
    unbound: frozenset[tuple[str, str]] = frozenset()


def check_credentials(subject: Subject, bindings: Sequence[CredentialBinding],
                      servers: Iterable[ServerEntry], *, origin: str | None = None,
                      memo: UsesMemo | None = None) -> CredentialCheck:
    """Every Secret the Actor's set sends, and a ``CredentialNotBound`` problem for
    each one a Skill of another namespace sends where ``spec.credentials`` does
    not bind it."""
    uses: list[CredentialUse] = []
    problems: list[Problem] = []
    unbound: set[tuple[str, str]] = set()
    table: Bindings | None = None
    for server in servers:
        for use in _uses(server, {} if memo is None else memo):
            uses.append(use)
            if use.skill.partition("/")[0] == subject.namespace:
                continue
            table = table or Bindings.of(bindings)
            if not table.bound(use):
                unbound.add((use.skill, use.server))
                problems.append(Problem(subject, "spec.credentials", P.CREDENTIAL_NOT_BOUND,
                                        _unbound_message(use), origin))
    return CredentialCheck(tuple(uses), tuple(problems), frozenset(unbound))


def _unbound_message(use: CredentialUse) -> str:
    hint = (f"hosts: [{use.host!r}]" if use.target is not None
            else f"commands: [{use.command!r}]" if use.command is not None else "")
    fix = (f"; if this namespace trusts it, add {{secretRef: {{name: {use.secret}}}, {hint}}}"
           if hint else "")
    return (f"server {use.server!r} of skill {use.skill} (another namespace's) would send"
            f" this namespace's Secret {use.secret} ({use.via}) to {use.destination},"
            f" which no spec.credentials entry binds it to{fix}")
