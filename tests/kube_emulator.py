"""
A Kubernetes API emulator for running the real kopf operator in tests.

There is no real cluster on the test machines, so the operator talks HTTP to
kmock's ``KubernetesEmulator`` (pinned: ``kmock==0.8``; this module reaches
into its internals). Out of the box, kmock stores objects as plain JSON and
replays every object on every watch, which makes kopf re-process stale
versions. :class:`Emulator` adds what a real apiserver does and kopf relies on:

* server-side metadata on create (``uid``, ``resourceVersion``,
  ``creationTimestamp``, ``generation``, namespace from the URL,
  ``generateName``), and 409 for a duplicate name;
* one global, monotonically rising ``resourceVersion``; no-op writes change
  nothing (no new version, no watch event), as in a real apiserver;
* ``metadata.generation`` bumps when anything outside metadata/status changes
  (CRD resources only);
* the ``/status`` subresource: the main endpoint ignores ``status``, the
  ``/status`` endpoint ignores everything else;
* merge patches (RFC 7386), JSON patches (RFC 6902, a failed ``test`` op
  answers 422), replace (PUT), and a 409 for a stale ``resourceVersion``;
* deletion with finalizers sets ``deletionTimestamp``; the object goes away
  once its finalizers are emptied; dependents are then garbage-collected
  by their ``ownerReferences``;
* LIST returns the current ``resourceVersion``; WATCH honours
  ``?resourceVersion=``, ``timeoutSeconds``, and simple label/field selectors;
* discovery for CRDs registered from their manifests and for a few core
  resources (configmaps, secrets, events, namespaces) and Leases
  (coordination.k8s.io/v1, for leader election: create answers 409 if one
  exists, PUT/PATCH 409 on a stale ``resourceVersion``);
* a thread-safe log of every write request, with the client's User-Agent, to
  count API writes (per process, too).

:func:`run_emulator` serves it on a loopback port in a daemon thread with its
own event loop and points the ``kubernetes`` client (and thus kopf) at it.
:func:`run_operator` runs a kopf operator in :class:`kopf.testing.KopfRunner`.
The test body stays synchronous; see docs/testing.md for the gaps.
"""
import asyncio
import bisect
import collections
import contextlib
import copy
import dataclasses
import datetime
import functools
import json
import logging
import os
import pathlib
import random
import re
import shutil
import tempfile
import threading
import time
import types
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, cast

import aiohttp.web
import attrs
import jsonpatch
import kmock
import kopf
import kopf.testing
import kubernetes
import yaml

# kmock exports its emulator but not the request model, the URL parser or the
# renderer its handlers are written against; extending the emulator (PUT, status
# subresources, watches with resourceVersion) needs them, and there is no public way.
from kmock._internal import enums as kmock_enums
from kmock._internal import parsing as kmock_parsing
from kmock._internal import rendering as kmock_rendering

__all__ = [
    'CORE_RESOURCES',
    'Emulator',
    'EmulatorHandle',
    'ResourceSpec',
    'WriteRecord',
    'operator_args',
    'read_write_log',
    'run_emulator',
    'run_operator',
    'select_writes',
    'specs_from_crd',
    'wait_for',
    'wait_until_quiet',
]

Body = dict[str, Any]
ObjectKey = tuple[kmock.resource, str | None, str]
CrdSource = str | os.PathLike[str] | Mapping[str, Any]
T = TypeVar('T')

_WRITE_METHODS = frozenset({'POST', 'PUT', 'PATCH', 'DELETE'})
_ALL_VERBS = ('create', 'delete', 'get', 'list', 'patch', 'update', 'watch')
# Server-owned metadata: clients cannot change it by patching or replacing.
_SERVER_META = ('uid', 'creationTimestamp', 'resourceVersion', 'generation',
                'deletionTimestamp', 'deletionGracePeriodSeconds', 'name', 'namespace')
# The alphabet of generateName suffixes in Kubernetes (no vowels, no look-alikes).
_NAME_ALPHABET = 'bcdfghjklmnpqrstvwxz2456789'


# --------------------------------------------------------------------------------------------
# Resource descriptions
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ResourceSpec:
    """What the emulator must know about a resource to serve it like an apiserver."""
    group: str
    version: str
    plural: str
    kind: str
    singular: str = ''
    namespaced: bool = True
    status_subresource: bool = False  # /status is separate from the main endpoint
    custom: bool = False  # CRD-backed: tracks generation, no strategic-merge patches
    shortnames: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()

    @property
    def ref(self) -> kmock.resource:
        return kmock.resource(self.group, self.version, self.plural)

    @property
    def api_version(self) -> str:
        return f'{self.group}/{self.version}' if self.group else self.version


CORE_RESOURCES: tuple[ResourceSpec, ...] = (
    ResourceSpec('', 'v1', 'configmaps', 'ConfigMap', 'configmap', shortnames=('cm',)),
    ResourceSpec('', 'v1', 'secrets', 'Secret', 'secret'),
    ResourceSpec('', 'v1', 'events', 'Event', 'event', shortnames=('ev',)),
    ResourceSpec('', 'v1', 'namespaces', 'Namespace', 'namespace', namespaced=False,
                 shortnames=('ns',)),
    ResourceSpec('coordination.k8s.io', 'v1', 'leases', 'Lease', 'lease'),
    ResourceSpec('apiextensions.k8s.io', 'v1', 'customresourcedefinitions',
                 'CustomResourceDefinition', 'customresourcedefinition', namespaced=False,
                 shortnames=('crd', 'crds')),
)
_CRD_REF = kmock.resource('apiextensions.k8s.io', 'v1', 'customresourcedefinitions')


def specs_from_crd(crd: Mapping[str, Any]) -> list[ResourceSpec]:
    """Describe every served version of a CustomResourceDefinition manifest."""
    spec = crd['spec']
    names = spec['names']
    legacy_subresources = spec.get('subresources') or {}  # apiextensions v1beta1 placement
    return [
        ResourceSpec(
            group=spec['group'],
            version=version['name'],
            plural=names['plural'],
            kind=names['kind'],
            singular=names.get('singular') or names['kind'].lower(),
            namespaced=spec.get('scope', 'Namespaced') == 'Namespaced',
            status_subresource='status' in (version.get('subresources') or legacy_subresources),
            custom=True,
            shortnames=tuple(names.get('shortNames') or ()),
            categories=tuple(names.get('categories') or ()),
        )
        for version in spec.get('versions') or []
        if version.get('served', True)
    ]


def _load_crds(sources: CrdSource | Iterable[CrdSource]) -> list[Mapping[str, Any]]:
    """Read CRD manifests from dicts, YAML files, or directories of YAML files."""
    if isinstance(sources, (str, os.PathLike, Mapping)):
        sources = [sources]
    crds: list[Mapping[str, Any]] = []
    for source in sources:
        if isinstance(source, Mapping):
            crds.append(source)
            continue
        path = pathlib.Path(source)
        files = sorted([*path.glob('*.yaml'), *path.glob('*.yml')]) if path.is_dir() else [path]
        for file in files:
            docs = yaml.safe_load_all(file.read_text(encoding='utf-8'))
            # Skip non-CRD documents so that a whole manifests folder can be passed.
            crds.extend(doc for doc in docs
                        if isinstance(doc, dict) and doc.get('kind') == 'CustomResourceDefinition')
    return crds


# --------------------------------------------------------------------------------------------
# Write accounting
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class WriteRecord:
    """One mutating request (POST/PUT/PATCH/DELETE) as the emulator received it."""
    seq: int  # position in the log; `Emulator.write_mark()` returns the next one
    method: str
    path: str
    group: str
    version: str
    resource: str  # the plural name, e.g. 'actors', 'configmaps', 'events'
    kind: str | None
    namespace: str | None
    name: str | None  # for creations: the name that the object got
    subresource: str | None  # e.g. 'status'
    status_code: int  # the HTTP status of the response
    changed: bool  # False for rejected requests and no-op writes
    content_type: str | None
    at: float  # time.monotonic() when the response was ready
    user_agent: str | None = None  # the client's User-Agent header (who wrote)

    @property
    def is_status(self) -> bool:
        return self.subresource == 'status'

    @property
    def ref(self) -> kmock.resource:
        return kmock.resource(self.group, self.version, self.resource)


# --------------------------------------------------------------------------------------------
# Small pure helpers
# --------------------------------------------------------------------------------------------

def _api_error(status: int, reason: str, message: str, **details: Any) -> kmock.KubernetesError:
    """Build an error that kmock renders as a Kubernetes ``Status`` body."""
    return kmock.KubernetesError(status=status, reason=reason, message=message,
                                 details=details or {'causes': []})


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%dT%H:%M:%SZ')


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: dicts merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_patch(result.get(key), value)
    return result


def _content_type(headers: Mapping[str, str]) -> str:
    for key, value in headers.items():
        if key.lower() == 'content-type':
            return value.split(';')[0].strip().lower()
    return ''


def _apply_patch(old: Body, patch: Any, content_type: str, spec: ResourceSpec) -> Body:
    """Apply a PATCH body as the apiserver would for this content type."""
    if content_type == 'application/json-patch+json':
        if not isinstance(patch, list):
            raise _api_error(400, 'BadRequest', 'a JSON patch must be a list of operations')
        try:
            result: Body = jsonpatch.apply_patch(old, patch, in_place=False)
        except jsonpatch.JsonPatchTestFailed as e:
            # kopf's finalizer/status JSON patches start with a `test` of the resourceVersion.
            raise _api_error(422, 'Invalid', f'the server rejected our request: {e}') from e
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as e:
            raise _api_error(422, 'Invalid', f'the JSON patch cannot be applied: {e}') from e
        return result
    # Strategic merge is only for built-in kinds; CRDs reject it like a real apiserver does.
    # For built-ins it is approximated by a merge patch (no list merging by keys).
    merge_types = {'application/merge-patch+json'}
    if not spec.custom:
        merge_types.add('application/strategic-merge-patch+json')
    if content_type not in merge_types:
        raise _api_error(415, 'UnsupportedMediaType',
                         f'the body of the request was in an unknown format: {content_type!r}')
    if not isinstance(patch, dict):
        raise _api_error(422, 'Invalid', 'a merge patch must be a JSON object')
    merged: Body = _merge_patch(old, patch)
    return merged


def _spec_part(body: Mapping[str, Any], spec: ResourceSpec) -> dict[str, Any]:
    """The part of an object whose change bumps ``metadata.generation``."""
    excluded = {'metadata', 'status'} if spec.status_subresource else {'metadata'}
    return {key: value for key, value in body.items() if key not in excluded}


def _restore_server_fields(old: Body, new: Body) -> None:
    """Keep what only the server may set: clients cannot patch it away or forge it."""
    old_meta: Body = old.get('metadata') or {}
    new_meta: Body = new.setdefault('metadata', {})
    for field in _SERVER_META:
        if field in old_meta:
            new_meta[field] = old_meta[field]
        else:
            new_meta.pop(field, None)
    new['apiVersion'] = old.get('apiVersion', new.get('apiVersion'))
    new['kind'] = old.get('kind', new.get('kind'))


def _isolate_subresource(old: Body, new: Body, spec: ResourceSpec, subresource: str | None) -> Body:
    """The main endpoint cannot change status; /status cannot change anything else."""
    if not spec.status_subresource:
        return new
    if subresource == 'status':
        result = copy.deepcopy(old)
        source = new
    else:
        result = new
        source = old
    if 'status' in source:
        result['status'] = copy.deepcopy(source['status'])
    else:
        result.pop('status', None)
    return result


# --------------------------------------------------------------------------------------------
# Label & field selectors (equality- and set-based; enough for typical operator queries)
# --------------------------------------------------------------------------------------------

Matcher = Callable[[Body], bool]


def _labels(body: Body) -> dict[str, str]:
    labels: dict[str, str] = (body.get('metadata') or {}).get('labels') or {}
    return labels


def _label_matcher(requirement: str) -> Matcher:
    """Compile one label requirement: ``k=v``, ``k!=v``, ``k in (a,b)``, ``k``, ``!k``."""
    if m := re.fullmatch(r'\s*([^\s!=]+)\s+(in|notin)\s+\((.*)\)\s*', requirement):
        key, negated, values = m[1], m[2] == 'notin', {v.strip() for v in m[3].split(',')}
        return lambda body: (_labels(body).get(key) in values) != negated
    if m := re.fullmatch(r'\s*([^\s!=]+)\s*(!=|==|=)\s*(\S*)\s*', requirement):
        key, negated, value = m[1], m[2] == '!=', m[3]
        return lambda body: (_labels(body).get(key) == value) != negated
    if m := re.fullmatch(r'\s*(!?)\s*([^\s!=]+)\s*', requirement):
        negated, key = bool(m[1]), m[2]
        return lambda body: (key in _labels(body)) != negated
    raise _api_error(400, 'BadRequest', f'unable to parse requirement: {requirement!r}')


def _field_matcher(requirement: str) -> Matcher:
    """Compile one field requirement; only metadata.name/namespace are supported."""
    m = re.fullmatch(r'\s*(metadata\.name|metadata\.namespace)\s*(!=|==|=)\s*(\S*)\s*', requirement)
    if m is None:
        raise _api_error(400, 'BadRequest', f'field selector not supported: {requirement!r}')
    field, negated, value = m[1].split('.')[1], m[2] == '!=', m[3]
    return lambda body: ((body.get('metadata') or {}).get(field) == value) != negated


def _selector(params: Mapping[str, str]) -> Matcher:
    """Combine ``labelSelector`` and ``fieldSelector`` query params into one predicate."""
    matchers: list[Matcher] = []
    for text in filter(None, [params.get('labelSelector')]):
        # Split on commas outside of the parentheses of set-based requirements.
        matchers += [_label_matcher(part) for part in re.split(r',(?![^(]*\))', text)]
    for text in filter(None, [params.get('fieldSelector')]):
        matchers += [_field_matcher(part) for part in text.split(',')]
    return lambda body: all(matcher(body) for matcher in matchers)


# --------------------------------------------------------------------------------------------
# kmock 0.8 cannot parse /api/v1/namespaces[/name[/status|finalize]]: it takes "namespaces"
# for the namespace prefix of namespaced URLs. Such URLs are parsed here instead.
# --------------------------------------------------------------------------------------------

_NAMESPACES_PATH = re.compile(r'^/api/v1/namespaces(?:/([^/]+)(?:/(status|finalize))?)?/?$')


async def _parse_namespaces_request(raw: aiohttp.web.BaseRequest, *, id: int,
                                    ) -> kmock_rendering.Request | None:
    match = _NAMESPACES_PATH.match(raw.path)
    if match is None:
        return None
    body = await raw.read()
    try:
        data = json.loads(body) if body else None
    except ValueError:
        data = None
    parsed = kmock_parsing.ParsedPath(group='', version='v1', plural='namespaces',
                                      name=match[1], subresource=match[2])
    method = kmock_enums.method(raw.method)
    return kmock_rendering.Request(
        id=id, raw_request=raw, url=raw.url, method=raw.method,
        params=dict(raw.query), headers=dict(raw.headers), cookies=dict(raw.cookies),
        data=data, body=body, text=body.decode('utf-8', errors='replace'),
        action=kmock_parsing.guess_k8s(parsed, method, dict(raw.query)),
        resource=kmock.resource('', 'v1', 'namespaces'),
        namespace=None, name=match[1], subresource=match[2],
    )


# --------------------------------------------------------------------------------------------
# The emulator
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _LogEntry:
    rv: int
    ref: kmock.resource
    namespace: str | None
    event: Body


@dataclasses.dataclass(frozen=True)
class _Outcome:
    changed: bool
    name: str | None


@attrs.define(kw_only=True)
class Emulator(kmock.KubernetesEmulator):
    """
    kmock's ``KubernetesEmulator`` that behaves like a real apiserver where kopf cares.

    All state changes happen synchronously on the emulator's event loop under
    ``_mutex`` (a thread lock), so the test thread can read consistent snapshots
    via :meth:`get_object`, :meth:`list_objects`, and :attr:`writes`. Do not read
    ``emulator.objects`` from the test thread while the server runs.
    """

    keep_history: bool = True  # keep every version in `emulator.objects[...].history`
    collect_garbage: bool = True  # delete dependents by ownerReferences when owners go
    event_log_limit: int = 100_000  # watch events kept for resumption; older ones answer 410
    # kmock matches each request by scanning its whole request history
    # (`request in payload._source`): O(requests so far) per request, quadratic over
    # a run, and each step applies every reaction's criteria to every request. Only
    # the newest are kept (reactions only ever match the request just appended);
    # the write log above is separate.
    request_history: int = 4
    # Also append each write record, as a JSON line, to this file: how a test reads
    # the log of an emulator served by another process (``--write-log``).
    write_log: pathlib.Path | None = None

    _specs: dict[kmock.resource, ResourceSpec] = attrs.field(factory=dict, init=False)
    _mutex: threading.RLock = attrs.field(factory=threading.RLock, init=False)
    _rv: int = attrs.field(default=0, init=False)
    _uids: dict[str, ObjectKey] = attrs.field(factory=dict, init=False)
    _log: list[_LogEntry] = attrs.field(factory=list, init=False)
    _log_rvs: list[int] = attrs.field(factory=list, init=False)
    _compacted_rv: int = attrs.field(default=0, init=False)
    _wakeup: asyncio.Event = attrs.field(factory=asyncio.Event, init=False)
    _closing: bool = attrs.field(default=False, init=False)
    _outcomes: dict[kmock_rendering.Request, _Outcome] = attrs.field(factory=dict, init=False)
    _writes: list[WriteRecord] = attrs.field(factory=list, init=False)
    _watches: collections.Counter[str] = attrs.field(factory=collections.Counter, init=False)
    _watch_starts: list[tuple[str, str | None]] = attrs.field(factory=list, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()  # registers list/watch/fetch/create/update/delete
        self.fallback[kmock.method.PUT] << self._serve_replace  # kmock has no PUT
        for spec in CORE_RESOURCES:
            self.register_resource(spec)

    # ---- registration ------------------------------------------------------------------

    def register_resource(self, spec: ResourceSpec) -> None:
        """Make a resource discoverable and servable (e.g. to kopf's scanning)."""
        with self._mutex:
            self._specs[spec.ref] = spec
            self.resources[spec.ref] = kmock.ResourceInfo(
                namespaced=spec.namespaced, kind=spec.kind, singular=spec.singular or None,
                verbs=_ALL_VERBS, shortnames=spec.shortnames, categories=spec.categories,
                subresources={'status'} if spec.status_subresource else set(),
            )

    def register_crds(self, sources: CrdSource | Iterable[CrdSource]) -> list[ResourceSpec]:
        """Register CRD manifests (dicts, YAML files, or folders of them) for discovery."""
        specs = [spec for crd in _load_crds(sources) for spec in specs_from_crd(crd)]
        for spec in specs:
            self.register_resource(spec)
        return specs

    # ---- test-side accessors (thread-safe) ---------------------------------------------

    @property
    def resource_version(self) -> int:
        """The latest resourceVersion handed out (global, as etcd's revision)."""
        with self._mutex:
            return self._rv

    def get_object(self, resource: str | kmock.resource, namespace: str | None, name: str,
                   ) -> Body | None:
        """A deep copy of the current object, or None if it does not exist."""
        with self._mutex:
            body = self._current((self._ref(resource), namespace, name))
            return copy.deepcopy(body)

    def list_objects(self, resource: str | kmock.resource, namespace: str | None = None,
                     ) -> list[Body]:
        """Deep copies of current objects of a resource (all namespaces if None)."""
        with self._mutex:
            ref = self._ref(resource)
            return [copy.deepcopy(body) for (res, ns, _), body in self._live_items()
                    if res == ref and (namespace is None or ns == namespace)]

    def active_watches(self, resource: str) -> int:
        """How many watch-streams are open now for a resource (by plural name)."""
        with self._mutex:
            return self._watches[resource]

    def watch_versions(self, resource: str) -> list[str | None]:
        """The ``?resourceVersion=`` of every watch-stream opened for a resource, in order."""
        with self._mutex:
            return [version for plural, version in self._watch_starts if plural == resource]

    @property
    def writes(self) -> list[WriteRecord]:
        """A snapshot of all write requests so far, in arrival order of responses."""
        with self._mutex:
            return list(self._writes)

    def write_mark(self) -> int:
        """A position in the write log: pass it as ``since=`` to count later writes."""
        with self._mutex:
            return len(self._writes)

    def filter_writes(self, resource: str | kmock.resource | None = None, *, since: int = 0,
                      **criteria: Any) -> list[WriteRecord]:
        """Write records matching all the given criteria; see :func:`select_writes`."""
        return select_writes(self.writes[since:], resource, **criteria)

    def count_writes(self, resource: str | kmock.resource | None = None, *, since: int = 0,
                     **criteria: Any) -> int:
        """Count write requests; see :func:`select_writes` for the criteria."""
        return len(self.filter_writes(resource, since=since, **criteria))

    def seconds_since_last_write(self) -> float:
        """How long no write request has arrived (infinity if none ever did)."""
        with self._mutex:
            last = self._writes[-1].at if self._writes else None
        return float('inf') if last is None else time.monotonic() - last


    def shutdown(self) -> None:
        """End all watch-streams so that the HTTP server can stop promptly (loop thread)."""
        self._closing = True
        self._wake_watchers()

    # ---- request plumbing ----------------------------------------------------------------

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        self._trim_request_history()
        await raw_request.read()
        request = await _parse_namespaces_request(raw_request, id=len(self._requests))
        if request is None:
            return await super().__call__(raw_request)
        # A short version of RawHandler.__call__() for the URLs that kmock cannot parse.
        self._requests.append(request)
        try:
            return await self._handle(request)
        except kmock_rendering.StreamingError as e:
            raw_response: aiohttp.web.StreamResponse = e.args[0]
            error = e.__cause__ or e
            if not raw_response.prepared:
                return await self._render_error(error)  # type: ignore[arg-type]
            await self._stream_error(error, raw_response)  # type: ignore[arg-type]
            await raw_response.write_eof()
            return raw_response
        except Exception as e:
            return await self._render_error(e)

    def _trim_request_history(self) -> None:
        # Matching runs synchronously right after a request is appended, so trimming
        # before the next one (on the loop) loses nothing a reaction needs.
        keep = self.request_history
        if len(self._requests) <= keep:
            return
        del self._requests[:-keep]
        for payload in self._payloads:
            with contextlib.suppress(AttributeError):
                del payload._requests[:-keep]

    async def _handle(self, request: kmock_rendering.Request) -> aiohttp.web.StreamResponse:
        # Bypass KubernetesEmulator._handle(): it mutates state before any reaction is matched.
        # Here, state changes in the fallback handlers, so a test's own kmock reactions
        # (e.g. `emulator['patch', ...] << 500`) intercept requests without side effects.
        # kmock offers no public hook between routing and its state changes, so the
        # grandparent's _handle (routing and reactions only) is called directly.
        handle = super(kmock.KubernetesEmulator, self)._handle
        if request.resource is None or request.method.value.upper() not in _WRITE_METHODS:
            return await handle(request)
        status = 500
        try:
            response = await handle(request)
            status = response.status
            return response
        except kmock.KubernetesError as e:
            status = e.status
            raise
        finally:
            self._record_write(request, status)

    def _record_write(self, request: kmock_rendering.Request, status: int) -> None:
        outcome = self._outcomes.pop(request, None)
        assert request.resource is not None  # checked by the caller
        resource = request.resource
        spec = self._specs.get(resource)
        with self._mutex:
            record = WriteRecord(
                seq=len(self._writes),
                method=request.method.value.upper(),
                path=request.url.path,
                group=resource.group or '',
                version=resource.version or '',
                resource=resource.plural or '',
                kind=spec.kind if spec is not None else None,
                namespace=request.namespace,
                name=outcome.name if outcome is not None else request.name,
                subresource=request.subresource,
                status_code=status,
                changed=outcome.changed if outcome is not None else False,
                content_type=_content_type(request.headers) or None,
                at=time.monotonic(),
                user_agent=next((v for k, v in request.headers.items()
                                 if k.lower() == 'user-agent'), None),
            )
            self._writes.append(record)
            if self.write_log is not None:
                with self.write_log.open('a', encoding='utf-8') as log:
                    log.write(json.dumps(dataclasses.asdict(record)) + '\n')

    async def _serve_version(self, request: kmock_rendering.Request) -> Body:
        payload = cast(Body, await super()._serve_version(request))
        if request.resource is not None and request.resource.group == '':
            payload['groupVersion'] = request.resource.version  # kmock says "/v1"
        return payload

    # ---- resource & object lookup ---------------------------------------------------------

    def _ref(self, resource: str | kmock.resource) -> kmock.resource:
        """Resolve 'actors' or 'skillop.dev/v1alpha1/actors' to a registered resource."""
        wanted = kmock.resource(resource)
        with self._mutex:
            matches = [ref for ref in self._specs if wanted.check(ref)]
        if len(matches) != 1:
            raise LookupError(f'{resource!r} matches {len(matches)} registered resources')
        return matches[0]

    def _spec_for(self, request: kmock_rendering.Request) -> ResourceSpec:
        resource = request.resource
        spec = self._specs.get(resource) if resource is not None else None
        if spec is None and resource is not None and resource.plural and (
                resource in self._get_resources()):
            # Declared via kmock's own means: assume a plain namespaced resource.
            spec = ResourceSpec(resource.group or '', resource.version or '', resource.plural,
                                kind=resource.plural.capitalize())
        if spec is None:
            raise _api_error(404, 'NotFound', f'the server could not find the resource {resource}')
        if request.subresource is not None and (
                request.subresource != 'status' or not spec.status_subresource):
            raise _api_error(404, 'NotFound',
                             f'no subresource {request.subresource!r} in {spec.plural}')
        return spec

    def _current(self, key: ObjectKey) -> Body | None:
        if key not in self._objects:
            return None
        obj = self._objects[key]
        return None if obj.deleted else obj.raw

    def _require(self, key: ObjectKey, spec: ResourceSpec) -> Body:
        body = self._current(key)
        if body is None:
            raise _api_error(404, 'NotFound', f'{spec.plural}.{spec.group} "{key[2]}" not found',
                             name=key[2], group=spec.group, kind=spec.plural)
        return copy.deepcopy(body)  # never mutate a stored version: watchers share it

    def _live_items(self) -> Iterator[tuple[ObjectKey, Body]]:
        for key, obj in list(self._objects.items()):
            if not obj.deleted:
                yield key, obj.raw

    def _key(self, spec: ResourceSpec, namespace: str | None, name: str | None) -> ObjectKey:
        if not name:
            raise _api_error(405, 'MethodNotAllowed', 'a name is required in the URL')
        return (spec.ref, namespace if spec.namespaced else None, name)

    # ---- state changes (synchronous, under the mutex) -------------------------------------

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _store(self, key: ObjectKey, body: Body) -> None:
        if key not in self._objects or not self.keep_history:
            self._objects[key] = body
        else:
            self._objects[key].history.append(body)

    def _publish(self, key: ObjectKey, event_type: str, body: Body) -> None:
        rv = int(body['metadata']['resourceVersion'])
        self._log.append(_LogEntry(rv, key[0], key[1], {'type': event_type, 'object': body}))
        self._log_rvs.append(rv)
        if len(self._log) > self.event_log_limit:
            # Like etcd compaction: resuming from before this point answers 410 Gone.
            cut = len(self._log) // 2
            self._compacted_rv = self._log_rvs[cut - 1]
            del self._log[:cut], self._log_rvs[:cut]
        self._wake_watchers()

    def _wake_watchers(self) -> None:
        waking, self._wakeup = self._wakeup, asyncio.Event()
        waking.set()

    def _namespace_for_create(self, spec: ResourceSpec, url_ns: str | None, body_ns: str | None,
                              ) -> str | None:
        if not spec.namespaced:
            return None
        if url_ns and body_ns and url_ns != body_ns:
            raise _api_error(400, 'BadRequest', 'the namespace of the provided object does not '
                                                'match the namespace sent on the request')
        namespace = url_ns or body_ns
        if not namespace:
            raise _api_error(400, 'BadRequest', 'a namespace is required for namespaced resources')
        return namespace

    def _name_for_create(self, spec: ResourceSpec, namespace: str | None, meta: Body) -> str:
        if meta.get('name'):
            return str(meta['name'])
        prefix = str(meta.get('generateName') or '')
        if not prefix:
            raise _api_error(422, 'Invalid', 'metadata.name: Required value: name or '
                                             'generateName is required')
        while True:
            name = prefix + ''.join(random.choices(_NAME_ALPHABET, k=5))
            if self._current((spec.ref, namespace, name)) is None:
                return name

    def _create(self, spec: ResourceSpec, url_ns: str | None, data: Any) -> Body:
        if not isinstance(data, dict) or not isinstance(data.get('metadata', {}), dict):
            raise _api_error(400, 'BadRequest', 'the body must be a JSON object with metadata')
        body: Body = copy.deepcopy(data)
        meta: Body = body.setdefault('metadata', {})
        namespace = self._namespace_for_create(spec, url_ns, meta.get('namespace'))
        name = self._name_for_create(spec, namespace, meta)
        key: ObjectKey = (spec.ref, namespace, name)
        if self._current(key) is not None:
            raise _api_error(409, 'AlreadyExists',
                             f'{spec.plural}.{spec.group} "{name}" already exists',
                             name=name, group=spec.group, kind=spec.plural)
        body.setdefault('apiVersion', spec.api_version)
        body.setdefault('kind', spec.kind)
        if spec.status_subresource:
            body.pop('status', None)  # a real apiserver ignores status on create
        for field in ('deletionTimestamp', 'deletionGracePeriodSeconds', 'generation'):
            meta.pop(field, None)
        meta.update(name=name, uid=str(uuid.uuid4()), resourceVersion=self._next_rv(),
                    creationTimestamp=_now())
        if namespace is not None:
            meta['namespace'] = namespace
        else:
            meta.pop('namespace', None)
        if spec.custom:
            meta['generation'] = 1
        self._store(key, body)
        self._uids[meta['uid']] = key
        self._publish(key, 'ADDED', body)
        if spec.ref == _CRD_REF:
            self.register_crds([body])  # CRDs posted at runtime become discoverable
        return body

    def _update(self, spec: ResourceSpec, key: ObjectKey, old: Body, new: Body,
                subresource: str | None) -> tuple[Body, bool]:
        """Store a patched/replaced object the way the apiserver would; report if changed."""
        asserted_rv = (new.get('metadata') or {}).get('resourceVersion')
        if asserted_rv is not None and str(asserted_rv) != old['metadata']['resourceVersion']:
            raise _api_error(409, 'Conflict', f'Operation cannot be fulfilled on {spec.plural}.'
                                              f'{spec.group} "{key[2]}": the object has been '
                                              'modified; please apply your changes to the '
                                              'latest version and try again')
        new = _isolate_subresource(old, new, spec, subresource)
        _restore_server_fields(old, new)
        old_meta, new_meta = old['metadata'], new['metadata']
        if old_meta.get('deletionTimestamp') and (
                set(new_meta.get('finalizers') or []) - set(old_meta.get('finalizers') or [])):
            raise _api_error(422, 'Invalid', 'metadata.finalizers: Forbidden: no new finalizers '
                                             'can be added if the object is being deleted')
        if new == old:
            return old, False  # a no-op write: no new resourceVersion, no watch event
        if spec.custom and _spec_part(old, spec) != _spec_part(new, spec):
            new_meta['generation'] = int(old_meta.get('generation', 1)) + 1
        new_meta['resourceVersion'] = self._next_rv()
        if new_meta.get('deletionTimestamp') and not new_meta.get('finalizers'):
            self._remove(key, new, cascade=True)  # the last finalizer is gone
        else:
            self._store(key, new)
            self._publish(key, 'MODIFIED', new)
        return new, True

    def _delete(self, spec: ResourceSpec, key: ObjectKey, cascade: bool) -> tuple[Body, bool, bool]:
        """Delete or mark for deletion; return (body, deleted now, changed)."""
        body = self._require(key, spec)
        meta = body['metadata']
        if meta.get('deletionTimestamp'):
            return body, False, False  # already being deleted: waiting for the finalizers
        meta['resourceVersion'] = self._next_rv()
        if meta.get('finalizers'):
            meta.update(deletionTimestamp=_now(), deletionGracePeriodSeconds=0)
            if spec.custom:
                meta['generation'] = int(meta.get('generation', 1)) + 1
            self._store(key, body)
            self._publish(key, 'MODIFIED', body)
            return body, False, True
        self._remove(key, body, cascade=cascade)
        return body, True, True

    def _remove(self, key: ObjectKey, body: Body, *, cascade: bool) -> None:
        """Finally remove an object, then delete its dependents (background propagation)."""
        if self.keep_history:
            self._store(key, body)
            self._objects[key].delete()
        else:
            del self._objects[key]
        uid = body['metadata'].get('uid')
        self._uids.pop(uid, None)
        self._publish(key, 'DELETED', body)
        if cascade and uid and self.collect_garbage:
            self._collect_dependents(uid)

    def _collect_dependents(self, owner_uid: str) -> None:
        """Delete objects whose ownerReferences no longer point to any living owner."""
        for key, body in list(self._live_items()):
            refs = (body.get('metadata') or {}).get('ownerReferences') or []
            if not any(ref.get('uid') == owner_uid for ref in refs):
                continue
            if any(ref.get('uid') in self._uids for ref in refs):
                continue  # other owners are still alive
            spec = self._specs.get(key[0]) or ResourceSpec(
                key[0].group or '', key[0].version or '', key[0].plural or '', kind='')
            self._delete(spec, key, cascade=True)

    # ---- the serving endpoints (fallbacks of kmock's DSL) ---------------------------------

    async def _serve_list(self, request: kmock_rendering.Request) -> Any:
        if request.resource is not None and request.resource.plural is None:
            return await self._serve_version(request)  # "/api/v1/" with a trailing slash
        spec = self._spec_for(request)
        matches = _selector(request.params)
        with self._mutex:
            items = [copy.deepcopy(body) for (ref, ns, _), body in self._live_items()
                     if ref == spec.ref and (request.namespace is None or ns == request.namespace)
                     if matches(body)]
            rv = self._rv
        items.sort(key=lambda body: (body['metadata'].get('namespace') or '',
                                     body['metadata']['name']))
        return kmock_rendering.Response(status=200, payload={
            'apiVersion': spec.api_version, 'kind': f'{spec.kind}List',
            'metadata': {'resourceVersion': str(rv)}, 'items': items,
        })

    async def _serve_watch(self, request: kmock_rendering.Request) -> AsyncIterator[Any]:
        spec = self._spec_for(request)  # errors here still become proper HTTP errors
        matches = _selector(request.params)
        deadline = self._watch_deadline(request.params)
        since = self._watch_since(request.params)
        with self._mutex:
            if since:
                initial = []
            else:  # no version given: the current state as ADDED events, then the changes
                current = [body for (ref, _, _), body in self._live_items() if ref == spec.ref]
                initial = sorted(current, key=lambda body: int(body['metadata']['resourceVersion']))
                since = self._rv
            self._watches[spec.plural] += 1
            self._watch_starts.append((spec.plural, request.params.get('resourceVersion')))
        try:
            yield b''  # send the headers now: the stream may stay silent for a long time
            for body in initial:
                if self._watched(request, spec, body['metadata'].get('namespace'), body, matches):
                    yield {'type': 'ADDED', 'object': body}
            async for event in self._follow_log(request, spec, since, deadline, matches):
                yield event
        finally:
            with self._mutex:
                self._watches[spec.plural] -= 1

    async def _follow_log(self, request: kmock_rendering.Request, spec: ResourceSpec,
                          since: int, deadline: float | None, matches: Matcher,
                          ) -> AsyncIterator[Body]:
        """Stream logged events after a resourceVersion until closed or timed out."""
        loop = asyncio.get_running_loop()
        position = since
        while not self._closing:
            waiter = self._wakeup
            with self._mutex:
                if position < self._compacted_rv:
                    yield {'type': 'ERROR', 'object': {
                        'apiVersion': 'v1', 'kind': 'Status', 'status': 'Failure', 'code': 410,
                        'reason': 'Expired', 'message': f'too old resource version: {position}'}}
                    return
                entries = self._log[bisect.bisect_right(self._log_rvs, position):]
            for entry in entries:
                position = entry.rv
                if entry.ref == spec.ref and self._watched(request, spec, entry.namespace,
                                                           entry.event['object'], matches):
                    yield entry.event
            if entries:
                continue
            timeout = None if deadline is None else deadline - loop.time()
            if timeout is not None and timeout <= 0:
                return
            try:
                await asyncio.wait_for(waiter.wait(), timeout)
            except TimeoutError:
                return

    @staticmethod
    def _watch_since(params: Mapping[str, str]) -> int:
        try:
            return int(params.get('resourceVersion') or 0)
        except ValueError:
            raise _api_error(400, 'BadRequest', 'resourceVersion must be an integer here') from None

    @staticmethod
    def _watch_deadline(params: Mapping[str, str]) -> float | None:
        seconds = params.get('timeoutSeconds')
        return asyncio.get_running_loop().time() + float(seconds) if seconds else None

    @staticmethod
    def _watched(request: kmock_rendering.Request, spec: ResourceSpec, namespace: str | None,
                 body: Body, matches: Matcher) -> bool:
        if spec.namespaced and request.namespace is not None and namespace != request.namespace:
            return False
        if request.name is not None and body['metadata'].get('name') != request.name:
            return False
        return matches(body)

    async def _serve_fetch(self, request: kmock_rendering.Request) -> kmock_rendering.Response:
        spec = self._spec_for(request)
        with self._mutex:
            body = self._require(self._key(spec, request.namespace, request.name), spec)
        return kmock_rendering.Response(status=200, payload=body)

    async def _serve_create(self, request: kmock_rendering.Request) -> kmock_rendering.Response:
        spec = self._spec_for(request)
        if request.subresource is not None:
            raise _api_error(405, 'MethodNotAllowed', 'cannot create a subresource here')
        with self._mutex:
            body = self._create(spec, request.namespace, request.data)
        self._outcomes[request] = _Outcome(changed=True, name=body['metadata']['name'])
        return kmock_rendering.Response(status=201, payload=body)

    async def _serve_update(self, request: kmock_rendering.Request) -> kmock_rendering.Response:
        # kmock calls a PATCH an "update".
        spec = self._spec_for(request)
        with self._mutex:
            key = self._key(spec, request.namespace, request.name)
            old = self._require(key, spec)
            new = _apply_patch(old, request.data, _content_type(request.headers), spec)
            body, changed = self._update(spec, key, old, new, request.subresource)
        self._outcomes[request] = _Outcome(changed=changed, name=request.name)
        return kmock_rendering.Response(status=200, payload=body)

    async def _serve_replace(self, request: kmock_rendering.Request) -> kmock_rendering.Response:
        spec = self._spec_for(request)
        data = request.data
        if not isinstance(data, dict) or not isinstance(data.get('metadata'), dict):
            raise _api_error(400, 'BadRequest', 'the body must be a JSON object with metadata')
        if data['metadata'].get('name') not in (None, request.name):
            raise _api_error(400, 'BadRequest', 'the name of the object does not match the URL')
        with self._mutex:
            key = self._key(spec, request.namespace, request.name)
            old = self._require(key, spec)
            body, changed = self._update(spec, key, old, copy.deepcopy(data), request.subresource)
        self._outcomes[request] = _Outcome(changed=changed, name=request.name)
        return kmock_rendering.Response(status=200, payload=body)

    async def _serve_delete(self, request: kmock_rendering.Request) -> kmock_rendering.Response:
        spec = self._spec_for(request)
        options: Body = request.data if isinstance(request.data, dict) else {}
        propagation = options.get('propagationPolicy') or request.params.get('propagationPolicy')
        with self._mutex:
            key = self._key(spec, request.namespace, request.name)
            self._check_preconditions(spec, key, options.get('preconditions') or {})
            body, deleted, changed = self._delete(spec, key, cascade=propagation != 'Orphan')
        self._outcomes[request] = _Outcome(changed=changed, name=request.name)
        if not deleted or spec.custom:  # the object being deleted, or a deleted custom one
            return kmock_rendering.Response(status=200, payload=body)
        meta = body['metadata']
        return kmock_rendering.Response(status=200, payload={
            'apiVersion': 'v1', 'kind': 'Status', 'metadata': {}, 'status': 'Success',
            'details': {'name': meta['name'], 'group': spec.group, 'kind': spec.plural,
                        'uid': meta.get('uid')},
        })

    def _check_preconditions(self, spec: ResourceSpec, key: ObjectKey,
                             pre: Mapping[str, Any]) -> None:
        meta = self._require(key, spec)['metadata']
        for field in ('uid', 'resourceVersion'):
            if pre.get(field) is not None and pre[field] != meta.get(field):
                raise _api_error(409, 'Conflict', f'Precondition failed: {field} in precondition: '
                                                  f'{pre[field]}, {field} in object meta: '
                                                  f'{meta.get(field)}')


# --------------------------------------------------------------------------------------------
# Serving the emulator in a thread, and pointing the kubernetes client & kopf at it
# --------------------------------------------------------------------------------------------

class _ServerThread:
    """Serve the emulator on its own event loop in a daemon thread."""

    def __init__(self, emulator: Emulator, host: str) -> None:
        self.emulator = emulator
        self.host = host
        self.url = ''
        self.loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name='kube-emulator', daemon=True)

    def start(self, timeout: float) -> str:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError('the Kubernetes emulator did not start in time')
        if self._error is not None:
            raise RuntimeError('the Kubernetes emulator failed to start') from self._error
        return self.url

    def stop(self, timeout: float) -> None:
        if self.loop is not None and self._stop is not None and not self.loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop may have just finished
                self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError('the Kubernetes emulator did not stop in time')

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as e:  # reported to the starting thread
            self._error = e
            self._ready.set()

    async def _serve(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with self.emulator, kmock.Server(self.emulator, host=self.host) as server:
            self.url = str(server.url).rstrip('/')
            self._ready.set()
            await self._stop.wait()
            self.emulator.shutdown()  # end the watch-streams, or the server waits for them


def _kubeconfig(url: str) -> Body:
    return {
        'apiVersion': 'v1', 'kind': 'Config', 'current-context': 'emulator',
        'clusters': [{'name': 'emulator', 'cluster': {'server': url}}],
        'users': [{'name': 'emulator', 'user': {'token': 'emulator-token'}}],
        'contexts': [{'name': 'emulator',
                      'context': {'cluster': 'emulator', 'user': 'emulator',
                                  'namespace': 'default'}}],
    }


@contextlib.contextmanager
def _kubeconfig_environment(url: str) -> Iterator[pathlib.Path]:
    """
    Write a kubeconfig and make it the default everywhere, then restore everything.

    The client reads $KUBECONFIG at import time, hence the module constant too;
    the default Configuration serves code that calls ``CoreV1Api()`` directly.
    """
    kube_config = kubernetes.config.kube_config
    configuration = kubernetes.client.Configuration
    saved = (os.environ.get('KUBECONFIG'), kube_config.KUBE_CONFIG_DEFAULT_LOCATION,
             configuration._default, kubernetes.client.ApiClient._default)
    folder = pathlib.Path(tempfile.mkdtemp(prefix='kube-emulator-'))
    path = folder / 'kubeconfig.yaml'
    path.write_text(yaml.safe_dump(_kubeconfig(url)), encoding='utf-8')
    try:
        os.environ['KUBECONFIG'] = str(path)
        kube_config.KUBE_CONFIG_DEFAULT_LOCATION = str(path)
        kubernetes.client.ApiClient._default = None
        # This also makes it the client's default configuration.
        kubernetes.config.load_kube_config(config_file=str(path))  # type: ignore[no-untyped-call]
        yield path
    finally:
        if saved[0] is None:
            os.environ.pop('KUBECONFIG', None)
        else:
            os.environ['KUBECONFIG'] = saved[0]
        kube_config.KUBE_CONFIG_DEFAULT_LOCATION = saved[1]
        configuration._default = saved[2]
        kubernetes.client.ApiClient._default = saved[3]
        shutil.rmtree(folder, ignore_errors=True)


@dataclasses.dataclass
class EmulatorHandle:
    """A running emulator: its URL, kubeconfig, and a synchronous API client for tests."""
    url: str
    emulator: Emulator
    kubeconfig: pathlib.Path
    api_client: kubernetes.client.ApiClient
    loop: asyncio.AbstractEventLoop

    @functools.cached_property
    def custom(self) -> kubernetes.client.CustomObjectsApi:
        return kubernetes.client.CustomObjectsApi(self.api_client)

    @functools.cached_property
    def core(self) -> kubernetes.client.CoreV1Api:
        return kubernetes.client.CoreV1Api(self.api_client)


@contextlib.contextmanager
def run_emulator(
        crds: CrdSource | Iterable[CrdSource] = (),
        *,
        emulator: Emulator | None = None,
        host: str = '127.0.0.1',
        timeout: float = 10.0,
) -> Iterator[EmulatorHandle]:
    """
    Serve an emulator on a loopback port and point the kubernetes client at it.

    Sets ``$KUBECONFIG``, ``kube_config.KUBE_CONFIG_DEFAULT_LOCATION``, and
    the client's default ``Configuration`` for the duration; restores them after.
    Stop kopf (leave :func:`run_operator`) before leaving this context.
    """
    emulator = emulator if emulator is not None else Emulator()
    emulator.register_crds(crds)
    server = _ServerThread(emulator, host)
    url = server.start(timeout)
    try:
        with _kubeconfig_environment(url) as path:
            api_client: kubernetes.client.ApiClient = kubernetes.config.new_client_from_config(
                config_file=str(path))  # type: ignore[no-untyped-call]
            assert server.loop is not None  # set before the server reports readiness
            try:
                yield EmulatorHandle(url=url, emulator=emulator, kubeconfig=path,
                                     api_client=api_client, loop=server.loop)
            finally:
                api_client.close()  # type: ignore[no-untyped-call]
    finally:
        server.stop(timeout)


# --------------------------------------------------------------------------------------------
# Running kopf
# --------------------------------------------------------------------------------------------

def operator_args(
        *,
        module: str | None = None,
        path: str | os.PathLike[str] | None = None,
        namespaces: Sequence[str] = (),
        extra_args: Sequence[str] = (),
) -> list[str]:
    """The ``kopf run`` CLI arguments: standalone, all namespaces unless some are given."""
    if (module is None) == (path is None):
        raise ValueError('pass exactly one of module= or path=')
    args = ['run', '--standalone']
    args += [f'--namespace={ns}' for ns in namespaces] if namespaces else ['--all-namespaces']
    args += ['-m', module] if module is not None else [os.fspath(path)]  # type: ignore[arg-type]
    return args + list(extra_args)


@contextlib.contextmanager
def run_operator(
        *,
        module: str | None = None,
        path: str | os.PathLike[str] | None = None,
        namespaces: Sequence[str] = (),
        settings: kopf.OperatorSettings | None = None,
        registry: kopf.OperatorRegistry | None = None,
        extra_args: Sequence[str] = (),
        timeout: float = 10.0,
        reraise: bool = True,
) -> Iterator[kopf.testing.KopfRunner]:
    """
    Run ``kopf run --standalone`` in a KopfRunner thread against the emulator.

    Handlers come from ``registry`` if given; otherwise from kopf's global
    default registry, i.e. from every operator module imported so far in this
    process. kopf makes a given registry the global default and never reverts
    it; this helper restores the previous default on exit.
    """
    args = operator_args(module=module, path=path, namespaces=namespaces, extra_args=extra_args)
    previous_registry = kopf.get_default_registry()
    try:
        with _preserved_logging(), kopf.testing.KopfRunner(
                args, settings=settings, registry=registry, timeout=timeout, reraise=reraise,
        ) as runner:
            yield runner
    finally:
        kopf.set_default_registry(previous_registry)


@contextlib.contextmanager
def _preserved_logging() -> Iterator[None]:
    """
    Undo kopf's CLI logging setup when the operator stops.

    ``kopf run`` puts a handler on the root logger that writes to the runner's
    captured stderr (closed afterwards) and sets the root level; left in place,
    later log records in the same process fail with "Logging error".
    """
    root, quiet = logging.getLogger(), logging.getLogger('asyncio')
    saved = (root.handlers[:], root.level, quiet.handlers[:], quiet.propagate)
    try:
        yield
    finally:
        root.handlers[:], quiet.handlers[:] = saved[0], saved[2]
        root.setLevel(saved[1])
        quiet.propagate = saved[3]


def select_writes(
        records: Iterable[WriteRecord],
        resource: str | kmock.resource | None = None,
        *,
        namespace: str | None = None,
        name: str | None = None,
        method: str | None = None,
        subresource: types.EllipsisType | str | None = ...,
        changed: bool | None = None,
        include_events: bool = False,
        include_leases: bool = False,
        user_agent: str | None = None,
) -> list[WriteRecord]:
    """
    The write records matching all the given criteria.

    ``resource`` is a plural ('actors') or a full reference
    ('skillop.dev/v1alpha1/actors', 'v1/configmaps'). kopf's own Event posts
    are excluded unless ``include_events=True`` or ``resource='events'``; so
    are leader election's Lease renewals unless ``include_leases=True`` or
    ``resource='leases'`` (coordination, not object writes).
    ``subresource='status'`` selects status writes, ``None`` main-body ones.
    ``user_agent`` selects the writes whose User-Agent contains it.
    """
    ref = kmock.resource(resource) if resource is not None else None
    wanted_events = include_events or (ref is not None and ref.plural == 'events')
    wanted_leases = include_leases or (ref is not None and ref.plural == 'leases')
    return [
        record for record in records
        if ref is None or ref.check(record.ref)
        if wanted_events or record.resource != 'events'
        if wanted_leases or record.resource != 'leases'
        if user_agent is None or user_agent in (record.user_agent or '')
        if namespace is None or record.namespace == namespace
        if name is None or record.name == name
        if method is None or record.method == method.upper()
        if subresource is ... or record.subresource == subresource
        if changed is None or record.changed == changed
    ]


def read_write_log(path: str | os.PathLike[str]) -> list[WriteRecord]:
    """The write records an emulator served with ``--write-log`` has logged so far."""
    text = pathlib.Path(path).read_text(encoding='utf-8')
    # The last line may be half-written while the emulator runs.
    lines = text.split('\n')[:-1]
    return [WriteRecord(**json.loads(line)) for line in lines if line]


def wait_until_quiet(emulator: Emulator, *, quiet: float = 0.3, timeout: float = 10.0) -> None:
    """Wait until no write request arrived for ``quiet`` seconds (e.g. kopf is idle)."""
    wait_for(lambda: emulator.seconds_since_last_write() >= quiet, timeout=timeout,
             interval=quiet / 5, message=f'no writes for {quiet}s')


def wait_for(
        predicate: Callable[[], T],
        *,
        timeout: float = 5.0,
        interval: float = 0.01,
        ignore: tuple[type[BaseException], ...] = (),
        message: str = '',
) -> T:
    """
    Poll until ``predicate()`` is truthy and return its value, or fail on timeout.

    Exceptions listed in ``ignore`` (e.g. ``ApiException`` for a not-yet-created
    object) count as "not yet".
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = predicate()
            if value:
                return value
            last = value
        except ignore as e:
            last = e
        if time.monotonic() >= deadline:
            raise TimeoutError(f'not true within {timeout}s: {message or predicate!r}; '
                               f'last: {last!r}')
        time.sleep(interval)


def serve_forever(crds: Sequence[str], kubeconfig: str, write_log: str | None = None) -> None:
    """Serve the emulator in this process until interrupted, for another process's use.

    Benchmarks run the operator against it as against a real cluster
    (``--kubeconfig``), so the API server does not share the operator's GIL.
    With ``write_log``, every write record is appended there as a JSON line
    (:func:`read_write_log` reads them back).
    """
    log = pathlib.Path(write_log) if write_log else None
    if log is not None:
        log.write_text('')
    server = _ServerThread(Emulator(keep_history=False, write_log=log), '127.0.0.1')
    server.emulator.register_crds([pathlib.Path(c) for c in crds])
    url = server.start(10.0)
    # Written whole, then renamed: a client waiting for the file must not read it half-written.
    target = pathlib.Path(kubeconfig)
    partial = target.with_name(target.name + '.partial')
    partial.write_text(yaml.safe_dump(_kubeconfig(url)))
    partial.replace(target)
    print(f'serving {url}; kubeconfig {kubeconfig}', flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop(10.0)


if __name__ == '__main__':
    import argparse

    parser = argparse.ArgumentParser(description='Serve the Kubernetes API emulator.')
    parser.add_argument('--crds', nargs='*', default=[], help='CRD files or directories')
    parser.add_argument('--kubeconfig', required=True, help='where to write the kubeconfig')
    parser.add_argument('--write-log', help='append every write record here (JSON lines)')
    ns = parser.parse_args()
    serve_forever(ns.crds, ns.kubeconfig, ns.write_log)
