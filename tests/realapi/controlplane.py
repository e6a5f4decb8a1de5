"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager.

The emulated API (``tests/kube_emulator.py``) is fast and runs everywhere, but it
does not prune unknown status fields, validate CRD schemas or CEL rules, call
admission webhooks, enforce RBAC or garbage-collect by ownerReferences. This
module starts the real thing, the way controller-runtime's envtest does: the
binaries come from ``KUBEBUILDER_ASSETS`` (``etcd`` may also be on ``PATH``),
every certificate is generated here with ``cryptography``, every process listens
on a free 127.0.0.1 port, and everything lives in one temporary directory that is
removed, with every process stopped, when the context exits (also on failure;
the children also die with the process that started them).

The API server writes an audit log (``ControlPlane.audit``): every request with
its user, and the request and response bodies of status writes, so a test can
count writes and see what the server kept of each status.

Run as a script to keep one up by hand, or around one command (a benchmark)::

    python tests/realapi/controlplane.py --kubeconfig /tmp/realapi.kubeconfig --crds crds
    python tests/realapi/controlplane.py --kubeconfig /tmp/k --crds crds -- \
        python bench/cascade.py --kubeconfig /tmp/k
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import ctypes
import dataclasses
import datetime
import ipaddress
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

#: The envtest variable: a folder holding kube-apiserver, kube-controller-manager (and etcd).
ASSETS_VAR = "KUBEBUILDER_ASSETS"
OPERATOR_USER = "skillop-operator"
START_TIMEOUT = 90.0

#: Metadata for every request; request and response bodies for the status writes
#: of skillop's kinds (what was sent and what the server kept of it).
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1", "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "RequestResponse", "verbs": ["patch", "update"],
         "resources": [{"group": "skillop.dev",
                        "resources": ["skills/status", "actors/status"]}]},
        {"level": "None", "nonResourceURLs": ["/readyz*", "/livez*", "/healthz*"]},
        {"level": "Metadata"},
    ],
}
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


class Unavailable(Exception):
    """The binaries are not at hand; the message says which and where they were looked for."""


@dataclasses.dataclass(frozen=True)
class Binaries:
    etcd: Path
    apiserver: Path
    controller_manager: Path


def find_binaries(environ: dict[str, str] | None = None) -> Binaries:
    """The binaries, as envtest finds them: ``$KUBEBUILDER_ASSETS``, etcd also on ``PATH``."""
    env = os.environ if environ is None else environ
    assets = env.get(ASSETS_VAR, "")
    if not assets:
        raise Unavailable(f"{ASSETS_VAR} is not set (a folder with kube-apiserver and "
                          "kube-controller-manager; .ci/run sets it from ../shared/k8s)")
    folder = Path(assets)
    found: dict[str, Path] = {}
    for name in ("kube-apiserver", "kube-controller-manager"):
        path = folder / name
        if not os.access(path, os.X_OK):
            raise Unavailable(f"{ASSETS_VAR}={assets} has no executable {name}")
        found[name] = path
    etcd = folder / "etcd"
    if not os.access(etcd, os.X_OK):
        on_path = shutil.which("etcd", path=env.get("PATH"))
        if on_path is None:
            raise Unavailable(f"no etcd in {ASSETS_VAR}={assets} nor on PATH "
                              "(apt-get install etcd-server)")
        etcd = Path(on_path)
    return Binaries(etcd, found["kube-apiserver"], found["kube-controller-manager"])


# -- certificates ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class KeyPair:
    cert: bytes
    key: bytes


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _key() -> Any:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return bytes(key.private_bytes(serialization.Encoding.PEM,
                                   serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()))


def _builder(subject: Any, issuer: Any, public_key: Any) -> Any:
    from cryptography import x509

    now = _now()
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
            .public_key(public_key).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2)))


def _name(common_name: str, organization: str | None = None) -> Any:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


class Authority:
    """A CA that signs the serving certificate and the client certificates."""

    def __init__(self, common_name: str = "skillop-test-ca") -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization

        self._key = _key()
        self._name = _name(common_name)
        cert = (_builder(self._name, self._name, self._key.public_key())
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .sign(self._key, hashes.SHA256()))
        self.cert = cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, common_name: str, *, organization: str | None = None,
              server: bool = False) -> KeyPair:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.x509.oid import ExtendedKeyUsageOID

        key = _key()
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (_builder(_name(common_name, organization), self._name, key.public_key())
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None),
                                  critical=True)
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName([
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost"),
                x509.DNSName("kubernetes.default.svc")]), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _pem_key(key))


# -- kubeconfigs -------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def kubeconfig(url: str, ca: bytes, *, user: dict[str, str], name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": "realapi", "cluster": {
            "server": url, "certificate-authority-data": _b64(ca)}}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": "realapi", "user": name}}],
    }


def cert_user(pair: KeyPair) -> dict[str, str]:
    return {"client-certificate-data": _b64(pair.cert), "client-key-data": _b64(pair.key)}


# -- processes ---------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """In the child: get SIGKILL when the process that started it dies (Linux)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclasses.dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 15) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])

    def stop(self, timeout: float = 10.0) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout)


def spawn(name: str, argv: Sequence[str | Path], workdir: Path, *,
          env: dict[str, str] | None = None) -> Process:
    log = workdir / f"{name}.log"
    with log.open("ab") as out:  # a restarted process appends to its log
        popen = subprocess.Popen(
            [str(a) for a in argv], stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, cwd=workdir, env=env, start_new_session=True,
            preexec_fn=_die_with_parent)
    return Process(name, popen, log)


# -- the control plane -------------------------------------------------------------------


@dataclasses.dataclass
class ControlPlane:
    """A running control plane; see ``start_control_plane``."""

    workdir: Path
    url: str
    ca: bytes
    admin_kubeconfig: Path
    operator_kubeconfig: Path
    audit_log: Path
    processes: list[Process]
    #: The readiness probe's TLS context (admin client certificate).
    probe: ssl.SSLContext | None = None

    def kubeconfig_for_token(self, token: str, name: str) -> Path:
        """A kubeconfig that authenticates with a bearer token (e.g. a ServiceAccount's)."""
        path = self.workdir / f"{name}.kubeconfig"
        path.write_text(yaml.safe_dump(kubeconfig(self.url, self.ca, user={"token": token},
                                                  name=name)))
        return path

    def audit(self) -> list[dict[str, Any]]:
        """Every audit event so far (stage ResponseComplete), oldest first."""
        events = []
        with self.audit_log.open() as lines:
            for line in lines:
                with contextlib.suppress(json.JSONDecodeError):  # a line being written
                    events.append(json.loads(line))
        return events

    def writes(self, *, user: str = OPERATOR_USER, since: str = "",
               leases: bool = False) -> list[dict[str, Any]]:
        """Write requests by ``user`` whose audit ``stageTimestamp`` is after ``since``.

        Leader election's Lease renewals (one a second) are left out unless
        ``leases``: they are coordination, not writes of the objects skillop manages
        (as the emulator's ``filter_writes`` does).
        """
        return [e for e in self.audit()
                if e.get("verb") in WRITE_VERBS and e.get("user", {}).get("username") == user
                and e.get("stageTimestamp", "") > since
                and (leases or (e.get("objectRef") or {}).get("resource") != "leases")]

    def restart_apiserver(self, *, down: float = 0.0, timeout: float = START_TIMEOUT) -> None:
        """Stop kube-apiserver (SIGTERM), wait ``down`` seconds, start it again with the
        same arguments and wait until it is ready: a watch gap for every client.
        etcd keeps the data; clients reconnect as they do after an upgrade."""
        index, old = next((i, p) for i, p in enumerate(self.processes)
                          if p.name == "kube-apiserver")
        old.stop()
        time.sleep(down)
        new = spawn(old.name, list(old.popen.args), self.workdir)  # type: ignore[arg-type]
        self.processes[index] = new
        context = self.probe
        assert context is not None
        _wait("kube-apiserver ready again", lambda: _ready(self.url, context), [new], timeout)

    def check_alive(self) -> None:
        for proc in self.processes:
            if proc.popen.poll() is not None:
                raise RuntimeError(f"{proc.name} exited with {proc.popen.returncode}:\n"
                                   f"{proc.tail()}")


def _write_files(workdir: Path, files: dict[str, bytes | str]) -> dict[str, Path]:
    paths = {}
    for name, content in files.items():
        path = workdir / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        path.chmod(0o600)
        paths[name] = path
    return paths


def _ready(url: str, context: ssl.SSLContext) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/readyz", context=context, timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def _wait(what: str, predicate: Any, procs: Sequence[Process], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        for proc in procs:
            if proc.popen.poll() is not None:
                raise RuntimeError(f"{proc.name} exited with {proc.popen.returncode} "
                                   f"before {what}:\n{proc.tail()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:.0f}s:\n"
                               + "\n".join(f"--- {p.name}\n{p.tail()}" for p in procs))
        time.sleep(0.2)


def _etcd_ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
            return b'"true"' in resp.read()
    except OSError:
        return False


def _etcd(bins: Binaries, workdir: Path) -> tuple[Process, int]:
    client, peer = free_port(), free_port()
    proc = spawn("etcd", [
        bins.etcd, "--name", "default", "--data-dir", workdir / "etcd",
        "--listen-client-urls", f"http://127.0.0.1:{client}",
        "--advertise-client-urls", f"http://127.0.0.1:{client}",
        "--listen-peer-urls", f"http://127.0.0.1:{peer}",
        "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
        "--initial-cluster", f"default=http://127.0.0.1:{peer}",
        "--quota-backend-bytes", str(2 * 1024**3), "--log-level", "warn",
    ], workdir)
    return proc, client


def _apiserver(bins: Binaries, workdir: Path, etcd_port: int, files: dict[str, Path],
               port: int) -> Process:
    return spawn("kube-apiserver", [
        bins.apiserver, "--bind-address=127.0.0.1", f"--secure-port={port}",
        f"--etcd-servers=http://127.0.0.1:{etcd_port}",
        f"--tls-cert-file={files['apiserver.crt']}",
        f"--tls-private-key-file={files['apiserver.key']}",
        f"--client-ca-file={files['ca.crt']}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={files['sa.pub']}",
        f"--service-account-signing-key-file={files['sa.key']}",
        "--service-cluster-ip-range=10.0.0.0/24", "--authorization-mode=RBAC",
        "--endpoint-reconciler-type=none", "--allow-privileged=false",
        f"--audit-policy-file={files['audit-policy.yaml']}",
        f"--audit-log-path={workdir / 'audit.log'}", "--audit-log-maxsize=0",
        f"--cert-dir={workdir / 'apiserver-certs'}", "-v=1",
    ], workdir)


def _controller_manager(bins: Binaries, workdir: Path, files: dict[str, Path]) -> Process:
    # The garbage collector (ownerReferences), namespace deletion, the
    # ServiceAccount machinery (tokens for RBAC tests), and ClusterRole aggregation
    # (the chart's roles join the built-in admin, edit and view).
    return spawn("kube-controller-manager", [
        bins.controller_manager, f"--kubeconfig={files['controller-manager.kubeconfig']}",
        "--controllers=garbagecollector,namespace,serviceaccount,serviceaccount-token,"
        "deployment,replicaset,clusterrole-aggregation",
        "--leader-elect=false", "--use-service-account-credentials=true",
        f"--service-account-private-key-file={files['sa.key']}",
        f"--root-ca-file={files['ca.crt']}", "--bind-address=127.0.0.1",
        f"--secure-port={free_port()}", "--authentication-skip-lookup=true",
        f"--cert-dir={workdir / 'controller-manager-certs'}", "-v=1",
    ], workdir)


def _files(ca: Authority, url: str) -> dict[str, bytes | str]:
    from cryptography.hazmat.primitives import serialization

    serving = ca.issue("kube-apiserver", server=True)
    sa_key = _key()
    sa_pub = sa_key.public_key().public_bytes(serialization.Encoding.PEM,
                                              serialization.PublicFormat.SubjectPublicKeyInfo)
    users = {
        "admin": ca.issue("admin", organization="system:masters"),
        OPERATOR_USER: ca.issue(OPERATOR_USER, organization="system:masters"),
        "controller-manager": ca.issue("system:kube-controller-manager"),
    }
    files: dict[str, bytes | str] = {
        "ca.crt": ca.cert, "apiserver.crt": serving.cert, "apiserver.key": serving.key,
        "sa.key": _pem_key(sa_key), "sa.pub": sa_pub,
        "audit-policy.yaml": yaml.safe_dump(AUDIT_POLICY),
    }
    # For the readiness probe (``ssl`` wants certificate and key in one file).
    files["admin-client.pem"] = users["admin"].cert + users["admin"].key
    for name, pair in users.items():
        files[f"{name}.kubeconfig"] = yaml.safe_dump(
            kubeconfig(url, ca.cert, user=cert_user(pair), name=name))
    return files


@contextlib.contextmanager
def start_control_plane(binaries: Binaries | None = None, *,
                        timeout: float = START_TIMEOUT) -> Iterator[ControlPlane]:
    """etcd, kube-apiserver and kube-controller-manager, up until the context exits."""
    bins = binaries or find_binaries()
    workdir = Path(tempfile.mkdtemp(prefix="skillop-realapi-"))
    procs: list[Process] = []
    try:
        ca = Authority()
        port = free_port()
        url = f"https://127.0.0.1:{port}"
        files = _write_files(workdir, _files(ca, url))
        etcd, etcd_port = _etcd(bins, workdir)
        procs.append(etcd)
        _wait("etcd healthy", lambda: _etcd_ready(etcd_port), procs, timeout)
        procs.append(_apiserver(bins, workdir, etcd_port, files, port))
        context = ssl.create_default_context(cadata=ca.cert.decode())
        context.load_cert_chain(files["admin-client.pem"])
        _wait("kube-apiserver ready", lambda: _ready(url, context), procs, timeout)
        procs.append(_controller_manager(bins, workdir, files))
        yield ControlPlane(workdir, url, ca.cert, files["admin.kubeconfig"],
                           files[f"{OPERATOR_USER}.kubeconfig"], workdir / "audit.log", procs,
                           probe=context)
    finally:
        for proc in reversed(procs):
            proc.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def install_crds(plane: ControlPlane, folder: Path, *, timeout: float = 30.0) -> list[str]:
    """Create every CRD in ``folder`` and wait until each is Established; their names."""
    from kubernetes import client, config

    api = client.ApiextensionsV1Api(
        config.new_client_from_config(config_file=str(plane.admin_kubeconfig)))
    names = []
    for path in sorted(folder.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                api.create_custom_resource_definition(doc)
                names.append(doc["metadata"]["name"])

    def established() -> bool:
        for name in names:
            crd = api.read_custom_resource_definition(name)
            if not any(c.type == "Established" and c.status == "True"
                       for c in crd.status.conditions or []):
                return False
        return True

    _wait("CRDs Established", established, plane.processes, timeout)
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", required=True,
                        help="where to copy the admin kubeconfig")
    parser.add_argument("--crds", type=Path, help="install the CRDs of this folder")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="-- COMMAND...: run it, then stop (default: run until Ctrl-C)")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    try:
        bins = find_binaries()
    except Unavailable as err:
        print(f"controlplane: {err}", file=sys.stderr)
        return 2
    stop = False

    def on_signal(*_: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with start_control_plane(bins) as plane:
        shutil.copyfile(plane.admin_kubeconfig, args.kubeconfig)
        if args.crds:
            install_crds(plane, args.crds)
        if command:
            return _run_command(plane, command)
        print(f"control plane at {plane.url}; kubeconfig {args.kubeconfig}; "
              "Ctrl-C (SIGTERM) stops it", flush=True)
        while not stop:
            plane.check_alive()
            time.sleep(0.5)
    return 0


#: In the environment of the command run around: the pid to send SIGUSR1 to, to have
#: kube-apiserver restarted (a benchmark's watch gap, ``bench/cascade.py``).
RESTART_PID = "CONTROLPLANE_PID"


def _run_command(plane: ControlPlane, command: list[str]) -> int:
    """Run ``command``; restart kube-apiserver each time it sends SIGUSR1."""
    asked = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: asked.set())
    proc = subprocess.Popen(command, env={**os.environ, RESTART_PID: str(os.getpid())})
    while proc.poll() is None:
        if asked.wait(0.2):
            asked.clear()
            plane.restart_apiserver()
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
