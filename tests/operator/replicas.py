"""``skillop operator`` replicas as child processes, against the emulated API.

Each replica is the real command (the one the container runs) with its own
environment: a Lease identity (``SKILLOP_LEASE_IDENTITY``, which is also in its
User-Agent, so the emulator's write log says which process wrote what), a
health port serving ``/metrics``, and the kubeconfig of an emulator served by
the test process. The operator processes share nothing but the API.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from kube_emulator import EmulatorHandle, wait_for

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


class Replica:
    def __init__(self, handle: EmulatorHandle, identity: str, log_dir: Path,
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
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        return self.process.returncode

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def writes(self, since: int = 0) -> list[Any]:
        """Every write request this process made (events and Leases included)."""
        return self.handle.emulator.filter_writes(since=since, include_events=True,
                                                  include_leases=True,
                                                  user_agent=f"({self.identity})")


def lease(handle: EmulatorHandle) -> dict[str, Any]:
    return handle.emulator.get_object("coordination.k8s.io/v1/leases", *LEASE) or {}


def holder(handle: EmulatorHandle) -> str | None:
    return (lease(handle).get("spec") or {}).get("holderIdentity")


def wait_holder(handle: EmulatorHandle, identity: str, *, timeout: float) -> float:
    """Wait until ``identity`` holds the Lease; return when (time.monotonic)."""
    wait_for(lambda: holder(handle) == identity, timeout=timeout, interval=0.01,
             message=f"{identity} holds the Lease")
    return time.monotonic()
