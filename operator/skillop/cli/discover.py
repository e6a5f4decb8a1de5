"""Live MCP discovery from the command line.

``--discover`` on ``tools``/``flatten``/``tree``/``explain`` lists the ``url``
MCP servers of the skills the subject reaches and its policy admits (one
connection per distinct server, all at once; servers of other skills are never
contacted) and resolves with the live lists, as the operator would. Lists are
keyed as in the operator, by URL and the Secret a server's ``headersFrom`` names:
the CLI reads no Secrets, so a server named with one keeps its declared tools,
and the list fetched without credentials serves only Skills that name none.
``skillop discover URL``
prints one server's tools, as a table or as a declared ``tools`` list to paste
into a Skill. Both use the operator's egress rules: cluster-internal hosts only,
unless ``--allow`` says otherwise. A server that cannot be listed is a warning
and its declared tools are used, exactly as in the operator.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any

import yaml

from skillop.cli.render import table
from skillop.cli.safetext import shown
from skillop.model.manifest import Resource
from skillop.model.names import ObjectRef
from skillop.model.serverkeys import ServerKey
from skillop.model.specs import McpServer, SkillSpec
from skillop.model.wording import count
from skillop.resolve.catalog import Catalog
from skillop.sources.egress import DEFAULT_EGRESS_PATTERNS, EgressGuard, display_url
from skillop.sources.mcp_discovery import DiscoveryError, DiscoveryLimits, DiscoveryResult
from skillop.sources.mcp_tools import McpToolInfo

#: Discovery failures where the server did not answer (``skillop discover`` exits 3,
#: the CLI's status for an outage, docs/api.md).
_OUTAGES = frozenset({"ConnectFailed", "Timeout"})


def _list_tools() -> Callable[..., Coroutine[Any, Any, DiscoveryResult]]:
    try:
        from skillop.sources.mcp_session import list_tools
    except ImportError as err:  # the mcp SDK is an optional extra
        raise SystemExit(f"skillop: error: discovery needs the MCP SDK ({err});"
                         " pip install 'skillop[mcp]'") from None
    return list_tools


def _servers(catalog: Catalog, skills: Iterable[ObjectRef] | None,
             ) -> dict[ServerKey, McpServer]:
    """The url servers of ``skills`` (every skill in the catalog when None)."""
    chosen = catalog.skills.values() if skills is None else (
        catalog.skills[ref] for ref in skills if ref in catalog.skills)
    out: dict[ServerKey, McpServer] = {}
    for skill in chosen:
        spec = skill.spec
        if isinstance(skill, Resource) and isinstance(spec, SkillSpec):
            for server in spec.mcp_servers:
                server_key = server.discovery_key(skill.meta.namespace)
                if server_key is not None:
                    out.setdefault(server_key, server)
    return out


def _own_ca(catalog: Catalog, server_key: ServerKey) -> list[str]:
    """The server's ``tls.caConfigMapRef`` bundle, when the input has that ConfigMap
    (the CLI reads no Secrets, so a ``caSecretRef`` adds nothing)."""
    source = server_key.ca
    if source is None or source.kind != "ConfigMap":
        return []
    configmap = catalog.configmaps.get(source.ref)
    pem = configmap.data.get(source.key) if configmap is not None else None
    return [pem] if pem else []


def _skipped(url: str, result: DiscoveryResult) -> list[str]:
    """One warning per tool the server listed under a name that cannot be kept."""
    return [f"MCP server {url}: {line}" for line in result.skipped]


def discover_into(catalog: Catalog, *, allow: Sequence[str], timeout: float,
                  skills: Iterable[ObjectRef] | None = None,
                  ca: Sequence[str] = ()) -> list[str]:
    """Fill ``catalog.discovered`` from the servers of ``skills`` (all when None),
    all at once; return one warning per server that failed or tool skipped.

    ``ca``: PEM bundles (``--ca-file``) trusted for every server; a server's
    ``tls.caConfigMapRef`` adds its bundle when the ConfigMap is in the input.
    """
    list_tools = _list_tools()
    guard = EgressGuard(allow or DEFAULT_EGRESS_PATTERNS)
    limits = DiscoveryLimits(connect_timeout=min(timeout, 5.0), total_timeout=timeout)
    servers = _servers(catalog, skills)

    async def one(server_key: ServerKey, server: McpServer) -> list[str]:
        if server_key.secret is not None:
            return [f"MCP server {display_url(server_key.url)}: headers come from"
                    f" Secret {server_key.secret}, which the CLI does not read;"
                    " using the declared tools"]
        try:
            result = await list_tools(server_key.url,
                                             transport=server.effective_transport,
                                             guard=guard, limits=limits,
                                             ca_bundles=[*ca, *_own_ca(catalog, server_key)])
        except DiscoveryError as err:
            return [f"{err}; using the declared tools"]
        catalog.discovered[server_key] = result.tools
        return _skipped(display_url(server_key.url), result)

    async def every() -> list[list[str]]:
        return list(await asyncio.gather(*(one(u, s) for u, s in sorted(servers.items(),
                                                                   key=lambda i: i[0].text))))

    return [line for lines in asyncio.run(every()) for line in lines]


def discover_command(url: str, *, transport: str, allow: Sequence[str], output: str,
                     headers: Sequence[str], timeout: float, ca: Sequence[str] = ()) -> int:
    list_tools = _list_tools()
    pairs = [h.split("=", 1) for h in headers]
    if any(len(p) != 2 for p in pairs):
        print("skillop: error: --header takes NAME=VALUE", file=sys.stderr)
        return 2
    guard = EgressGuard(allow or DEFAULT_EGRESS_PATTERNS)
    limits = DiscoveryLimits(connect_timeout=min(timeout, 5.0), total_timeout=timeout)
    try:
        result = asyncio.run(list_tools(url, transport=transport, headers=dict(pairs),
                                               guard=guard, limits=limits, ca_bundles=ca))
    except DiscoveryError as err:
        hint = " (pass --allow HOST to contact it)" if err.reason == "URLNotAllowed" else ""
        print(shown(f"skillop: {err}{hint}"), file=sys.stderr)
        # The server did not answer: an outage, not a problem of what was asked.
        return 3 if err.reason in _OUTAGES else 1
    for line in _skipped(display_url(url), result):
        print(shown(f"warning: {line}"), file=sys.stderr)
    declared = [_declared(t) for t in result.tools]
    if output == "json":
        print(json.dumps({"tools": declared}, indent=2, ensure_ascii=False))
    elif output == "yaml":
        print(yaml.safe_dump({"tools": declared}, sort_keys=False, allow_unicode=True), end="")
    else:
        rows = [(t["name"], ",".join(k.removesuffix("Hint") for k, v in
                                     t.get("annotations", {}).items() if v is True) or "-",
                 t.get("description", "").splitlines()[0] if t.get("description") else "")
                for t in declared]
        print(table(rows, ("NAME", "HINTS", "DESCRIPTION")))
        listed = "yes" if result.list_changed else "no"
        print(f"{count(len(declared), 'tool')}; listChanged: {listed}")
    return 0


def _declared(info: McpToolInfo) -> dict[str, Any]:
    """One tool as a Skill's ``mcpServers[].tools`` entry."""
    out: dict[str, Any] = {"name": info.name}
    if info.title is not None:
        out["title"] = info.title
    out["description"] = info.description
    out["inputSchema"] = info.input_schema
    if info.output_schema is not None:
        out["outputSchema"] = info.output_schema
    # All of them, the title too: the declared copy must define the same tool
    # (same digests) as the listing it was printed from.
    if info.annotations:
        out["annotations"] = dict(info.annotations)
    if info.execution is not None:
        out["execution"] = info.execution
    return out
