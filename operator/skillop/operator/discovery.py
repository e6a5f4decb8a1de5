"""Live MCP discovery in the operator: one task per distinct server.

Every ``url`` server named by any Skill gets one task per ``ServerKey``: its URL
and the Secret its ``headersFrom`` names (``namespace/name``). Many Skills naming
one URL with the same Secret (or all without one) share a task; a listing made
with a Secret's credentials is served only to Skills naming that Secret, so no
tenant sees a tool list fetched with another tenant's token.

The task lists the server's tools; when the server announces
``tools.listChanged`` it keeps a session open and re-lists on each
notification, otherwise it polls on the shortest ``refreshInterval`` of the
Skills naming it (default from settings). A Skill change refreshes its servers
at once. Results feed the store (``Catalog.discovered``), which cascades to
exactly the dependent Skills and Actors.

A failed refresh keeps the last good list (or, before any success, the
declared tools), records the error for the Skill's ``Discovered`` condition and
the dependents' warnings, and never empties a tool set.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from skillop.model.durations import duration_seconds
from skillop.model.manifest import ActorResource, Resource, SkillResource, parse_object
from skillop.model.names import ObjectRef
from skillop.model.serverkeys import CaSource, ServerKey
from skillop.model.specs import McpServer, SkillSpec
from skillop.model.status import recorded_servers
from skillop.operator import pinning
from skillop.operator.deps import Key, key, server_dep
from skillop.operator.outputs import ServerReport
from skillop.operator.runtime import Reconciler
from skillop.operator.settings import OperatorConfig
from skillop.operator.store import Store
from skillop.sources.mcp_tools import McpToolInfo, info_digest, tools_digest

if TYPE_CHECKING:  # the MCP client is imported when the first server is listed
    from skillop.sources.mcp_discovery import DiscoveryError, DiscoveryResult, McpTransport

log = logging.getLogger("skillop.discovery")
#: Longest quiet time on a watched (listChanged) server before it is pinged.
PING_SECONDS = 15.0


class ObjectReader(Protocol):
    """What discovery reads from the API itself (``operator.kube.Kube``): the
    Secrets and CA ConfigMaps a server names."""

    async def read_secret(self, ref: ObjectRef) -> Mapping[str, str]: ...

    async def read_configmap(self, ref: ObjectRef) -> Mapping[str, Any] | None: ...


def seconds(duration: str | None, default: float) -> float:
    return duration_seconds(duration) if duration else default


@dataclass
class ServerWatch:
    key: ServerKey
    transport: McpTransport
    users: set[tuple[ObjectRef, str]] = field(default_factory=set)
    interval: float = 300.0
    task: asyncio.Task[None] | None = None
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    tool_count: int | None = None
    last_sync: str | None = None
    tools_digest: str | None = None
    error: str | None = None
    reason: str | None = None
    #: A listing is under way whose result has not been delivered yet (a watched
    #: server: until the watch session's own first listing arrives).
    listing: bool = False
    #: The server announced listChanged and a session is open on it: its list is live.
    watched: bool = False
    #: Tools the server listed under names that cannot be kept (docs/api.md, Names).
    skipped: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        return self.key.url

    @property
    def secret(self) -> ObjectRef | None:
        """The Secret whose keys are sent as headers; fixed for the watch's life."""
        return self.key.secret


class Discovery:
    def __init__(self, store: Store, reconciler: Reconciler, writer: ObjectReader,
                 config: OperatorConfig) -> None:
        from skillop.sources.egress import EgressGuard
        from skillop.sources.mcp_discovery import DiscoveryLimits

        self.store = store
        self.reconciler = reconciler
        self.writer = writer
        self.config = config
        self.guard = EgressGuard(config.mcp_allow)
        self.limits = DiscoveryLimits()
        self.servers: dict[ServerKey, ServerWatch] = {}
        self._generations: dict[ObjectRef, int] = {}
        self._accept_notes: dict[ObjectRef, frozenset[str]] = {}
        #: The last change of each server's definitions: (tool, changed fields).
        self.changes: dict[ServerKey, list[tuple[str, list[str]]]] = {}
        self.connections = 0

    # -- what the reconciler asks ------------------------------------------------
    def states(self, skill: SkillResource) -> list[ServerReport]:
        out = []
        for server in skill.spec.mcp_servers:
            server_key = server.discovery_key(skill.meta.namespace)
            watch = self.servers.get(server_key) if server_key is not None else None
            if watch is None or server.url is None:
                out.append(ServerReport.declared(server))
                continue
            count = watch.tool_count if watch.tool_count is not None else len(server.tools)
            pinned, broken = self._pin_state(skill.ref, server)
            out.append(ServerReport.listed(
                server.name, count, url=server.url, error=watch.error,
                last_sync=watch.last_sync, tools_digest=watch.tools_digest, pinned=pinned,
                reason=watch.reason, violations=broken))
        return out

    def _pin_state(self, ref: ObjectRef, server: McpServer,
                   ) -> tuple[dict[str, str] | None, tuple[str, ...]]:
        accepted = self.store.catalog.accepted.get((ref, server.name))
        if not server.pin or accepted is None:
            return None, ()
        server_key = server.discovery_key(ref.namespace)
        live = (self.store.catalog.discovered.get(server_key, accepted)
                if server_key is not None else accepted)
        digests = {t.name: info_digest(t) for t in accepted}
        return digests, tuple(v.message() for v in pinning.violations(accepted, live))

    def warnings(self, actor: ActorResource, skills: Sequence[ObjectRef]) -> list[str]:
        reached = set(skills)
        failing = [f"MCP server {name} of skill {skill}: {w.error}; using the last good tool"
                   " list (or the declared tools before any success)"
                   for w in self.servers.values() if w.error
                   for skill, name in sorted(w.users) if skill in reached]
        changed = [f"ToolDefinitionChanged: tool {tool} of MCP server {name} (skill {skill})"
                   f" changed {', '.join(fields)}"
                   for server_key, w in sorted(self.servers.items(), key=lambda i: i[0].text)
                   for skill, name in sorted(w.users)
                   if skill in reached and (skill, name) not in self.store.catalog.accepted
                   for tool, fields in self.changes.get(server_key, [])]
        skipped = [f"MCP server {name} of skill {skill}: {line}"
                   for w in self.servers.values()
                   for skill, name in sorted(w.users) if skill in reached
                   for line in w.skipped]
        return failing + changed + skipped

    # -- what the handlers tell ---------------------------------------------------
    def skill_changed(self, body: Mapping[str, Any]) -> None:
        skill = parse_object(body).obj
        if not isinstance(skill, Resource) or not isinstance(skill.spec, SkillSpec):
            return
        ref = skill.ref
        self._accept_annotated(skill)
        generation = skill.meta.generation
        if self._generations.get(ref) == generation:
            return  # a status write echoed back: nothing to refresh
        changed = ref in self._generations  # not merely seen for the first time
        if changed:
            self._accept_all(skill)  # re-applying a Skill accepts what its servers serve now
        self._generations[ref] = generation
        self._forget(ref)
        for server in skill.spec.mcp_servers:
            if server.url is not None:
                self._watch(ref, server, skill, refresh=changed)

    def _accept_all(self, skill: SkillResource) -> None:
        for server in skill.spec.mcp_servers:
            server_key = server.discovery_key(skill.meta.namespace)
            live = self.store.catalog.discovered.get(server_key) if server_key else None
            if server.pin and live is not None:
                self.reconciler.mark(self.store.set_accepted(skill.ref, server.name, live))

    def _accept_annotated(self, skill: SkillResource) -> None:
        """Accept the digests newly listed in ``skillop.dev/accept-digests``."""
        digests = pinning.parse_accepted(skill.meta.annotations.get(pinning.ACCEPT_ANNOTATION))
        if self._accept_notes.get(skill.ref, frozenset()) == digests:
            return
        self._accept_notes[skill.ref] = digests
        for server in skill.spec.mcp_servers:
            accepted = self.store.catalog.accepted.get((skill.ref, server.name))
            server_key = server.discovery_key(skill.meta.namespace)
            live = self.store.catalog.discovered.get(server_key) if server_key else None
            if server.pin and accepted is not None and live is not None:
                taken = pinning.accept(accepted, live, digests)
                self.reconciler.mark(self.store.set_accepted(skill.ref, server.name, taken))

    def configmap_changed(self, namespace: str, name: str) -> None:
        """A ConfigMap changed: servers whose CA bundle it holds connect again now
        (a bundle created after its Skill, or a rotated CA, takes effect at once)."""
        ref = ObjectRef(namespace, name)
        for watch in self.servers.values():
            ca = watch.key.ca
            if ca is not None and ca.kind == "ConfigMap" and ca.ref == ref:
                watch.wake.set()

    def skill_deleted(self, namespace: str, name: str) -> None:
        ref = ObjectRef(namespace, name)
        self._generations.pop(ref, None)
        self._accept_notes.pop(ref, None)
        for slot in [s for s in self.store.catalog.accepted if s[0] == ref]:
            self.store.set_accepted(ref, slot[1], None)
        self._forget(ref)

    async def stop(self, *, grace: float = 5.0) -> None:
        """Cancel every server task and wait for them at most ``grace`` seconds: a
        connection stuck where cancellation cannot reach (a DNS lookup in a thread,
        an SDK task group finishing its own cleanup) must not hold up shutdown, which
        a rolling upgrade and the Lease handover wait for."""
        tasks = [w.task for w in self.servers.values() if w.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=grace)

    # -- internals ----------------------------------------------------------------
    def _watch(self, ref: ObjectRef, server: McpServer, skill: SkillResource, *,
               refresh: bool) -> None:
        """Make sure the server is listed and kept fresh for this skill.

        A changed Skill re-lists its servers (API Semantics 9); a Skill seen for
        the first time (start-up, a new Skill) joins a server whose list is live
        (watched) or being fetched without another connection.
        """
        server_key = server.discovery_key(ref.namespace)
        assert server_key is not None
        watch = self.servers.get(server_key)
        if watch is None:
            # A server with a discovery key has a url: its transport is never stdio.
            transport: McpTransport = "sse" if server.transport == "sse" else "streamable-http"
            watch = self.servers[server_key] = ServerWatch(server_key, transport)
            watch.last_sync, watch.tools_digest = self._recorded_sync(ref, server.name)
            self.store.catalog.pending.add(server_key)
        watch.users.add((ref, server.name))
        interval = seconds(server.refresh_interval or skill.spec.refresh_interval,
                           self.config.mcp_refresh_seconds)
        shorter = watch.task is not None and interval < watch.interval
        watch.interval = min(watch.interval, interval) if watch.task else interval
        if watch.task is None or watch.task.done():
            watch.task = asyncio.get_running_loop().create_task(self._run(watch))
        elif shorter or (refresh and not watch.listing) \
                or not (watch.listing or watch.watched):
            # A listing already under way ends after this change and serves as its
            # refresh: a burst of Skills naming one server (start-up, an apply of a
            # directory) costs one session, not one per Skill. A watched server's
            # list is live already: its open session is the refresh. (Headers never
            # change under a watch: another Secret is another ServerKey.)
            watch.wake.set()

    def _forget(self, ref: ObjectRef) -> None:
        for server_key, watch in list(self.servers.items()):
            watch.users = {u for u in watch.users if u[0] != ref}
            if not watch.users:
                if watch.task is not None:
                    watch.task.cancel()
                del self.servers[server_key]
                self._settled(server_key)

    def _settled(self, server_key: ServerKey) -> set[Key]:
        """The server's first listing since start is over: what waited, goes."""
        if server_key not in self.store.catalog.pending:
            return set()
        self.store.catalog.pending.discard(server_key)
        return self.store.deps.users_of(server_dep(server_key))

    def _recorded_sync(self, ref: ObjectRef, server: str) -> tuple[str | None, str | None]:
        """lastSync and toolsDigest as the Skill's status last recorded them."""
        recorded = recorded_servers(self.store.statuses.get(key("Skill", ref), {})).get(server)
        return (None, None) if recorded is None else (recorded.last_sync, recorded.tools_digest)

    async def _headers(self, watch: ServerWatch) -> dict[str, str]:
        if watch.secret is None:
            return {}
        return dict(await self.writer.read_secret(watch.secret))

    async def _ca_bundles(self, watch: ServerWatch) -> list[str]:
        """PEM CA bundles trusted for this server besides the system's: the
        operator-wide one (``SKILLOP_MCP_CA_FILE``) and the server's ``tls`` one,
        read at every connection, so a rotated CA is used from the next one on."""
        bundles: list[str] = []
        if self.config.mcp_ca_file:
            try:
                bundles.append(Path(self.config.mcp_ca_file).read_text())
            except (OSError, UnicodeDecodeError) as err:
                raise CABundleMissing(f"the operator's CA file {self.config.mcp_ca_file}"
                                      f" cannot be read ({type(err).__name__})") from None
        source = watch.key.ca
        if source is not None:
            pem = await self._read_ca(source)
            if not pem:
                raise CABundleMissing(f"tls: {source.kind} {source.ref} has no key {source.key}")
            bundles.append(pem)
        return bundles

    async def _read_ca(self, source: CaSource) -> str | None:
        if source.kind == "ConfigMap":
            configmap = self.store.catalog.configmaps.get(source.ref)
            if configmap is not None:
                return configmap.data.get(source.key)
            # Just referenced: the store knew it by name only (or not yet at all).
            try:
                body = await self.writer.read_configmap(source.ref)
            except Exception as err:
                raise CABundleMissing(f"tls: ConfigMap {source.ref} cannot be read"
                                      f" ({type(err).__name__})") from None
            data = (body or {}).get("data") or {}
            value = data.get(source.key)
            return value if isinstance(value, str) else None
        try:
            secret: Mapping[str, str] = await self.writer.read_secret(source.ref)
            return secret.get(source.key)
        except Exception as err:  # not found, forbidden: one line, no traceback
            raise CABundleMissing(f"tls: Secret {source.ref} cannot be read"
                                  f" ({type(err).__name__})") from None

    async def _run(self, watch: ServerWatch) -> None:
        from skillop.sources.egress import display_url
        from skillop.sources.mcp_discovery import DiscoveryError
        from skillop.sources.mcp_watch import watch_tools

        while True:
            watch.wake.clear()  # before listing: a Skill change during it lists again
            watch.listing = True
            try:
                headers = await self._headers(watch)
                ca_bundles = await self._ca_bundles(watch)
                self.connections += 1
                # One connection per server: it lists, and stays open as the watch
                # when the server announces listChanged; otherwise it returns and the
                # server is polled. A Skill change wakes this task (new headers, a
                # shorter interval: connect and list again at once). Pings come at
                # the refresh interval at most, so a dead server shows soon.
                await _until_woken(watch.wake, watch_tools(
                    watch.url, transport=watch.transport,
                    headers=headers, guard=self.guard, limits=self.limits,
                    on_change=lambda r: self._async_success(watch, r),
                    on_error=lambda e: self._async_failure(watch, e),
                    ping_interval=min(watch.interval, PING_SECONDS),
                    reconnect_backoff=(0.5, max(0.5, min(watch.interval, 30.0))),
                    only_if_announced=True, ca_bundles=ca_bundles))
                if watch.wake.is_set():
                    continue
            except DiscoveryError as err:
                watch.listing = False
                self._failure(watch, err.reason, str(err))
            except CABundleMissing as err:
                watch.listing = False
                self._failure(watch, "TLSError", f"MCP discovery at {display_url(watch.url)}"
                                                 f" failed (TLSError): {err}")
            except Exception as err:  # a Secret that cannot be read, and the like
                watch.listing = False
                self._failure(watch, "DiscoveryFailed", f"{type(err).__name__}: {err}")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(watch.wake.wait(), timeout=watch.interval)

    async def _async_success(self, watch: ServerWatch, result: DiscoveryResult) -> None:
        watch.listing = False
        self._success(watch, result)

    async def _async_failure(self, watch: ServerWatch, err: DiscoveryError) -> None:
        watch.listing = False
        self._failure(watch, err.reason, str(err))

    def _success(self, watch: ServerWatch, result: DiscoveryResult) -> None:
        infos: tuple[McpToolInfo, ...] = result.tools
        was_failing = watch.error is not None
        self._count("Listed")
        if result.skipped != watch.skipped:
            from skillop.sources.egress import display_url

            for line in result.skipped:
                log.warning("MCP server %s: %s", display_url(watch.url), line)
            watch.skipped = tuple(result.skipped)
            self.reconciler.mark(self.store.deps.users_of(server_dep(watch.key)))
        watch.watched = bool(result.notifications)
        watch.tool_count, watch.error, watch.reason = len(infos), None, None
        digest = tools_digest(infos)
        if digest != watch.tools_digest or watch.last_sync is None:
            # lastSync says when the list last changed: a poll that finds the same
            # list, or a restart, writes nothing.
            watch.last_sync, watch.tools_digest = _now(), digest
        before = self.store.catalog.discovered.get(watch.key)
        self.changes[watch.key] = (pinning.definition_changes(before, infos)
                                   if before is not None else [])
        changed = self.store.set_discovered(watch.key, infos)
        changed |= self._settle_pins(watch, infos)
        changed |= self._settled(watch.key)
        if changed or was_failing:
            self.reconciler.mark(changed | self._users(watch))

    def _settle_pins(self, watch: ServerWatch, live: tuple[McpToolInfo, ...]) -> set[Key]:
        """First sight of a pinned server: accept what it serves.

        After a restart nothing is accepted in memory; the digests the Skill's
        status recorded are the contract then: matching tools are accepted, the
        others withheld (reported as violations) until accepted again.
        """
        changed: set[Key] = set()
        for ref, name in watch.users:
            skill = self.store.catalog.skills.get(ref)
            server = next((s for s in skill.spec.mcp_servers if s.name == name), None) \
                if skill is not None else None
            if server is None or not server.pin or (ref, name) in self.store.catalog.accepted:
                continue
            recorded = self._recorded_digests(ref, name)
            taken = live if recorded is None else tuple(
                t for t in live if recorded.get(t.name) == info_digest(t))
            changed |= self.store.set_accepted(ref, name, taken)
        return changed

    def _recorded_digests(self, ref: ObjectRef, server: str) -> dict[str, str] | None:
        recorded = recorded_servers(self.store.statuses.get(key("Skill", ref), {})).get(server)
        return None if recorded is None or recorded.pinned_digests is None \
            else dict(recorded.pinned_digests)

    def _failure(self, watch: ServerWatch, reason: str, message: str) -> None:
        watch.watched = False
        self._count(reason)
        log.warning("MCP discovery failed: %s", message)
        changed = (watch.error, watch.reason) != (message, reason)
        watch.error, watch.reason = message, reason
        waited = self._settled(watch.key)
        if changed or waited:
            self.reconciler.mark(self.store.deps.users_of(server_dep(watch.key))
                                 | self._users(watch) | waited)

    def _count(self, reason: str) -> None:
        if self.reconciler.metrics is not None:
            self.reconciler.metrics.discovery(reason)

    def server_states(self) -> list[str]:
        """Each server's state for the metrics: ok, failing, or pending (first listing)."""
        pending = self.store.catalog.pending
        return ["pending" if server in pending else "failing" if w.error else "ok"
                for server, w in list(self.servers.items())]

    def _users(self, watch: ServerWatch) -> set[Key]:
        return {key("Skill", ref) for ref, _ in watch.users}


async def _until_woken(wake: asyncio.Event, work: Coroutine[Any, Any, None]) -> None:
    """Run ``work`` until it ends (its exception propagates) or ``wake`` is set."""
    task = asyncio.ensure_future(work)
    woken = asyncio.ensure_future(wake.wait())
    try:
        await asyncio.wait({task, woken}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (task, woken):
            pending.cancel()
        for pending in (task, woken):
            with contextlib.suppress(asyncio.CancelledError):
                await pending
    if task.done() and not task.cancelled():
        task.result()


class CABundleMissing(Exception):
    """A configured CA bundle cannot be read; the message says which and why."""


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def attach_discovery(store: Store, reconciler: Reconciler, writer: ObjectReader,
                     config: OperatorConfig) -> Discovery:
    discovery = Discovery(store, reconciler, writer, config)
    reconciler.server_states = discovery.states
    reconciler.actor_warnings = discovery.warnings
    if reconciler.metrics is not None:
        reconciler.metrics.watch_servers(discovery.server_states)
    return discovery
