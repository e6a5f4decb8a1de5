"""What one connection to an MCP server needs from the cluster, read at each one.

The headers (the keys of the Secret a ``ServerKey`` names) and the PEM CA bundles
trusted besides the system's: the operator-wide one (``SKILLOP_MCP_CA_FILE``) and
the server's ``tls`` one (a ConfigMap or Secret key). Everything is read again at
every connection, so a rotated CA or token is used from the next one on. A bundle
that cannot be read is ``CABundleMissing``, one line saying which and why (never
a traceback, never a value). What is read becomes one ``Connection``: the
headers and one ``Trust`` (the bundles and the server's ``tls`` whole), handed
through the watch to the transport, which alone reads the ``tls`` settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from skillop.model.manifest import ConfigMapData
from skillop.model.names import ObjectRef
from skillop.model.serverkeys import CaSource, ServerKey
from skillop.sources.mcp_trust import Trust


class ObjectReader(Protocol):
    """What discovery reads from the API itself (``operator.kube.Kube``): the
    Secrets and CA ConfigMaps a server names."""

    async def read_secret(self, ref: ObjectRef) -> Mapping[str, str]: ...

    async def read_configmap(self, ref: ObjectRef) -> Mapping[str, object] | None: ...


class CABundleMissing(Exception):
    """A configured CA bundle cannot be read; the message says which and why."""


@dataclass(frozen=True, slots=True)
class Connection:
    headers: Mapping[str, str]
    trust: Trust


async def connection(server: ServerKey, *, reader: ObjectReader,
                     configmaps: Mapping[ObjectRef, ConfigMapData],
                     ca_file: str | None) -> Connection:
    """The headers and trust for connecting to ``server`` now. ``configmaps``:
    the ConfigMaps the store holds (a CA bundle is read from the API only when it
    is not there yet)."""
    headers = dict(await reader.read_secret(server.secret)) if server.secret else {}
    bundles: list[str] = []
    if ca_file:
        bundles.append(_read_file(ca_file))
    if server.ca is not None:
        pem = await _read_ca(server.ca, reader, configmaps)
        if not pem:
            raise CABundleMissing(
                f"tls: {server.ca.kind} {server.ca.ref} has no key {server.ca.key}")
        bundles.append(pem)
    return Connection(headers, Trust(tuple(bundles), server.tls))


def _read_file(path: str) -> str:
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise CABundleMissing(f"the operator's CA file {path} cannot be read"
                              f" ({type(err).__name__})") from None


async def _read_ca(source: CaSource, reader: ObjectReader,
                   configmaps: Mapping[ObjectRef, ConfigMapData]) -> str | None:
    if source.kind == "ConfigMap":
        known = configmaps.get(source.ref)
        if known is not None:
            return known.data.get(source.key)
        # Just referenced: the store knew it by name only (or not yet at all).
        try:
            body = await reader.read_configmap(source.ref)
        except Exception as err:  # not found, forbidden: one line, no traceback
            raise CABundleMissing(f"tls: ConfigMap {source.ref} cannot be read"
                                  f" ({type(err).__name__})") from None
        data = (body or {}).get("data")
        value = data.get(source.key) if isinstance(data, Mapping) else None
        return value if isinstance(value, str) else None
    try:
        return (await reader.read_secret(source.ref)).get(source.key)
    except Exception as err:
        raise CABundleMissing(f"tls: Secret {source.ref} cannot be read"
                              f" ({type(err).__name__})") from None
