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

This module coordinates; each concern is its own module: a server's state
(``listing.Listing``, pure transitions), its task (``serverwatch``), what a
connection reads from the cluster (``mcpconnect``: headers, CA bundles), pin
acceptance (``pinning``, pure) and the Actors' warnings (``servernotes``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from skillop.model.durations import duration_seconds
from skillop.model.manifest import ActorResource, Resource, SkillResource, parse_object
from skillop.model.names import ObjectRef
from skillop.model.serverkeys import ServerKey
from skillop.model.specs import McpServer, SkillSpec
from skillop.model.status import McpServerStatus, recorded_servers
from skillop.operator import pinning, serverwatch
from skillop.operator.deps import Key, key, server_dep
from skillop.operator.listing import Listing
from skillop.operator.mcpconnect import Connection, ObjectReader, connection
from skillop.operator.outputs import ServerReport
from skillop.operator.runtime import Reconciler
from skillop.operator.servernotes import actor_warnings
from skillop.operator.serverwatch import ServerWatch
from skillop.operator.settings import OperatorConfig
from skillop.operator.store import Store
from skillop.sources.mcp_tools import McpToolInfo

if TYPE_CHECKING:  # the MCP client is imported when the first server is listed
    from skillop.sources.mcp_discovery import DiscoveryResult, McpTransport

log = logging.getLogger("skillop.discovery")


def seconds(duration: str | None, default: float) -> float:
    return duration_seconds(duration) if duration else default


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
            out.append(ServerReport(server.name, len(server.tools), url=server.url,
                                    listing=watch.state, pins=self._pins(skill.ref, server)))
        return out

    def _pins(self, ref: ObjectRef, server: McpServer) -> pinning.PinState | None:
        accepted = self.store.catalog.accepted.get((ref, server.name))
        if not server.pin or accepted is None:
            return None
        server_key = server.discovery_key(ref.namespace)
        live = (self.store.catalog.discovered.get(server_key, accepted)
                if server_key is not None else accepted)
        return pinning.pin_state(accepted, live)

    def warnings(self, actor: ActorResource, skills: Sequence[ObjectRef]) -> list[str]:
        return actor_warnings(self.servers, set(skills), self.store.catalog.accepted)

    # -- what the handlers tell ---------------------------------------------------
    def skill_changed(self, body: Mapping[str, object]) -> None:
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
            live = self._live(server, skill.meta.namespace)
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
            live = self._live(server, skill.meta.namespace)
            if server.pin and accepted is not None and live is not None:
                taken = pinning.accept(accepted, live, digests)
                self.reconciler.mark(self.store.set_accepted(skill.ref, server.name, taken))

    def _live(self, server: McpServer, namespace: str) -> tuple[McpToolInfo, ...] | None:
        """What the server last listed, if it was."""
        server_key = server.discovery_key(namespace)
        return self.store.catalog.discovered.get(server_key) if server_key else None

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

    # -- what the watches tell (serverwatch.Listener) ------------------------------
    async def connect(self, watch: ServerWatch) -> Connection:
        conn = await connection(watch.key, reader=self.writer,
                                configmaps=self.store.catalog.configmaps,
                                ca_file=self.config.mcp_ca_file)
        self.connections += 1
        return conn

    def listed(self, watch: ServerWatch, result: DiscoveryResult) -> None:
        infos = result.tools
        was_failing = watch.state.error is not None
        if was_failing:
            from skillop.sources.egress import display_url

            log.info("MCP server %s: listed again", display_url(watch.url))
        self._count("Listed")
        skipped = tuple(result.skipped)
        if skipped != watch.state.skipped:
            from skillop.sources.egress import display_url

            for line in skipped:
                log.warning("MCP server %s: %s", display_url(watch.url), line)
            self.reconciler.mark(self.store.deps.users_of(server_dep(watch.key)))
        before = self.store.catalog.discovered.get(watch.key)
        watch.state = watch.state.succeeded(
            infos, watched=bool(result.notifications), skipped=skipped,
            changes=pinning.definition_changes(before, infos) if before is not None else ())
        changed = self.store.set_discovered(watch.key, infos)
        changed |= self._settle_pins(watch, infos)
        changed |= self._settled(watch.key)
        if changed or was_failing:
            self.reconciler.mark(changed | self._users(watch))

    def failed(self, watch: ServerWatch, reason: str, message: str) -> None:
        self._count(reason)
        changed = (watch.state.error, watch.state.reason) != (message, reason)
        # Warned once per state: a host that stays unreachable is retried on every
        # poll, and the same line each time drowns the log (the Skill's
        # Discovered condition keeps saying it).
        log.log(logging.WARNING if changed else logging.DEBUG,
                "MCP discovery failed: %s", message)
        watch.state = watch.state.failed(reason, message)
        waited = self._settled(watch.key)
        if changed or waited:
            self.reconciler.mark(self.store.deps.users_of(server_dep(watch.key))
                                 | self._users(watch) | waited)

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
            watch = self.servers[server_key] = ServerWatch(
                server_key, transport, state=Listing.recorded(self._recorded(ref, server.name)))
            self.store.catalog.pending.add(server_key)
        watch.users.add((ref, server.name))
        interval = seconds(server.refresh_interval or skill.spec.refresh_interval,
                           self.config.mcp_refresh_seconds)
        if watch.join(interval, refresh=refresh):
            watch.task = asyncio.get_running_loop().create_task(serverwatch.run(
                watch, self, guard=self.guard, limits=self.limits))

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

    def _recorded(self, ref: ObjectRef, server: str) -> McpServerStatus | None:
        """The server's entry as the Skill's status last recorded it."""
        return recorded_servers(self.store.statuses.get(key("Skill", ref), {})).get(server)

    def _settle_pins(self, watch: ServerWatch, live: tuple[McpToolInfo, ...]) -> set[Key]:
        """First sight of a pinned server since start: accept what
        ``pinning.first_accepted`` says."""
        changed: set[Key] = set()
        for ref, name in watch.users:
            skill = self.store.catalog.skills.get(ref)
            server = next((s for s in skill.spec.mcp_servers if s.name == name), None) \
                if skill is not None else None
            if server is None or not server.pin or (ref, name) in self.store.catalog.accepted:
                continue
            recorded = self._recorded(ref, name)
            digests = recorded.pinned_digests if recorded is not None else None
            changed |= self.store.set_accepted(ref, name, pinning.first_accepted(live, digests))
        return changed

    def _count(self, reason: str) -> None:
        if self.reconciler.metrics is not None:
            self.reconciler.metrics.discovery(reason)

    def server_states(self) -> list[str]:
        """Each server's state for the metrics: ok, failing, or pending (first listing)."""
        pending = self.store.catalog.pending
        return ["pending" if server in pending else "failing" if w.state.error else "ok"
                for server, w in list(self.servers.items())]

    def _users(self, watch: ServerWatch) -> set[Key]:
        return {key("Skill", ref) for ref, _ in watch.users}


def attach_discovery(store: Store, reconciler: Reconciler, writer: ObjectReader,
                     config: OperatorConfig) -> Discovery:
    discovery = Discovery(store, reconciler, writer, config)
    reconciler.server_states = discovery.states
    reconciler.actor_warnings = discovery.warnings
    if reconciler.metrics is not None:
        reconciler.metrics.watch_servers(discovery.server_states)
    return discovery
