"""Approval by a person: the gateway asks with a ToolCallApproval object and waits.

``ByRequest`` is the ``approval.Approver`` for the Actor's ``spec.approval.via:
Request`` (the default); ``Requests`` makes the requests and follows them.

An MCP elicitation goes to the MCP client, and in an Actor's pod the client is
the agent: it could approve its own call. So by default (``spec.approval.via:
Request``) the gateway creates a ToolCallApproval in the Actor's namespace and
waits for a person to decide it through the status subresource, which the
gateway's own role cannot write (docs/security.md, Approvals).

The gateway talks to the API server over plain HTTPS for this one resource (no
Kubernetes client in the gateway): the address from ``KUBERNETES_SERVICE_HOST``
and ``_PORT``, the projected ServiceAccount token and CA bundle from
``/var/run/secrets/skillop.dev/api`` (mounted into the gateway container only;
the token is read again for every request, as the kubelet rotates it). Without
them every call that needs approval is refused, saying why: fail closed.

The wait is a watch on the one object, from the resourceVersion its creation
returned, so a decision reaches the gateway as soon as the API server has it; a
watch that ends early is resumed after a fresh read. It is bounded by the
Actor's ``spec.approval.timeoutSeconds`` and is not counted in the tool's
``timeoutSeconds``.
"""

from __future__ import annotations

import json
import os
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import anyio
import httpx2

from skillop.gateway.approval import Approved, Question, Refused, Verdict
from skillop.gateway.served import ServedTool
from skillop.model.approval import DECISIONS, KIND, PLURAL, bounded_arguments
from skillop.model.names import API_GROUP, API_VERSION, GROUP_VERSION

_MAX_ANSWER_BYTES: Final = 1 << 20
_RETRY_SECONDS: Final = 0.5


@dataclass(frozen=True, slots=True)
class PendingCall:
    """A call that waits for approval: who asks for which tool, with what."""

    actor: str  #: namespace/name, as the ToolSet names it
    tool: ServedTool
    upstream: str | None  #: the upstream server's name, None for Agent Skills
    arguments: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ApiAccess:
    """Where the API server is and where the projected token and CA are."""

    server: str
    directory: Path

    @classmethod
    def from_environment(cls, directory: Path,
                         environ: Mapping[str, str] | None = None) -> ApiAccess | str:
        """The access as the pod has it, or why there is none (one line)."""
        env = os.environ if environ is None else environ
        token = directory / "token"
        if not token.is_file():
            return f"no API token is mounted at {token}"
        host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
        if not host or not port.isdigit():
            return "the pod has no API server address (KUBERNETES_SERVICE_HOST and _PORT)"
        shown = f"[{host}]" if ":" in host else host
        return cls(f"https://{shown}:{port}", directory)

    def headers(self) -> dict[str, str]:
        try:
            token = (self.directory / "token").read_text("ascii").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise _Unavailable(f"the API token cannot be read ({type(exc).__name__})") from None
        return {"Authorization": f"Bearer {token}", "Accept": "application/json"}

    def tls(self) -> ssl.SSLContext:
        ca = self.directory / "ca.crt"
        try:
            return ssl.create_default_context(cafile=str(ca) if ca.is_file() else None)
        except (OSError, ssl.SSLError):
            raise _Unavailable(f"the API server's CA bundle ({ca}) cannot be read") from None


class _Unavailable(Exception):
    """The request could not be made or followed; ``str`` is the reason."""


def request_document(call: PendingCall, *, expires_at: datetime,
                     pod: tuple[str, str | None] | None = None) -> dict[str, Any]:
    """The ToolCallApproval the gateway creates (ValueError when the arguments cannot
    all be shown). ``spec.requester`` is left to the operator's webhook."""
    namespace, _, actor = call.actor.partition("/")
    tool: dict[str, Any] = {"bindingName": call.tool.binding_name, "digest": call.tool.digest}
    if call.upstream is not None:
        tool["upstream"] = call.upstream
    if call.tool.upstream_name is not None:
        tool["upstreamTool"] = call.tool.upstream_name
    spec: dict[str, Any] = {
        "actor": actor, "tool": tool,
        "arguments": [a.model_dump(by_alias=True) for a in bounded_arguments(dict(call.arguments))],
        "expiresAt": expires_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if pod is not None:
        spec["pod"] = {"name": pod[0], **({"namespace": pod[1]} if pod[1] else {})}
    return {"apiVersion": GROUP_VERSION, "kind": KIND,
            "metadata": {"generateName": _generate_name(actor, call.tool.binding_name),
                         "namespace": namespace},
            "spec": spec}


def _generate_name(actor: str, binding: str) -> str:
    tool = re.sub(r"[^a-z0-9-]+", "-", binding.lower()).strip("-") or "tool"
    return f"{actor[:40].rstrip('-.')}-{tool[:40].strip('-')}-"


Decided = Approved | Refused


def decision_of(obj: Mapping[str, Any]) -> Decided | None:
    """The decision an object holds, or None while it is pending."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    state = status.get("state")
    if state not in (*DECISIONS, "Expired"):
        return None
    request = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    by = status.get("decidedBy") if isinstance(status.get("decidedBy"), str) else None
    said = status.get("reason") if isinstance(status.get("reason"), str) else None
    if state == "Approved":
        return Approved(request, by)
    if state == "Denied":
        because = f": {said}" if said else ""
        return Refused(f"denied by {by} (ToolCallApproval {request}){because}", request, by)
    return Refused(f"no decision in time: the approval request expired"
                   f" (ToolCallApproval {request})", request, by)


class Requests:
    """Makes ToolCallApprovals and waits for their decisions (one per gateway)."""

    def __init__(self, access: ApiAccess | str, *,
                 pod: tuple[str, str | None] | None = None) -> None:
        self._access = access
        self._pod = pod
        self._client: httpx2.AsyncClient | None = None

    @classmethod
    def from_environment(cls, directory: Path) -> Requests:
        pod_name = os.environ.get("SKILLOP_POD_NAME") or None
        pod_ns = os.environ.get("SKILLOP_POD_NAMESPACE") or None
        return cls(ApiAccess.from_environment(directory),
                   pod=(pod_name, pod_ns) if pod_name else None)

    async def decide(self, call: PendingCall, *, timeout: float) -> Decided:
        """Create the request, wait for its decision (at most ``timeout`` seconds)."""
        access = self._access
        if isinstance(access, str):
            return Refused("the tool requires approval by a person and this gateway"
                           f" cannot ask for it: {access}")
        # Whole seconds (as the API's timestamps), rounded up, never short of ``timeout``.
        expires = (datetime.now(UTC) + timedelta(seconds=timeout + 1)).replace(microsecond=0)
        try:
            doc = request_document(call, expires_at=expires, pod=self._pod)
        except ValueError as exc:
            return Refused(str(exc))
        namespace = doc["metadata"]["namespace"]
        try:
            created = await self._create(access, namespace, doc)
        except _Unavailable as exc:
            return Refused(f"the approval request could not be made: {exc}")
        meta = created.get("metadata") or {}
        made = _Made(namespace, str(meta.get("name", "")), str(meta.get("uid") or ""))
        request = f"{namespace}/{made.name}"
        if not made.uid:
            return Refused(f"the approval request {request} was made but the API server's"
                           " answer has no uid to know it by; refused")
        # Until expiresAt itself: after it the webhook refuses an approval, before it
        # an approval must still find the gateway waiting.
        with anyio.move_on_after((expires - datetime.now(UTC)).total_seconds()):
            return await self._wait(access, made, str(meta.get("resourceVersion", "")))
        return Refused(f"no decision within {timeout:g} s: the approval request"
                       f" expired (ToolCallApproval {request})", request)

    def _http(self, access: ApiAccess) -> httpx2.AsyncClient:
        if self._client is None:
            self._client = httpx2.AsyncClient(base_url=access.server, verify=access.tls(),
                                              timeout=httpx2.Timeout(10.0, read=None),
                                              follow_redirects=False, trust_env=False)
        return self._client

    async def _create(self, access: ApiAccess, namespace: str,
                      doc: dict[str, Any]) -> dict[str, Any]:
        try:
            response = await self._http(access).post(
                _collection(namespace), content=json.dumps(doc).encode(),
                headers={**access.headers(), "Content-Type": "application/json"})
        except httpx2.HTTPError as exc:
            raise _Unavailable(f"the API server cannot be reached ({type(exc).__name__})"
                               ) from None
        return _answer(response, "create")

    async def _wait(self, access: ApiAccess, made: _Made, version: str) -> Decided:
        while True:
            try:
                found, version = await self._watch(access, made, version)
                if found is not None:
                    return found
                current = _answer(await self._http(access).get(
                    f"{_collection(made.namespace)}/{made.name}", headers=access.headers()),
                    "get")
            except (_Unavailable, httpx2.HTTPError, ValueError):
                await anyio.sleep(_RETRY_SECONDS)
                continue
            decided = made.replaced(current) or decision_of(current)
            if decided is not None:
                return decided
            version = str((current.get("metadata") or {}).get("resourceVersion", ""))

    async def _watch(self, access: ApiAccess, made: _Made,
                     version: str) -> tuple[Decided | None, str]:
        """Follow the object from ``version`` until it is decided or the watch ends."""
        namespace, name = made.namespace, made.name
        params = {"watch": "1", "fieldSelector": f"metadata.name={name}",
                  "allowWatchBookmarks": "true", "timeoutSeconds": "300"}
        if version:
            params["resourceVersion"] = version
        async with self._http(access).stream("GET", _collection(namespace), params=params,
                                             headers=access.headers()) as response:
            if response.status_code != 200:
                await response.aread()
                raise _Unavailable(f"watch answered HTTP {response.status_code}")
            async for line in response.aiter_lines():
                if len(line) > _MAX_ANSWER_BYTES:
                    raise _Unavailable("the watch sent an oversized event")
                event = json.loads(line) if line.strip() else {}
                if not isinstance(event, dict) or not isinstance(event.get("object", {}), dict):
                    raise _Unavailable("the watch sent something that is not an event")
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    return None, ""  # e.g. 410 Gone: start again from a fresh read
                version = str((obj.get("metadata") or {}).get("resourceVersion", version))
                if event.get("type") in ("ADDED", "MODIFIED"):
                    decided = made.replaced(obj) or decision_of(obj)
                    if decided is not None:
                        return decided, version
                elif event.get("type") == "DELETED":
                    return Refused(f"the approval request {namespace}/{name} was"
                                   " deleted before a decision"), version
        return None, version

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


@dataclass(frozen=True, slots=True)
class _Made:
    """The request this gateway created: its name, and its uid from the create's
    answer. A decision counts only on that object: one deleted and re-created under
    the same name (while no watch was open, or in the same watch) is someone else's
    request, whatever its spec says, and its approval is not this call's."""

    namespace: str
    name: str
    uid: str

    def replaced(self, obj: Mapping[str, Any]) -> Refused | None:
        """The refusal when ``obj`` is not the object this gateway made, else None."""
        uid = (obj.get("metadata") or {}).get("uid")
        if uid == self.uid:
            return None
        request = f"{self.namespace}/{self.name}"
        return Refused(f"the approval request {request} was deleted and replaced by another"
                       f" object of the same name (uid {uid!s:.40}, not {self.uid}): its"
                       " decision is not about this call; refused", request)


@dataclass(frozen=True, slots=True)
class ByRequest:
    """The ``approval.Approver`` of one call by a ToolCallApproval (``via: Request``)."""

    requests: Requests
    call: PendingCall
    timeout: float

    async def decide(self, question: Question) -> Verdict:
        # The request shows the call itself (every argument), not the prompt's text.
        return await self.requests.decide(self.call, timeout=self.timeout)


def _collection(namespace: str) -> str:
    return f"/apis/{API_GROUP}/{API_VERSION}/namespaces/{namespace}/{PLURAL}"


def _answer(response: httpx2.Response, what: str) -> dict[str, Any]:
    """The object in a JSON answer, or ``_Unavailable`` with the API server's message
    (its own words: the webhook's refusal, RBAC's Forbidden), cut to one line."""
    try:
        body = json.loads(response.content[:_MAX_ANSWER_BYTES])
    except ValueError:
        body = {}
    if response.status_code >= 300 or not isinstance(body, dict):
        message = body.get("message") if isinstance(body, dict) else None
        text = " ".join(str(message or "no message").split())[:500]
        raise _Unavailable(f"{what} answered HTTP {response.status_code}: {text}")
    return body
