"""Tenant credentials: are the Secrets an Actor's set names there, and do its pods mount them?

For calls, a Secret named by a server's ``headersFrom`` or ``secretKeyRef`` (and a
``tls`` CA bundle) is the **Actor's namespace's** object of that name: the
injected gateway mounts it from the pod's namespace (docs/security.md). So the
operator checks, for each Actor, that those objects exist in the Actor's
namespace with the keys the set names, before any pod fails a call for want of
one, and which of the Actor's running pods do not mount what the set now names
(``Store.outdated_pods``).

Secrets are read with ``get`` by name (never listed or watched: the operator
never holds the namespace's other Secrets), only their key names are kept, and
only when the operator may read Secrets (``SKILLOP_SECRETS_READABLE``, the
chart's ``mcp.headersFromSecrets``); otherwise the check is ``Unknown``. What
was found is remembered for ``found_ttl`` seconds and what was missing for
``missing_ttl``, so a batch of Actors sharing a Secret reads it once. CA
ConfigMaps are known from the ConfigMap watch, by name.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from skillop.model.names import ObjectRef
from skillop.operator.kube import WriteFailed
from skillop.operator.outputs import CredentialState
from skillop.operator.store import Store
from skillop.resolve.inject import Credentials


class SecretReader(Protocol):
    async def secret_keys(self, ref: ObjectRef) -> frozenset[str] | None: ...


class CredentialChecker:
    def __init__(self, store: Store, reader: SecretReader | None, *, found_ttl: float = 300.0,
                 missing_ttl: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.reader = reader
        self.found_ttl = found_ttl
        self.missing_ttl = missing_ttl
        self.clock = clock
        self._seen: dict[ObjectRef, tuple[float, frozenset[str] | None]] = {}

    async def state(self, actor: ObjectRef, needed: Credentials) -> CredentialState:
        outdated = self.store.outdated_pods(actor, needed)
        missing = [f"ConfigMap {c}" for c in needed.configmaps
                   if not self.store.has_configmap(ObjectRef(actor.namespace, c))]
        if not needed.secrets:
            return CredentialState(needed, tuple(missing), outdated_pods=outdated)
        if self.reader is None:
            return CredentialState(needed, None, "the operator may not read Secrets"
                                   " (mcp.headersFromSecrets=false)", outdated)
        try:
            keys = {name: await self._keys(ObjectRef(actor.namespace, name))
                    for name in needed.secrets}
        except WriteFailed as err:
            return CredentialState(needed, None, f"cannot read Secrets: {err}", outdated)
        for name in needed.secrets:
            if keys[name] is None:
                missing.append(f"Secret {name}")
        for name, key in needed.secret_keys:
            present = keys.get(name)
            if present is not None and key not in present:
                missing.append(f"key {key} of Secret {name}")
        return CredentialState(needed, tuple(missing), outdated_pods=outdated)

    async def _keys(self, ref: ObjectRef) -> frozenset[str] | None:
        now = self.clock()
        seen = self._seen.get(ref)
        if seen is not None:
            at, keys = seen
            if now - at < (self.found_ttl if keys is not None else self.missing_ttl):
                return keys
        assert self.reader is not None
        keys = await self.reader.secret_keys(ref)
        self._seen[ref] = (now, keys)
        return keys
