"""Benchmark: the resolve's CPU, two builds side by side (A/B), in alternating passes.

bench/resolve.py times one build; bench/resolve_count.py counts instructions. A
change that must stay "within 3% of before" in time needs the two builds timed
under the same conditions: this script starts one worker process per build
(``--a`` and ``--b``: checkouts with their own operator/), each generating and
loading bench/resolve.py's catalog once (``--skills``, ``--actors``, ``--seed``,
that build's generator), then asks them in turn for one pass each (every Actor
resolved by a fresh ``Resolver``: bench/resolve.py's ``resolve_all``), in the
order A B, B A, A B, ... so that a busy machine slows both alike. A worker times
its pass in CPU seconds of its own process (``time.process_time``). Printed: each
build's median pass, and the median of the per-round ratios B / A.

    .venv/bin/python bench/resolve_ab.py --a /path/to/base --b . \\
        [--skills 1000] [--actors 100] [--rounds 21]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

from resolve_count import BUILD_INPUT, catalog_arguments

#: A worker: the catalog built once, then one timed pass per line read.
WORKER = BUILD_INPUT + '''
import time
r.resolve_all(catalog)
print("ready", flush=True)
for _ in sys.stdin:
    start = time.process_time()
    outcomes = r.resolve_all(catalog)
    spent = time.process_time() - start
    assert not [p for o in outcomes for p in o.problems]
    print(f"{spent:.6f}", flush=True)
'''


class Worker:
    """One build's process, answering each request with its pass's CPU seconds."""

    def __init__(self, build: Path, args: argparse.Namespace) -> None:
        env = {**os.environ, "PYTHONPATH": str(build.resolve() / "operator")}
        self.build = build
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(build.resolve() / "bench"),
             str(args.skills), str(args.actors), str(args.seed)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        if self.line() != "ready":
            raise RuntimeError(f"{build}: the worker did not start")

    def line(self) -> str:
        assert self.proc.stdout is not None
        text = self.proc.stdout.readline()
        if not text:
            raise RuntimeError(f"{self.build}: the worker ended (code {self.proc.wait()})")
        return text.strip()

    def one_pass(self) -> float:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        return float(self.line())

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def rounds(a: Worker, b: Worker, count: int) -> list[tuple[float, float]]:
    """``count`` rounds, each one pass of each build, the order alternating."""
    pairs = []
    for i in range(count):
        if i % 2 == 0:
            first, second = a.one_pass(), b.one_pass()
            pairs.append((first, second))
        else:
            second, first = b.one_pass(), a.one_pass()
            pairs.append((first, second))
    return pairs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", type=Path, required=True)
    parser.add_argument("--b", type=Path, required=True)
    catalog_arguments(parser)
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args()
    print(f"resolve CPU a pass, {args.skills} Skills / {args.actors} Actors (seed {args.seed}),"
          f" {args.rounds} alternating rounds; load average {os.getloadavg()[0]:.2f}", flush=True)
    a, b = Worker(args.a, args), Worker(args.b, args)
    try:
        pairs = rounds(a, b, args.rounds)
    finally:
        a.close()
        b.close()
    median_a = statistics.median(p[0] for p in pairs)
    median_b = statistics.median(p[1] for p in pairs)
    ratio = statistics.median(p[1] / p[0] for p in pairs)
    print(f"  A {args.a}: median {median_a * 1000:.1f} ms a pass")
    print(f"  B {args.b}: median {median_b * 1000:.1f} ms a pass")
    print(f"  B / A: median of the rounds' ratios {ratio:.3f}"
          f" (of the medians {median_b / median_a:.3f});"
          f" load average at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
