"""Helpers shared by the benchmarks (run as scripts: this folder is on sys.path)."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator


def wait_until(predicate: Callable[[], bool], timeout: float, what: str,
               interval: float = 0.25) -> float:
    """Poll until ``predicate()`` holds; return the seconds it took."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"not within {timeout}s: {what}")
        time.sleep(interval)
    return time.monotonic() - start


_STARTS: list[str] = []


@contextlib.contextmanager
def operator_process(kubeconfig: str) -> Iterator[subprocess.Popen[bytes]]:
    """``skillop operator`` in its own process against ``kubeconfig``, as in a
    cluster: nothing of the benchmark shares its GIL. Its settings come from this
    process's environment. Yields once its liveness endpoint answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    health = f"http://127.0.0.1:{port}/healthz"
    env = {**os.environ, "KUBECONFIG": os.path.abspath(kubeconfig), "SKILLOP_LIVENESS": health}
    log = open(os.environ.get("BENCH_OPERATOR_LOG", os.devnull), "ab")  # noqa: SIM115
    # BENCH_OPERATOR_PREFIX: e.g. "py-spy record -f raw -o /tmp/op-{n}.txt --" to profile
    # it ({n}: 1 for the first operator, 2 for the restarted one).
    _STARTS.append(kubeconfig)
    prefix = [part.replace("{n}", str(len(_STARTS))) for part in
              shlex.split(os.environ.get("BENCH_OPERATOR_PREFIX", ""))]
    proc = subprocess.Popen(
        [*prefix, sys.executable, "-c", "import sys; from skillop.cli.main import main; "
         "sys.exit(main(['operator']))"], env=env, stdout=log, stderr=log,
        start_new_session=True)

    def up() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"the operator exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(health, timeout=1):
                return True
        except OSError:
            return False

    try:
        wait_until(up, 60, "the operator's liveness endpoint", interval=0.1)
        yield proc
    finally:
        # SIGINT to its process group: kopf stops cleanly, and a profiler given as
        # BENCH_OPERATOR_PREFIX writes its report.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
