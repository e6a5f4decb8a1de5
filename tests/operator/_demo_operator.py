"""
A tiny kopf operator used only to prove the emulator harness (test_emulator.py).

For every Actor it writes an owned ConfigMap with the Actor's greeting and
reports the handled generation in the status. Handlers live in their own
registry, so that importing this module never adds handlers to the operator
under test (kopf's default registry is process-global).
"""
import threading
from typing import Any

import kopf
import kubernetes
from kubernetes.client.exceptions import ApiException

GROUP, VERSION, PLURAL = 'skillop.dev', 'v1alpha1', 'actors'

registry = kopf.OperatorRegistry()

# (reason, actor name, generation) for every handler run, for the tests to assert on.
calls: list[tuple[str, str, int]] = []
_calls_lock = threading.Lock()  # sync handlers run in kopf's thread pool


@kopf.on.login(registry=registry)
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """A fresh registry has none of kopf's fallback logins: use the kubernetes client's."""
    return kopf.login_via_client(**kwargs)


def configmap_name(actor_name: str) -> str:
    return f'{actor_name}-greeting'


def _record(reason: str, name: str, meta: kopf.Meta) -> None:
    with _calls_lock:
        calls.append((reason, name, int(meta.get('generation', 0))))


@kopf.on.create(GROUP, VERSION, PLURAL, registry=registry)
@kopf.on.update(GROUP, VERSION, PLURAL, field='spec', registry=registry)
def render_greeting(body: kopf.Body, spec: kopf.Spec, meta: kopf.Meta, name: str,
                    namespace: str | None, reason: str, patch: kopf.Patch, logger: kopf.Logger,
                    **_: Any) -> None:
    """Create or replace the Actor's ConfigMap, then report what was handled."""
    assert namespace is not None  # Actors are namespaced
    configmap: dict[str, Any] = {
        'apiVersion': 'v1', 'kind': 'ConfigMap',
        'metadata': {'name': configmap_name(name)},
        'data': {'greeting': str(spec.get('greeting', ''))},
    }
    kopf.adopt(configmap, owner=body)  # ownerReference + namespace: garbage-collected with it
    api = kubernetes.client.CoreV1Api()  # the default config points to the emulator
    try:
        api.create_namespaced_config_map(namespace, configmap)  # type: ignore[arg-type]
    except ApiException as e:
        if e.status != 409:
            raise
        api.replace_namespaced_config_map(  # dicts pass the client's validation too
            configmap_name(name), namespace, configmap)  # type: ignore[arg-type]
    patch.status['configMap'] = configmap_name(name)
    patch.status['observedGeneration'] = meta['generation']
    _record(str(reason), name, meta)
    logger.info('Greeting rendered.')  # kopf 1.45 no longer posts log lines as k8s Events...
    kopf.info(body, reason='GreetingRendered', message='Greeting rendered.')  # ...only these


@kopf.on.delete(GROUP, VERSION, PLURAL, registry=registry)
def forget(name: str, meta: kopf.Meta, **_: Any) -> None:
    """Exists so that kopf puts its finalizer on Actors (deletion goes through kopf)."""
    _record('delete', name, meta)
