"""Whose gateway an actor pod gets (``Target``): the Actor, its ConfigMap, and
the Secrets and CA bundles its ToolSet names (``Credentials``; names only, never
values). Pure: read from the catalog (``target_of``) or from a set's servers."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from skillop.model.callers import CallersSpec
from skillop.model.names import ACTOR_LABEL, ObjectRef, did_you_mean
from skillop.model.specs import EnvVar, HeadersFrom, McpTls
from skillop.model.toolset import ServerEntry, default_configmap_name
from skillop.resolve.catalog import Catalog
from skillop.resolve.resolver import Resolver
from skillop.resolve.toolset import configmap_name


@dataclass(frozen=True)
class Credentials:
    """What an Actor's ToolSet names for its MCP servers (names only, never values)."""

    #: Secrets: ``headersFrom.secretRef``, ``env[].valueFrom.secretKeyRef``,
    #: ``tls.caSecretRef``, sorted, once each.
    secrets: tuple[str, ...] = ()
    #: ConfigMaps holding CA bundles (``tls.caConfigMapRef``), sorted, once each.
    configmaps: tuple[str, ...] = ()
    #: The keys that must be in those Secrets: (Secret, key), sorted (headersFrom
    #: uses whatever keys the Secret has).
    secret_keys: tuple[tuple[str, str], ...] = ()

    def not_in(self, mounted: Credentials) -> Credentials:
        """What this names that ``mounted`` lacks."""
        return Credentials(
            secrets=tuple(s for s in self.secrets if s not in mounted.secrets),
            configmaps=tuple(c for c in self.configmaps if c not in mounted.configmaps))

    def __bool__(self) -> bool:
        return bool(self.secrets or self.configmaps)


@dataclass(frozen=True)
class Target:
    """Whose gateway a pod gets: the Actor, its ConfigMap and what its set names."""

    actor: str
    configmap: str
    credentials: Credentials = field(default_factory=Credentials)
    #: Secrets no container but the gateway may hold besides the set's: for an
    #: Actor not known or not Ready (its set is not known), those the Skills of
    #: its namespace name as upstream credentials.
    guarded: tuple[str, ...] = ()

    @property
    def withheld(self) -> frozenset[str]:
        """Every Secret only the gateway may hold."""
        return frozenset((*self.credentials.secrets, *self.guarded))


class _Server(Protocol):
    """An MCP server as a set (``ServerEntry``) or a Skill (``McpServer``) names it."""

    @property
    def headers_from(self) -> HeadersFrom | None: ...
    @property
    def env(self) -> Sequence[EnvVar] | None: ...
    @property
    def tls(self) -> McpTls | None: ...


def credentials_of(servers: Iterable[_Server]) -> Credentials:
    """The Secrets and CA ConfigMaps the servers of a set name (the document's
    ``mcpServers``; ``Resolution.servers``)."""
    secrets: set[str] = set()
    configmaps: set[str] = set()
    keys: set[tuple[str, str]] = set()
    for server in servers:
        if server.headers_from is not None:
            secrets.add(server.headers_from.secret_ref.name)
        for env in server.env or ():
            ref = env.value_from.secret_key_ref if env.value_from is not None else None
            if ref is not None:
                secrets.add(ref.name)
                keys.add((ref.name, ref.key))
        tls = server.tls
        if tls is not None and tls.ca_secret_ref is not None:
            secrets.add(tls.ca_secret_ref.name)
            keys.add((tls.ca_secret_ref.name, tls.ca_secret_ref.key))
        if tls is not None and tls.ca_config_map_ref is not None:
            configmaps.add(tls.ca_config_map_ref.name)
    return Credentials(secrets=tuple(sorted(secrets)), configmaps=tuple(sorted(configmaps)),
                       secret_keys=tuple(sorted(keys)))


def target_of(resolver: Resolver, namespace: str, actor: str) -> Target:
    """The Target of a pod labelled for ``actor`` in ``namespace``, from the catalog.

    An Actor that does not exist (yet) or does not resolve (not Ready) names no
    credentials: its pod still gets the gateway and the (optional) ConfigMap,
    and serves no tools until the Actor resolves; meanwhile the Secrets its
    namespace's Skills name are ``guarded`` (no agent may hold them).
    """
    found = resolver.catalog.actors.get(ObjectRef(namespace, actor))
    if found is None:
        return Target(actor=actor, configmap=default_configmap_name(actor),
                      guarded=namespace_secrets(resolver.catalog, namespace))
    resolution = resolver.resolve_actor(found.ref)
    if resolution is None or not resolution.ok:
        client = exchange_client_secret(found.spec.callers)
        return Target(actor=actor, configmap=configmap_name(found),
                      guarded=tuple(sorted({*namespace_secrets(resolver.catalog, namespace),
                                            *client})))
    return Target(actor=actor, configmap=configmap_name(found),
                  credentials=set_credentials(resolution.servers, found.spec.callers))


def set_credentials(servers: Sequence[ServerEntry], callers: CallersSpec | None) -> Credentials:
    """What an Actor's set names: its servers' Secrets and CA bundles, and the token
    exchange's client Secret when a server of the set calls with exchanged tokens."""
    credentials = credentials_of(servers)
    if any(server.token_exchange is not None for server in servers):
        credentials = with_exchange_client(credentials, callers)
    return credentials


def exchange_client_secret(callers: CallersSpec | None) -> tuple[str, ...]:
    """The Secret holding the gateway's client credentials for token exchange."""
    client = callers.token_exchange if callers is not None else None
    return (client.client_secret_ref.name,) if client is not None else ()


def with_exchange_client(credentials: Credentials, callers: CallersSpec | None) -> Credentials:
    """``credentials`` and the token exchange's client Secret (mounted into the
    gateway like the servers' Secrets)."""
    client = callers.token_exchange if callers is not None else None
    if client is None:
        return credentials
    ref = client.client_secret_ref
    keys = {(ref.name, ref.client_id_key), (ref.name, ref.client_secret_key)}
    return Credentials(secrets=tuple(sorted({*credentials.secrets, ref.name})),
                       configmaps=credentials.configmaps,
                       secret_keys=tuple(sorted({*credentials.secret_keys, *keys})))


def namespace_secrets(catalog: Catalog, namespace: str) -> tuple[str, ...]:
    """The Secrets the MCP servers of ``namespace``'s Skills name: what a set
    there may come to mount, known before the Actor is."""
    return credentials_of(server for ref, skill in catalog.skills.items()
                          if ref.namespace == namespace
                          for server in skill.spec.mcp_servers).secrets


def unknown_actor(resolver: Resolver, namespace: str, actor: str) -> str | None:
    """What to warn when a pod's label names an Actor the catalog does not have (a
    typo is admitted silently otherwise: the pod gets a gateway serving nothing),
    with the namespace's closest Actor names; None when it exists."""
    ref = ObjectRef(namespace, actor)
    if ref in resolver.catalog.actors:
        return None
    names = (r.name for r in resolver.catalog.actors if r.namespace == namespace)
    return (f"Actor {ref} not found{did_you_mean(actor, names)} (label {ACTOR_LABEL}):"
            " the gateway serves no tools until it exists")

