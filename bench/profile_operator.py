"""Run ``skillop operator`` under cProfile, with each thread's CPU, for one phase.

For ``BENCH_OPERATOR_PREFIX`` (``bench/benchkit.operator_process``), where no
sampling profiler is installed (py-spy is not)::

    BENCH_OPERATOR_PREFIX="python bench/profile_operator.py --out /tmp/op-{n} --" \\
    BENCH_PHASE_SIGNAL=1 python bench/cascade.py --kubeconfig ...

What follows ``--`` (the command the benchmark would run) is read for nothing
but its presence: the operator is started here, in this process. Recording is
on from SIGUSR2 to the next SIGUSR2 (``bench/cascade.py`` sends them at the
cascade's PATCH and at its last new hash when ``BENCH_PHASE_SIGNAL`` is set;
without them, from start to exit). At exit it writes:

* ``OUT.txt``: each thread's CPU over the recording, from ``/proc/self/task``
  (exact, without the profiler's own cost: it runs in the event loop's
  thread only), grouped by role (the event loop, the writers, the Events',
  kopf's), then the event loop's profile, by own time and by cumulative time;
* ``OUT.prof``: that profile, for ``pstats``.

``--cpu-only``: the threads' CPU without cProfile (its cost is not in them).

cProfile's cost per call inflates Python-heavy code against C (json, hashlib,
ssl): its times are shares, not the operator's CPU without it.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path


class Recorder:
    def __init__(self, *, profile: bool = True) -> None:
        self.profile = cProfile.Profile()
        self.profiling = profile
        self.recording = False
        self.seconds = 0.0
        self.cpu_used: Counter[str] = Counter()
        self._since = 0.0
        self._cpu_at: dict[int, float] = {}

    def toggle(self, *_: object) -> None:
        if self.recording:
            self.stop()
            return
        self._cpu_at = thread_cpu()
        self._since = time.monotonic()
        self.recording = True
        if self.profiling:
            self.profile.enable()

    def stop(self) -> None:
        if not self.recording:
            return
        self.profile.disable()
        self.recording = False
        self.seconds += time.monotonic() - self._since
        names = {t.native_id: t.name for t in threading.enumerate()}
        for tid, cpu in thread_cpu().items():
            self.cpu_used[role(names.get(tid, "?"))] += cpu - self._cpu_at.get(tid, 0.0)

    def report(self) -> str:
        lines = [f"recorded {self.seconds:.1f}s",
                 f"CPU of the process's threads: {sum(self.cpu_used.values()):.2f}s"]
        lines += [f"  {name}: {cpu:.2f}s" for name, cpu in self.cpu_used.most_common()]
        for order in ("tottime", "cumulative") if self.profiling else ():
            out = io.StringIO()
            pstats.Stats(self.profile, stream=out).sort_stats(order).print_stats(60)
            lines.append(out.getvalue())
        return "\n".join(lines)


def role(name: str) -> str:
    """Threads by role: ThreadPoolExecutor names them ``prefix_N``."""
    head, _, tail = name.rpartition("_")
    return head if tail.isdigit() else name


def thread_cpu() -> dict[int, float]:
    """Each thread's CPU seconds so far, by native thread id."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / tick
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True, help="OUT.txt and OUT.prof are written")
    parser.add_argument("--cpu-only", action="store_true",
                        help="each thread's CPU only, without cProfile (and its cost)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    recorder = Recorder(profile=not args.cpu_only)
    signal.signal(signal.SIGUSR2, recorder.toggle)
    if not os.environ.get("BENCH_PHASE_SIGNAL"):
        recorder.toggle()
    from skillop.cli.main import main as skillop

    try:
        return skillop(["operator"])
    finally:
        recorder.stop()
        recorder.profile.dump_stats(f"{args.out}.prof")
        Path(f"{args.out}.txt").write_text(recorder.report() + "\n")


if __name__ == "__main__":
    sys.exit(main())
