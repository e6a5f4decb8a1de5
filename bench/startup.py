"""CLI start-up: what one `skillop` run costs before and while it does its work.

Runs a command (default `skillop validate -f examples/`) N times, each a fresh
process, and prints the median and the best wall and CPU time, with the input's
size; then the import cost of each layer (pydantic and PyYAML, the model, the
sources, the resolver, the offline commands), each in a fresh process, less the
cost of an empty interpreter; and what parsing the command line alone imports
(``skillop.cli.main``, which loads a command's modules when it runs).

Byte-code is cached (in a temporary PYTHONPYCACHEPREFIX, warmed by one unmeasured
run), as an installed package has it: a process that compiles every module
measures the compiler. On a shared machine the best of N says more about the
code than the median; both are printed.

    python bench/startup.py [--runs 21] [-- skillop tools team-a/developer -f examples]
    python bench/startup.py --before /tmp/old/operator --runs 15   # interleaved A/B

``--before SOURCE_ROOT`` compares with another tree's ``operator/`` instead: the
command's runs alternate between it and this one (ABAB), so a load that comes
and goes on a shared machine weighs on both alike.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKILLOP = str(Path(sys.executable).parent / "skillop")
#: Each layer's import, cumulative (each includes the ones above it) but the last.
LAYERS = (
    ("pydantic + yaml", "import pydantic, yaml"),
    ("skillop.model", "import skillop.model.manifest, skillop.model.specs"),
    ("+ sources", "import skillop.sources.mcp_tools, skillop.sources.builtins"),
    ("+ resolve", "import skillop.resolve.resolver"),
    ("+ offline commands (cli.offline)", "import skillop.cli.offline"),
    ("cli.main alone (the parser)", "import skillop.cli.main"),
)


def _run(argv: Sequence[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of ``argv`` in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(argv: Sequence[str], runs: int, env: dict[str, str]) -> tuple[list[float], list[float]]:
    _run(argv, env)  # warms the byte-code cache
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu = _run(argv, env)
        walls.append(wall)
        cpus.append(cpu)
    return walls, cpus


def _line(label: str, walls: list[float], cpus: list[float], *,
          less: tuple[float, float] = (0.0, 0.0)) -> str:
    ms = 1000
    wall, cpu = less
    return (f"{label:<28} wall median {(statistics.median(walls) - wall) * ms:6.0f} ms"
            f"  best {(min(walls) - wall) * ms:6.0f} ms   CPU median"
            f" {(statistics.median(cpus) - cpu) * ms:6.0f} ms")


def input_size(argv: Sequence[str]) -> str:
    paths = [Path(a) for a in argv if Path(a).exists()]
    files = [p for path in paths
             for p in ([path] if path.is_file() else sorted(path.rglob("*.yaml")))]
    docs = sum(f.read_text().count("\nkind:") + f.read_text().startswith("kind:")
               for f in files)
    return f"{len(files)} files, {docs} objects, {sum(f.stat().st_size for f in files)} bytes"


def interleaved(command: Sequence[str], runs: int, env: dict[str, str], before: Path) -> None:
    """The command's runs alternating between ``before``'s sources and these."""
    trees = {"before": {**env, "PYTHONPATH": str(before.resolve())},
             "after": {**env, "PYTHONPATH": str(ROOT / "operator")}}
    times: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in trees}
    for tree_env in trees.values():
        _run(command, tree_env)  # warms each tree's byte-code cache
    for _ in range(runs):
        for label, tree_env in trees.items():
            wall, cpu = _run(command, tree_env)
            times[label][0].append(wall)
            times[label][1].append(cpu)
    ms = 1000
    for label, (walls, cpus) in times.items():
        print(f"{label:<7} CPU median {statistics.median(cpus) * ms:4.0f} ms  best"
              f" {min(cpus) * ms:4.0f} ms   wall median {statistics.median(walls) * ms:4.0f} ms"
              f"  best {min(walls) * ms:4.0f} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--before", type=Path, metavar="SOURCE_ROOT",
                        help="another tree's operator/ to compare with, runs interleaved")
    parser.add_argument("command", nargs="*",
                        default=[SKILLOP, "validate", "-f", str(ROOT / "examples")])
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        command = [SKILLOP, *args.command[1:]] if args.command[0] == "skillop" else args.command
        print(f"command: {' '.join(command)}")
        print(f"input: {input_size(command)}; {args.runs} runs each, byte-code cached")
        if args.before is not None:
            interleaved(command, args.runs, env, args.before)
            return 0
        walls, cpus = measure(command, args.runs, env)
        print(_line("the command", walls, cpus))
        base_walls, base_cpus = measure([sys.executable, "-c", "pass"], args.runs, env)
        print(_line("empty interpreter", base_walls, base_cpus))
        base = (statistics.median(base_walls), statistics.median(base_cpus))
        print("import cost per layer (cumulative but the last, less the empty interpreter):")
        for label, code in LAYERS:
            walls, cpus = measure([sys.executable, "-c", code], args.runs, env)
            print(_line(f"  {label}", walls, cpus, less=base))
    return 0


if __name__ == "__main__":
    sys.exit(main())
