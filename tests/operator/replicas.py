"""``skillop operator`` replicas as child processes, against an emulated API in its own.

``EmulatorProcess`` serves ``tests/kube_emulator.py`` in a child process
(``--kubeconfig``, ``--write-log``), as a real API server would be: the test
talks to it with the kubernetes client and reads its write log from the file.
Each replica is the real command (the one the container runs) with its own
environment: a Lease identity (``SKILLOP_LEASE_IDENTITY``, which is also in its
User-Agent, so the write log says which process wrote what) and a health port
serving ``/metrics``. The processes share nothing but the API.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes

from kube_emulator import WriteRecord, read_write_log, select_writes, wait_for

ROOT = Path(__file__).resolve().parents[2]
LEASE = ("default", "skillop")  # SKILLOP_LEASE_NAMESPACE / SKILLOP_LEASE_NAME
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def skillop_command() -> list[str]:
    here = Path(sys.executable).parent / "skillop"
    command = [str(here)] if here.exists() else [sys.executable, "-m", "skillop.cli.main"]
    return [*command, "operator"]


class EmulatorProcess:
    """The emulated API in a child process; duck-types what ``conftest.Cluster`` uses
    of an ``EmulatorHandle`` (``custom``, ``core``, ``emulator.filter_writes``...)."""

    def __init__(self, folder: Path) -> None:
        self.kubeconfig = folder / "kubeconfig.yaml"
        self.write_log = folder / "writes.jsonl"
        self._output = (folder / "emulator.log").open("wb")
        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "kube_emulator.py"), "--crds",
             str(ROOT / "crds"), "--kubeconfig", str(self.kubeconfig),
             "--write-log", str(self.write_log)],
            stdout=self._output, stderr=subprocess.STDOUT, cwd=ROOT)
        wait_for(lambda: self.kubeconfig.exists() and self.write_log.exists(), timeout=30,
                 interval=0.05, message="the emulator serves")
        self.api_client = kubernetes.config.new_client_from_config(
            config_file=str(self.kubeconfig))
        self.custom = kubernetes.client.CustomObjectsApi(self.api_client)
        self.core = kubernetes.client.CoreV1Api(self.api_client)
        self.coordination = kubernetes.client.CoordinationV1Api(self.api_client)
        self.emulator = self

    def close(self) -> None:
        self.api_client.close()
        _end(self.process, signal.SIGINT, grace=10)
        self._output.close()

    # -- the write log, as the in-process emulator offers it -------------------------
    @property
    def writes(self) -> list[WriteRecord]:
        return read_write_log(self.write_log)

    def write_mark(self) -> int:
        return len(self.writes)

    def filter_writes(self, resource: str | None = None, *, since: int = 0,
                      **criteria: Any) -> list[WriteRecord]:
        return select_writes(self.writes[since:], resource, **criteria)

    def list_objects(self, plural: str) -> list[Any]:
        listed = self.custom.list_cluster_custom_object("skillop.dev", "v1alpha1", plural)
        return list(listed["items"])


class Replica:
    def __init__(self, handle: EmulatorProcess, identity: str, log_dir: Path,
                 **env: str) -> None:
        self.handle = handle
        self.identity = identity
        self.port = free_port()
        self.log_path = log_dir / f"{identity}.log"
        self.env = {
            **os.environ,
            "KUBECONFIG": str(handle.kubeconfig),
            "SKILLOP_LEASE_IDENTITY": identity,
            "SKILLOP_LEASE_NAMESPACE": LEASE[0],
            "SKILLOP_LEASE_NAME": LEASE[1],
            "SKILLOP_LIVENESS": f"http://127.0.0.1:{self.port}/healthz",
            "SKILLOP_MCP_DISCOVERY": "false",
            "SKILLOP_DEBOUNCE_SECONDS": "0.02",
            **env,
        }
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Replica:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(skillop_command(), env=self.env, stdout=log,
                                            stderr=subprocess.STDOUT, cwd=ROOT)
        wait_for(lambda: self.scrape().get("skillop_leader") is not None, timeout=30,
                 ignore=(OSError,), interval=0.1, message=f"{self.identity} serves /metrics")
        return self

    def metrics_text(self) -> str:
        url = f"http://127.0.0.1:{self.port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            return str(response.read().decode())

    def scrape(self) -> dict[str, float]:
        """Every sample of /metrics: ``name{labels}`` -> value."""
        samples: dict[str, float] = {}
        for line in self.metrics_text().splitlines():
            match = _SAMPLE.match(line)
            if match:
                samples[match[1] + (match[2] or "")] = float(match[3])
        return samples

    def admit(self, obj: dict[str, Any], *, operation: str = "CREATE",
              old: dict[str, Any] | None = None) -> tuple[bool, str]:
        """Ask this replica's webhook (SKILLOP_WEBHOOK=true) as the API server would:
        (allowed, message). Its certificate is self-signed: not verified here."""
        plural = {"Skill": "skills", "Actor": "actors"}[obj["kind"]]
        meta = obj["metadata"]
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": str(uuid.uuid4()), "operation": operation, "name": meta["name"],
            "namespace": meta["namespace"], "object": obj, "oldObject": old, "dryRun": False,
            "userInfo": {"username": "tester"},
            "kind": {"group": "skillop.dev", "version": "v1alpha1", "kind": obj["kind"]},
            "resource": {"group": "skillop.dev", "version": "v1alpha1", "resource": plural}}}
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        request = urllib.request.Request(
            f"https://127.0.0.1:{self.env['SKILLOP_WEBHOOK_PORT']}/validate-{plural}",
            data=json.dumps(review).encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            answer = json.loads(response.read())["response"]
        return bool(answer["allowed"]), str((answer.get("status") or {}).get("message", ""))

    def sigterm(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(10)

    def stop(self) -> int | None:
        if self.process is None:
            return None
        _end(self.process, signal.SIGTERM, grace=20)
        return self.process.returncode

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def writes(self, since: int = 0) -> list[Any]:
        """Every write request this process made (events and Leases included)."""
        return self.handle.emulator.filter_writes(since=since, include_events=True,
                                                  include_leases=True,
                                                  user_agent=f"({self.identity})")


def lease(handle: EmulatorProcess) -> dict[str, Any]:
    try:
        body = handle.coordination.read_namespaced_lease(LEASE[1], LEASE[0])
    except kubernetes.client.ApiException as err:
        if err.status == 404:
            return {}
        raise
    return dict(handle.api_client.sanitize_for_serialization(body))


def holder(handle: EmulatorProcess) -> str | None:
    return (lease(handle).get("spec") or {}).get("holderIdentity")


def wait_holder(handle: EmulatorProcess, identity: str, *, timeout: float) -> float:
    """Wait until ``identity`` holds the Lease; return when (time.monotonic)."""
    wait_for(lambda: holder(handle) == identity, timeout=timeout, interval=0.01,
             message=f"{identity} holds the Lease")
    return time.monotonic()


@contextlib.contextmanager
def emulator_process(folder: Path) -> Iterator[EmulatorProcess]:
    api = EmulatorProcess(folder)
    try:
        yield api
    finally:
        api.close()


def _end(process: subprocess.Popen[bytes], sig: signal.Signals, *, grace: float) -> None:
    """Ask ``process`` to stop with ``sig``; kill it after ``grace`` seconds."""
    if process.poll() is not None:
        return
    process.send_signal(sig)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)
