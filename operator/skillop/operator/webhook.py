"""The admission webhooks: kopf handlers over ``admission.review`` and ``resolve.inject``.

``register`` (``SKILLOP_WEBHOOK=true``) adds the two ``@kopf.on.validate``
handlers (Skills and Actors, CREATE and UPDATE); ``register_approvals`` (whenever
the server runs) the ``@kopf.on.mutate`` handler of ToolCallApprovals (who asks,
who decides: ``approvals.admit_request``/``admit_decision``); ``register_injection``
(``SKILLOP_INJECTION=true``) the ``@kopf.on.mutate`` handler that injects the
gateway into pods labelled ``skillop.dev/actor`` on CREATE (docs/gateway.md,
Injection) and the ``@kopf.on.validate`` handler that keeps such pods' gateways
out of reach on UPDATE (``podguard.check_update``). ``configure`` sets kopf's
webhook server, shared by all of them.
TLS comes from files (cert-manager or a chart-made CA: ``SKILLOP_WEBHOOK_CERT``/
``SKILLOP_WEBHOOK_KEY``) or, without them, from a self-signed certificate
generated at startup with ``cryptography`` (kopf's own generator needs
``certbuilder``, which skillop does not ship).
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Collection, Mapping, MutableMapping
from typing import Any, Literal, TypedDict

import kopf

from skillop.model.approval import PLURAL
from skillop.model.names import ACTOR_LABEL, API_GROUP, API_VERSION, ObjectRef
from skillop.operator import approvals
from skillop.operator.admission import review
from skillop.operator.settings import OperatorConfig
from skillop.resolve.catalog import Catalog
from skillop.resolve.inject import (
    Refused,
    SidecarSettings,
    actor_of,
    inject,
    mounted_credentials,
    target_of,
    unknown_actor,
)
from skillop.resolve.podguard import check_update
from skillop.resolve.resolver import Resolver

#: Handler ids; kopf serves each at ``https://<host>:<port>/<id>``.
SKILL_WEBHOOK = "validate-skills"
ACTOR_WEBHOOK = "validate-actors"
POD_WEBHOOK = "inject-pods"
POD_UPDATE_WEBHOOK = "validate-pods"
APPROVAL_WEBHOOK = "mutate-toolcallapprovals"
OPERATIONS: tuple[Literal["CREATE"], Literal["UPDATE"]] = ("CREATE", "UPDATE")

# How each webhook fails when no replica answers, as kopf writes it in the
# configurations it manages (SKILLOP_WEBHOOK_MANAGED=true); the chart's are the
# same (docs/webhook.md, Failure policies). Skills and Actors are admitted
# (Ignore, the chart's default): they are checked again and reported in status.
# Pods and approval decisions are refused (Fail), and those two webhooks are
# persistent: kopf empties a managed configuration when it stops, except for
# persistent webhooks, and an emptied injector would admit labelled pods without
# the gateway, an emptied approvals hook would let decisions through unchecked.
class _Failure(TypedDict):
    ignore_failures: bool
    persistent: bool


FAIL_OPEN = _Failure(ignore_failures=True, persistent=False)
FAIL_CLOSED = _Failure(ignore_failures=False, persistent=True)


def _catalog(memo: Any) -> Catalog:
    store = getattr(memo, "store", None)
    catalog = getattr(store, "catalog", None)
    # Before the store exists (or without one) nothing is known: only the
    # object's own problems can be found, which is still most of them.
    return catalog if isinstance(catalog, Catalog) else Catalog()


def _check(kwargs: dict[str, Any]) -> None:
    body: kopf.Body = kwargs["body"]
    old: kopf.Body | None = kwargs.get("old")
    previous = dict(old) if old is not None and kwargs.get("operation") == "UPDATE" else None
    messages = review(dict(body), _catalog(kwargs.get("memo")), old=previous)
    metrics = getattr(kwargs.get("memo"), "metrics", None)
    if metrics is not None:
        metrics.admission(str(body.get("kind") or ""), allowed=not messages)
    if messages:
        raise kopf.AdmissionError("; ".join(messages), code=422)


# kopf passes every kwarg of its WebhookFn protocol; these read body, old,
# operation and memo.
async def validate_skill(**kwargs: Any) -> None:
    _check(kwargs)


async def validate_actor(**kwargs: Any) -> None:
    _check(kwargs)


def injected_pod(body: Any, catalog: Catalog, settings: SidecarSettings) -> dict[str, Any]:
    """The pod ``body`` becomes (unchanged when it names no Actor); raises ``Refused``."""
    pod = dict(body)
    actor = actor_of(pod)
    if actor is None:  # the objectSelector sends only labelled pods; kopf filters too
        return pod
    namespace = (pod.get("metadata") or {}).get("namespace")
    if not isinstance(namespace, str) or not namespace:
        raise Refused("metadata.namespace: the request names no namespace")
    return inject(pod, target_of(Resolver(catalog), namespace, actor), namespace=namespace,
                  settings=settings)


def _replace_with(pod: dict[str, Any]) -> Any:
    """A kopf patch function making the body ``pod``: kopf diffs the two into the
    JSON patch the API server applies, so the stored pod is ``pod`` exactly."""
    def replace(body: MutableMapping[str, Any]) -> None:
        body.clear()
        body.update(pod)

    return replace


async def inject_pod(**kwargs: Any) -> None:
    memo = kwargs.get("memo")
    config = getattr(memo, "config", None)
    settings = config.sidecar if isinstance(config, OperatorConfig) else SidecarSettings()
    metrics = getattr(memo, "metrics", None)
    try:
        pod = injected_pod(kwargs["body"], _catalog(memo), settings)
    except Refused as err:
        if metrics is not None:
            metrics.admission("Pod", allowed=False)
        raise kopf.AdmissionError(str(err), code=403) from None
    if metrics is not None:
        metrics.admission("Pod", allowed=True)
    warning = _unknown_actor(memo, kwargs["body"])
    if warning is not None:
        kwargs["warnings"].append(warning)  # kubectl prints it; the pod is admitted
    patch: kopf.Patch = kwargs["patch"]
    patch.fns.append(_replace_with(pod))


def check_pod_update(old: Any, new: Any, catalog: Catalog) -> None:
    """Raise ``Refused`` when a change of an actor pod (labelled before or after)
    would reach its gateway's credentials (``podguard.check_update``)."""
    before = dict(old) if isinstance(old, Mapping) else {}
    after = dict(new) if isinstance(new, Mapping) else {}
    actor = actor_of(before) or actor_of(after)
    if actor is None:
        return
    namespace = str((after.get("metadata") or before.get("metadata") or {}).get("namespace")
                    or "")
    target = target_of(Resolver(catalog), namespace, actor)
    check_update(before, after, {*target.withheld, *mounted_credentials(before).secrets})


async def validate_pod_update(**kwargs: Any) -> None:
    metrics = getattr(kwargs.get("memo"), "metrics", None)
    try:
        check_pod_update(kwargs.get("old"), kwargs.get("new"), _catalog(kwargs.get("memo")))
    except Refused as err:
        if metrics is not None:
            metrics.admission("Pod", allowed=False)
        raise kopf.AdmissionError(str(err), code=403) from None


def _unknown_actor(memo: Any, body: Any) -> str | None:
    """The admission warning for a pod whose label names no Actor (a typo, or an
    Actor not applied yet), once the operator has listed the cluster: before, every
    Actor would look unknown."""
    reconciler = getattr(memo, "reconciler", None)
    loaded = getattr(reconciler, "loaded", None)
    listed = loaded.is_set() if loaded is not None else getattr(memo, "store", None) is not None
    actor = actor_of(dict(body))
    namespace = (body.get("metadata") or {}).get("namespace")
    if not listed or actor is None or not isinstance(namespace, str):
        return None
    return unknown_actor(Resolver(_catalog(memo)), namespace, actor)


def register_approvals(registry: kopf.OperatorRegistry | None = None) -> None:
    """Add the ToolCallApproval handler (who asks, who decides) to ``registry``: on
    whenever the admission server runs, as approvals need it (docs/gateway.md)."""
    kopf.on.mutate(API_GROUP, API_VERSION, PLURAL, id=APPROVAL_WEBHOOK, operations=OPERATIONS,
                   subresource="*", registry=registry, **FAIL_CLOSED)(mutate_approval)


def register_injection(registry: kopf.OperatorRegistry | None = None, *,
                       pod_updates: bool = True) -> None:
    """Add the mutating handler for actor pods to ``registry`` (kopf's default if None)
    and, with ``pod_updates``, the validating one for their changes."""
    kopf.on.mutate("", "v1", "pods", id=POD_WEBHOOK, operations=["CREATE"],
                   labels={ACTOR_LABEL: kopf.PRESENT}, registry=registry,
                   **FAIL_CLOSED)(inject_pod)
    if pod_updates:
        register_pod_updates(registry)


def register_pod_updates(registry: kopf.OperatorRegistry | None = None) -> None:
    """The validating handler for changes of actor pods. No label filter: kopf would
    test the new object only, and a change that removes the label is one to check
    (the chart's objectSelector sends a change when the old or the new object is
    labelled). So it is not for kopf's managed configuration, whose objectSelector
    comes from that filter: without it every pod change in the cluster would wait
    on the operator."""
    kopf.on.validate("", "v1", "pods", id=POD_UPDATE_WEBHOOK, operations=["UPDATE"],
                     subresource="*", registry=registry, **FAIL_CLOSED)(validate_pod_update)


async def mutate_approval(**kwargs: Any) -> None:
    """Record who asks (create) or who decides (status), or refuse (403)."""
    body: kopf.Body = kwargs["body"]
    old: kopf.Body | None = kwargs.get("old")
    user = str((kwargs.get("userinfo") or {}).get("username") or "")
    try:
        if kwargs.get("subresource") == "status":
            changes = approvals.admit_decision(dict(body), dict(old) if old is not None else None,
                                     user=user, now=datetime.datetime.now(datetime.UTC))
        elif kwargs.get("operation") == "CREATE":
            changes = approvals.admit_request(dict(body), user=user,
                                    actor_uid=_actor_uid(kwargs.get("memo"), body))
        else:
            changes = {}
    except approvals.Refused as exc:
        raise kopf.AdmissionError(str(exc), code=403) from None
    patch: kopf.Patch = kwargs["patch"]
    for section, values in changes.items():
        patch.setdefault(section, {}).update(values)


def _actor_uid(memo: Any, body: kopf.Body) -> str | None:
    """The uid of the request's Actor, as the operator's catalog knows it."""
    namespace = str((body.get("metadata") or {}).get("namespace") or "")
    name = (body.get("spec") or {}).get("actor")
    found = _catalog(memo).actors.get(ObjectRef(namespace, str(name)))
    return found.meta.uid or None if found is not None else None


def register(registry: kopf.OperatorRegistry | None = None) -> None:
    """Add the validating handlers to ``registry`` (kopf's default one if None)."""
    kopf.on.validate(API_GROUP, API_VERSION, "skills", id=SKILL_WEBHOOK,
                     operations=OPERATIONS, registry=registry, **FAIL_OPEN)(validate_skill)
    kopf.on.validate(API_GROUP, API_VERSION, "actors", id=ACTOR_WEBHOOK,
                     operations=OPERATIONS, registry=registry, **FAIL_OPEN)(validate_actor)


def configure(settings: kopf.OperatorSettings, config: OperatorConfig) -> None:
    settings.admission.server = server(config)
    if config.webhook_managed:
        settings.admission.managed = API_GROUP


def server(config: OperatorConfig, *, addr: str = "0.0.0.0") -> kopf.WebhookServer:
    """kopf's HTTPS server: with the mounted certificate, else a self-signed one."""
    if config.webhook_cert and config.webhook_key:
        return kopf.WebhookServer(addr=addr, port=config.webhook_port, host=config.webhook_host,
                                  certfile=config.webhook_cert, pkeyfile=config.webhook_key,
                                  cafile=config.webhook_ca)
    return SelfSignedWebhookServer(addr=addr, port=config.webhook_port,
                                   host=config.webhook_host)


class SelfSignedWebhookServer(kopf.WebhookServer):
    """kopf's server, generating its self-signed certificate with ``cryptography``."""

    @staticmethod
    def build_certificate(hostnames: Collection[str],
                          password: str | None = None) -> tuple[bytes, bytes]:
        return self_signed_certificate(hostnames, password)


def self_signed_certificate(hostnames: Collection[str],
                            password: str | None = None) -> tuple[bytes, bytes]:
    """A self-signed CA-capable server certificate and its key (PEM), for ``hostnames``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    names: list[str] = []
    ips: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = []
    for host in dict.fromkeys(hostnames):
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            names.append(host)
        else:
            if not ip.is_unspecified:
                ips.append(ip)
    common_name = names[0] if names else str(ips[0]) if ips else "skillop-webhook"
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64])])
    now = datetime.datetime.now(datetime.UTC)
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
    sans += [x509.IPAddress(ip) for ip in ips]
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, key_encipherment=False, content_commitment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
            encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(key, hashes.SHA256())
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password
        else serialization.NoEncryption())
    pkey = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             encryption)
    return cert.public_bytes(serialization.Encoding.PEM), pkey
