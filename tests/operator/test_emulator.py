"""
Proof that tests/kube_emulator.py behaves like an apiserver where kopf cares,
and that the real kopf runs against it (with the tiny _demo_operator.py).

The test bodies are synchronous: the emulator runs on its own loop in a daemon
thread, kopf runs in KopfRunner's thread, and the tests talk to the emulator
with the synchronous kubernetes client.
"""
import json
import pathlib
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any, cast

import _demo_operator as demo
import kmock
import kopf
import pytest
import yaml
from kubernetes.client.exceptions import ApiException

import kube_emulator
from kube_emulator import EmulatorHandle, run_emulator, run_operator, wait_for, wait_until_quiet

GROUP, VERSION = 'skillop.dev', 'v1alpha1'
NS = 'team-a'


def _crd(kind: str, plural: str) -> dict[str, Any]:
    return {
        'apiVersion': 'apiextensions.k8s.io/v1',
        'kind': 'CustomResourceDefinition',
        'metadata': {'name': f'{plural}.{GROUP}'},
        'spec': {
            'group': GROUP,
            'scope': 'Namespaced',
            'names': {'kind': kind, 'plural': plural, 'singular': kind.lower(),
                      'shortNames': [kind.lower()[:2]]},
            'versions': [{
                'name': VERSION, 'served': True, 'storage': True,
                'subresources': {'status': {}},
                'schema': {'openAPIV3Schema': {'type': 'object',
                                               'x-kubernetes-preserve-unknown-fields': True}},
            }],
        },
    }


CRDS = [_crd('Tool', 'tools'), _crd('Skill', 'skills'), _crd('Actor', 'actors')]


@pytest.fixture
def kube() -> Iterator[EmulatorHandle]:
    with run_emulator(CRDS) as handle:
        yield handle


def _actor(name: str, greeting: str = 'hi', **metadata: Any) -> dict[str, Any]:
    return {'apiVersion': f'{GROUP}/{VERSION}', 'kind': 'Actor',
            'metadata': {'name': name, **metadata}, 'spec': {'greeting': greeting}}


# The custom-objects client returns untyped `object`s: these helpers give them a type.

def _create_actor(kube: EmulatorHandle, name: str, body: dict[str, Any] | None = None,
                  **kwargs: Any) -> dict[str, Any]:
    return cast(dict[str, Any], kube.custom.create_namespaced_custom_object(
        GROUP, VERSION, NS, 'actors', body or _actor(name, **kwargs)))


def _patch_actor(kube: EmulatorHandle, name: str, patch: Any, *, status: bool = False,
                 content_type: str | None = None) -> dict[str, Any]:
    method = (kube.custom.patch_namespaced_custom_object_status if status else
              kube.custom.patch_namespaced_custom_object)
    return cast(dict[str, Any], method(GROUP, VERSION, NS, 'actors', name, patch,
                                       _content_type=content_type))


def _delete_actor(kube: EmulatorHandle, name: str, **kwargs: Any) -> dict[str, Any]:
    return cast(dict[str, Any], kube.custom.delete_namespaced_custom_object(
        GROUP, VERSION, NS, 'actors', name, **kwargs))


def _list_actors(kube: EmulatorHandle) -> dict[str, Any]:
    return cast(dict[str, Any], kube.custom.list_namespaced_custom_object(
        GROUP, VERSION, NS, 'actors'))


def _stored(kube: EmulatorHandle, resource: str, name: str) -> dict[str, Any]:
    """The emulator's current copy of an object that must exist."""
    body = kube.emulator.get_object(resource, NS, name)
    assert body is not None, f'{resource}/{name} does not exist'
    return body


def _create_configmap(kube: EmulatorHandle, name: str, **metadata: Any) -> None:
    body = {'metadata': {'name': name, **metadata}}
    kube.core.create_namespaced_config_map(NS, body)  # type: ignore[arg-type]  # dicts work


def _watch(kube: EmulatorHandle, path: str, *, count: int | None = None,
           **params: str) -> list[dict[str, Any]]:
    """Read a raw watch-stream: `count` events, or until the server ends it."""
    query = urllib.parse.urlencode({'watch': 'true', **params})
    events: list[dict[str, Any]] = []
    with urllib.request.urlopen(f'{kube.url}{path}?{query}', timeout=5) as response:
        while count is None or len(events) < count:
            line = response.readline()
            if not line:
                break
            if line.strip():
                events.append(json.loads(line))
    return events


def _summary(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(event['type'], event['object']['metadata']['name']) for event in events]


ACTORS_PATH = f'/apis/{GROUP}/{VERSION}/namespaces/{NS}/actors'


# --------------------------------------------------------------------------------------------
# The emulator alone
# --------------------------------------------------------------------------------------------

def test_discovery_serves_the_crds_and_core_resources(kube: EmulatorHandle) -> None:
    custom = kube.custom.get_api_resources(GROUP, VERSION)
    names = {resource.name: resource for resource in custom.resources}
    assert set(names) == {'tools', 'tools/status', 'skills', 'skills/status',
                          'actors', 'actors/status'}
    assert names['actors'].kind == 'Actor' and names['actors'].namespaced
    assert {'list', 'watch', 'patch'} <= set(names['actors'].verbs)

    core = kube.core.get_api_resources()
    assert core.group_version == 'v1'
    core_names = {resource.name: resource for resource in core.resources}
    assert {'configmaps', 'secrets', 'events', 'namespaces'} <= set(core_names)
    assert not core_names['namespaces'].namespaced


def test_create_fills_in_server_side_metadata(kube: EmulatorHandle) -> None:
    first = _create_actor(kube, 'a1')
    body = _create_actor(kube, '', body={
        **_actor(''), 'metadata': {'generateName': 'gen-'}, 'status': {'forged': True}})

    meta = first['metadata']
    assert meta['namespace'] == NS  # from the URL
    assert meta['generation'] == 1
    assert len(meta['uid']) == 36
    assert meta['creationTimestamp'].endswith('Z')
    assert body['metadata']['name'].startswith('gen-') and len(body['metadata']['name']) == 9
    assert int(body['metadata']['resourceVersion']) > int(meta['resourceVersion'])
    assert 'status' not in body  # ignored on create: status is a subresource


def test_creating_an_existing_name_conflicts(kube: EmulatorHandle) -> None:
    _create_actor(kube, 'a1')
    with pytest.raises(ApiException) as error:
        _create_actor(kube, 'a1')
    assert error.value.status == 409
    assert json.loads(str(error.value.body))['reason'] == 'AlreadyExists'


def test_missing_objects_and_resources_answer_404(kube: EmulatorHandle) -> None:
    calls: list[Callable[[], object]] = [
        lambda: kube.custom.get_namespaced_custom_object(GROUP, VERSION, NS, 'actors', 'nope'),
        lambda: _patch_actor(kube, 'nope', {'spec': {'greeting': 'x'}}),
        lambda: _delete_actor(kube, 'nope'),
        lambda: kube.core.read_namespaced_config_map('nope', NS),
        lambda: kube.custom.list_namespaced_custom_object(GROUP, VERSION, NS, 'unknowns'),
    ]
    for call in calls:
        with pytest.raises(ApiException) as error:
            call()
        assert error.value.status == 404


def test_generation_bumps_only_when_the_spec_changes(kube: EmulatorHandle) -> None:
    created = _create_actor(kube, 'a1')
    spec_patched = _patch_actor(kube, 'a1', {'spec': {'greeting': 'hello'}})
    labelled = _patch_actor(kube, 'a1', {'metadata': {'labels': {'team': 'a'}}})
    mark = kube.emulator.write_mark()
    unchanged = _patch_actor(kube, 'a1', {'metadata': {'labels': {'team': 'a'}}})

    versions = [int(body['metadata']['resourceVersion'])
                for body in (created, spec_patched, labelled)]
    assert versions == sorted(set(versions))  # every real change gets a newer version
    generations = [body['metadata']['generation'] for body in (created, spec_patched, labelled)]
    assert generations == [1, 2, 2]
    # A no-op patch changes nothing, like in a real apiserver, and is logged as such.
    assert unchanged['metadata']['resourceVersion'] == labelled['metadata']['resourceVersion']
    assert [record.changed for record in kube.emulator.filter_writes(since=mark)] == [False]


def test_status_is_a_separate_subresource(kube: EmulatorHandle) -> None:
    _create_actor(kube, 'a1')
    via_status = _patch_actor(kube, 'a1', {'status': {'phase': 'Ready'}, 'spec': {'greeting': 'x'}},
                              status=True)
    via_main = _patch_actor(kube, 'a1', {'status': {'phase': 'Forged'}})

    assert via_status['status'] == {'phase': 'Ready'}
    assert via_status['spec'] == {'greeting': 'hi'}  # /status ignores everything but status
    assert via_status['metadata']['generation'] == 1  # status writes never bump generation
    assert via_main['status'] == {'phase': 'Ready'}  # the main endpoint ignores status
    writes = kube.emulator.filter_writes('actors', method='PATCH')
    assert [(w.is_status, w.changed) for w in writes] == [(True, True), (False, False)]


def test_json_patch_test_operation_failing_answers_422(kube: EmulatorHandle) -> None:
    body = _create_actor(kube, 'a1')
    version = body['metadata']['resourceVersion']
    add_finalizer = {'op': 'add', 'path': '/metadata/finalizers', 'value': ['x/y']}
    json_patch = 'application/json-patch+json'

    with pytest.raises(ApiException) as error:
        _patch_actor(kube, 'a1', [{'op': 'test', 'path': '/metadata/resourceVersion',
                                   'value': 'stale'}, add_finalizer], content_type=json_patch)
    patched = _patch_actor(kube, 'a1', [{'op': 'test', 'path': '/metadata/resourceVersion',
                                         'value': version}, add_finalizer], content_type=json_patch)

    assert error.value.status == 422
    assert patched['metadata']['finalizers'] == ['x/y']


def test_a_stale_resource_version_conflicts(kube: EmulatorHandle) -> None:
    stale = _create_actor(kube, 'a1')
    _patch_actor(kube, 'a1', {'spec': {'greeting': 'newer'}})

    with pytest.raises(ApiException) as merge_error:
        stale_version = stale['metadata']['resourceVersion']
        _patch_actor(kube, 'a1', {'metadata': {'resourceVersion': stale_version},
                                  'spec': {'greeting': 'lost update'}})
    with pytest.raises(ApiException) as put_error:
        kube.custom.replace_namespaced_custom_object(GROUP, VERSION, NS, 'actors', 'a1', stale)

    assert merge_error.value.status == put_error.value.status == 409
    assert _stored(kube, 'actors', 'a1')['spec'] == {'greeting': 'newer'}


def test_finalizers_delay_the_deletion(kube: EmulatorHandle) -> None:
    _create_actor(kube, 'a1', finalizers=['example.com/cleanup'])
    marked = _delete_actor(kube, 'a1')

    assert marked['metadata']['deletionTimestamp']
    assert marked['metadata']['generation'] == 2  # as in Kubernetes: deletion bumps it
    assert kube.emulator.get_object('actors', NS, 'a1') is not None  # still there, being deleted
    with pytest.raises(ApiException) as error:
        _patch_actor(kube, 'a1', {'metadata': {'finalizers': ['example.com/cleanup', 'late/one']}})
    assert error.value.status == 422  # no new finalizers on an object being deleted

    _patch_actor(kube, 'a1', {'metadata': {'finalizers': None}})
    assert kube.emulator.get_object('actors', NS, 'a1') is None  # released: gone for good


def test_owned_objects_are_garbage_collected(kube: EmulatorHandle) -> None:
    owner = _create_actor(kube, 'owner')
    other = _create_actor(kube, 'other')

    def owned_by(*owners: dict[str, Any]) -> list[dict[str, Any]]:
        return [{'apiVersion': o['apiVersion'], 'kind': o['kind'], 'name': o['metadata']['name'],
                 'uid': o['metadata']['uid']} for o in owners]

    _create_configmap(kube, 'only-owner', ownerReferences=owned_by(owner))
    _create_configmap(kube, 'two-owners', ownerReferences=owned_by(owner, other))
    _create_configmap(kube, 'orphan', ownerReferences=owned_by(other))

    _delete_actor(kube, 'owner')
    assert kube.emulator.get_object('configmaps', NS, 'only-owner') is None
    assert kube.emulator.get_object('configmaps', NS, 'two-owners') is not None  # 1 owner lives

    _delete_actor(kube, 'other', propagation_policy='Orphan')
    assert kube.emulator.get_object('configmaps', NS, 'two-owners') is not None  # orphaned, kept
    assert kube.emulator.get_object('configmaps', NS, 'orphan') is not None


def test_list_returns_the_current_resource_version(kube: EmulatorHandle) -> None:
    _create_actor(kube, 'a1')
    _create_configmap(kube, 'cm')  # the counter is global, as etcd's revision
    listed = _list_actors(kube)

    assert listed['metadata']['resourceVersion'] == str(kube.emulator.resource_version) == '2'
    assert [item['metadata']['name'] for item in listed['items']] == ['a1']


def test_watch_resumes_after_the_given_resource_version(kube: EmulatorHandle) -> None:
    _create_actor(kube, 'before')
    version = _list_actors(kube)['metadata']['resourceVersion']
    _create_actor(kube, 'after')
    _patch_actor(kube, 'before', {'spec': {'greeting': 'changed'}})
    _delete_actor(kube, 'after')

    resumed = _watch(kube, ACTORS_PATH, count=3, resourceVersion=version)
    fresh = _watch(kube, ACTORS_PATH, count=1)

    # Nothing at or below the version is replayed; later changes arrive in order.
    assert _summary(resumed) == [('ADDED', 'after'), ('MODIFIED', 'before'), ('DELETED', 'after')]
    assert [int(e['object']['metadata']['resourceVersion']) for e in resumed] == sorted(
        int(e['object']['metadata']['resourceVersion']) for e in resumed)
    # Without a version, a watch starts with the current state.
    assert _summary(fresh) == [('ADDED', 'before')]
    assert fresh[0]['object']['spec'] == {'greeting': 'changed'}


def test_watch_filters_by_labels_and_ends_on_timeout(kube: EmulatorHandle) -> None:
    _create_actor(kube, 'red', labels={'color': 'red'})
    _create_actor(kube, 'blue', labels={'color': 'blue'})

    started = time.monotonic()
    events = _watch(kube, ACTORS_PATH, labelSelector='color in (red,green)', timeoutSeconds='0.2')

    assert _summary(events) == [('ADDED', 'red')]
    assert 0.15 < time.monotonic() - started < 2  # the server closed the stream by itself


def test_resuming_from_a_compacted_version_answers_410() -> None:
    with run_emulator(CRDS, emulator=kube_emulator.Emulator(event_log_limit=4)) as kube:
        for index in range(6):
            _create_actor(kube, f'a{index}')
        events = _watch(kube, ACTORS_PATH, count=1, resourceVersion='1')

    assert events[0]['type'] == 'ERROR'
    assert events[0]['object']['code'] == 410  # kopf then re-lists, as with a real apiserver


def test_crds_from_files_and_posted_crds_become_discoverable(tmp_path: pathlib.Path) -> None:
    manifests = tmp_path / 'crds'
    manifests.mkdir()
    (manifests / 'tools.yaml').write_text(yaml.safe_dump_all([CRDS[0], {'kind': 'ConfigMap'}]))

    with run_emulator(manifests) as kube:
        served = {r.name for r in kube.custom.get_api_resources(GROUP, VERSION).resources}
        kube.custom.create_cluster_custom_object(
            'apiextensions.k8s.io', 'v1', 'customresourcedefinitions', _crd('Skill', 'skills'))
        served_later = {r.name for r in kube.custom.get_api_resources(GROUP, VERSION).resources}

    assert served == {'tools', 'tools/status'}
    assert served_later == served | {'skills', 'skills/status'}


def test_kmock_reactions_inject_failures_without_changing_state(kube: EmulatorHandle) -> None:
    _create_actor(kube, 'a1')
    kube.emulator[kmock.method.PATCH, kmock.resource(GROUP, VERSION, 'actors')] << 503

    with pytest.raises(ApiException) as error:
        _patch_actor(kube, 'a1', {'spec': {'greeting': 'lost'}})

    assert error.value.status == 503
    assert _stored(kube, 'actors', 'a1')['spec'] == {'greeting': 'hi'}
    assert kube.emulator.writes[-1].status_code == 503 and not kube.emulator.writes[-1].changed


def test_writes_are_logged_and_countable(kube: EmulatorHandle) -> None:
    _create_actor(kube, 'a1')
    mark = kube.emulator.write_mark()
    _patch_actor(kube, 'a1', {'status': {'phase': 'Ready'}}, status=True)
    _create_configmap(kube, 'cm')
    kube.core.create_namespaced_event(NS, {  # type: ignore[arg-type]  # dicts work
        'metadata': {'generateName': 'ev-'}, 'involvedObject': {'name': 'a1'}})
    with pytest.raises(ApiException):
        _create_actor(kube, 'a1')

    emulator = kube.emulator
    assert emulator.count_writes() == 4  # events are left out unless asked for
    assert emulator.count_writes(include_events=True) == 5
    assert emulator.count_writes('events') == 1
    assert emulator.count_writes('actors', since=mark) == 2
    assert emulator.count_writes(f'{GROUP}/{VERSION}/actors', subresource='status') == 1
    assert emulator.count_writes('v1/configmaps', method='post', name='cm') == 1
    assert emulator.count_writes('actors', changed=False) == 1  # the 409
    assert [w.status_code for w in emulator.filter_writes('actors')] == [201, 200, 409]


# --------------------------------------------------------------------------------------------
# The real kopf against the emulator
# --------------------------------------------------------------------------------------------

def _operator() -> Any:
    """Run the demo operator: a module with kopf handlers, loaded like `kopf run -m`."""
    return run_operator(module='_demo_operator', registry=demo.registry)


def _status(kube: EmulatorHandle, name: str) -> dict[str, Any]:
    status: dict[str, Any] = (kube.emulator.get_object('actors', NS, name) or {}).get('status', {})
    return status


def _wait_handled(kube: EmulatorHandle, name: str, generation: int) -> None:
    wait_for(lambda: _status(kube, name).get('observedGeneration') == generation,
             message=f'{name} handled at generation {generation}')
    wait_until_quiet(kube.emulator)  # kopf finishes its follow-up patches


@pytest.fixture
def demo_calls() -> list[tuple[str, str, int]]:
    demo.calls.clear()
    return demo.calls


def test_operator_reconciles_creation_and_spec_changes(
        kube: EmulatorHandle, demo_calls: list[tuple[str, str, int]]) -> None:
    with _operator() as runner:
        _create_actor(kube, 'a1', greeting='hi')
        _wait_handled(kube, 'a1', generation=1)
        configmap = kube.core.read_namespaced_config_map(demo.configmap_name('a1'), NS)
        writes_after_create = kube.emulator.count_writes('actors')

        mark = kube.emulator.write_mark()
        _patch_actor(kube, 'a1', {'spec': {'greeting': 'hello'}})
        _wait_handled(kube, 'a1', generation=2)
        updated = kube.core.read_namespaced_config_map(demo.configmap_name('a1'), NS)
        wait_for(lambda: kube.emulator.count_writes('events') == 2)  # posted in the background

    assert runner.exit_code == 0 and runner.exception is None
    assert demo_calls == [('create', 'a1', 1), ('update', 'a1', 2)]
    assert configmap.data == {'greeting': 'hi'} and updated.data == {'greeting': 'hello'}
    assert configmap.metadata and configmap.metadata.owner_references
    assert configmap.metadata.owner_references[0].name == 'a1'  # kopf.adopt()
    assert _status(kube, 'a1')['configMap'] == demo.configmap_name('a1')
    # One write per ConfigMap change; kopf's own bookkeeping on the Actor stays small.
    assert [(w.method, w.status_code) for w in kube.emulator.filter_writes('configmaps')] == [
        ('POST', 201), ('POST', 409), ('PUT', 200)]  # create; on update: create, then replace
    assert 1 < writes_after_create <= 6
    assert kube.emulator.count_writes('actors', since=mark, subresource='status') >= 1
    assert kube.emulator.count_writes('actors', since=mark, method='PATCH', subresource=None) >= 1


def test_operator_restart_reprocesses_nothing(
        kube: EmulatorHandle, demo_calls: list[tuple[str, str, int]]) -> None:
    with _operator():
        _create_actor(kube, 'a1')
        _wait_handled(kube, 'a1', generation=1)
    mark = kube.emulator.write_mark()

    with _operator() as runner:
        wait_for(lambda: kube.emulator.active_watches('actors') > 0)  # listed & watching
        time.sleep(0.5)  # a re-processing operator would have patched something by now

    assert runner.exit_code == 0
    assert kube.emulator.filter_writes(since=mark, include_events=True) == []
    assert demo_calls == [('create', 'a1', 1)]


def test_operator_reconnecting_watches_reprocess_nothing(
        kube: EmulatorHandle, demo_calls: list[tuple[str, str, int]]) -> None:
    settings = kopf.OperatorSettings()
    settings.watching.server_timeout = 1  # the emulator ends each watch-stream after 1 s
    with run_operator(module='_demo_operator', registry=demo.registry, settings=settings):
        _create_actor(kube, 'a1')
        _wait_handled(kube, 'a1', generation=1)
        mark, watches = kube.emulator.write_mark(), len(kube.emulator.watch_versions('actors'))
        seen_version = _stored(kube, 'actors', 'a1')['metadata']['resourceVersion']
        wait_for(lambda: len(kube.emulator.watch_versions('actors')) >= watches + 2, timeout=5)
        writes_while_reconnecting = kube.emulator.filter_writes(since=mark, include_events=True)
        reconnected_at = kube.emulator.watch_versions('actors')[watches:]
        _patch_actor(kube, 'a1', {'spec': {'greeting': 'after reconnects'}})
        _wait_handled(kube, 'a1', generation=2)

    # kopf resumed from the last seen resourceVersion: no replays, no extra handling.
    assert set(reconnected_at) == {seen_version}
    assert writes_while_reconnecting == []
    assert demo_calls == [('create', 'a1', 1), ('update', 'a1', 2)]


def test_operator_deletion_releases_the_finalizer_and_collects_owned_objects(
        kube: EmulatorHandle, demo_calls: list[tuple[str, str, int]]) -> None:
    with _operator():
        _create_actor(kube, 'a1')
        _wait_handled(kube, 'a1', generation=1)
        finalizers = _stored(kube, 'actors', 'a1')['metadata']['finalizers']
        _delete_actor(kube, 'a1')
        wait_for(lambda: kube.emulator.get_object('actors', NS, 'a1') is None, message='a1 deleted')

    assert finalizers == ['kopf.zalando.org/KopfFinalizerMarker']
    assert demo_calls[-1][:2] == ('delete', 'a1')
    assert kube.emulator.get_object('configmaps', NS, demo.configmap_name('a1')) is None  # GC
