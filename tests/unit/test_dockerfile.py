"""The operator image's Dockerfile, checked statically (no Docker engine needed)."""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
BUILD_TOOLS = re.compile(r"\b(gcc|g\+\+|cc|clang|make|build-essential|python3?-dev|"
                         r"apt-get\s+install|apk\s+add|pip\s+wheel)\b")


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def get(self, keyword: str) -> list[str]:
        return [arg for kw, arg in self.instructions if kw == keyword]


def parse(text: str) -> tuple[dict[str, str], list[Stage]]:
    """(global ARGs, stages): joins continuation lines, drops comments."""
    logical: list[str] = []
    buffer = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not buffer and (not line or line.startswith("#")):
            continue
        if buffer and line.startswith("#"):
            continue  # comments inside a continued instruction
        if line.endswith("\\"):
            buffer += line[:-1] + " "
            continue
        logical.append(buffer + line)
        buffer = ""
    assert not buffer, "dangling line continuation"
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical:
        keyword, _, rest = line.partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if keyword == "FROM":
            parts = rest.split()
            base = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), parts[0])
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None
            stages.append(Stage(base, name))
        elif not stages:
            assert keyword == "ARG", f"only ARG may precede FROM, got {keyword}"
            key, _, value = rest.partition("=")
            args[key] = value
        else:
            stages[-1].instructions.append((keyword, rest))
    return args, stages


def env_of(stage: Stage) -> dict[str, str]:
    out: dict[str, str] = {}
    for arg in stage.get("ENV"):
        for pair in shlex.split(arg):
            key, _, value = pair.partition("=")
            out[key] = value
    return out


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse(DOCKERFILE.read_text())[1]


@pytest.fixture(scope="module")
def final(stages: list[Stage]) -> Stage:
    return stages[-1]


def test_multi_stage_on_python_311_slim(stages: list[Stage]) -> None:
    assert len(stages) >= 2
    assert all(s.base == "python:3.11-slim" for s in stages)
    builder = stages[0]
    assert builder.name == "builder"
    runs = " ".join(builder.get("RUN"))
    assert re.search(r"pip wheel .*--wheel-dir /wheels .*\.\[operator,tracing\]", runs), runs


def test_final_stage_has_no_build_tools(final: Stage) -> None:
    for run in final.get("RUN"):
        assert not BUILD_TOOLS.search(run), run
    (install,) = [r for r in final.get("RUN") if "pip install" in r]
    assert "--no-cache-dir" in install
    assert "--no-index" in install and "/wheels" in install  # only the builder's wheels
    # The gateway's traces too (the image is the injected gateway's; OTEL_* turn them on).
    assert "skillop[operator,tracing]" in install
    # Nothing is copied from the build context into the final image: only wheels.
    assert final.get("COPY") == [] and final.get("ADD") == []


def test_final_stage_runs_as_numeric_non_root(final: Stage) -> None:
    users = final.get("USER")
    assert users, "no USER in the final stage"
    user = users[-1]
    assert re.fullmatch(r"\d+:\d+", user), f"USER must be numeric uid:gid, got {user!r}"
    uid, gid = (int(x) for x in user.split(":"))
    assert uid != 0 and gid != 0
    assert user == "65532:65532"
    # USER comes after every RUN, so nothing runs as root after the switch either.
    keywords = [kw for kw, _ in final.instructions]
    assert keywords.index("USER") > max(i for i, kw in enumerate(keywords) if kw == "RUN")


def test_entrypoint_runs_the_operator(final: Stage) -> None:
    (entrypoint,) = final.get("ENTRYPOINT")
    assert json.loads(entrypoint) == ["skillop", "operator"]  # exec form, no shell
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["skillop"] == "skillop.cli.main:main"


def test_read_only_root_filesystem(final: Stage) -> None:
    env = env_of(final)
    assert env["HOME"] == "/tmp"
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env.get("TMPDIR", "/tmp") == "/tmp"
    for workdir in final.get("WORKDIR"):
        assert workdir == "/tmp" or workdir.startswith("/tmp/")
    assert final.get("VOLUME") == []


def test_liveness_matches_the_chart(final: Stage) -> None:
    env = env_of(final)
    assert env["SKILLOP_LIVENESS"] == "http://0.0.0.0:8080/healthz"
    assert final.get("EXPOSE") == ["8080"]
    deployment = (ROOT / "helm" / "skillop" / "templates" / "deployment.yaml").read_text()
    assert "path: /healthz" in deployment and "port: 8080" in deployment


def test_build_context_has_what_the_builder_copies(stages: list[Stage]) -> None:
    """Every COPY source exists and is not excluded by .dockerignore."""
    ignore = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
              if line.strip() and not line.startswith("#")]

    def ignored(path: str) -> bool:
        verdict = False
        for pattern in ignore:
            negate = pattern.startswith("!")
            pat = pattern.lstrip("!").rstrip("/")
            if fnmatch.fnmatch(path, pat) or fnmatch.fnmatch(path.split("/")[0], pat):
                verdict = not negate
        return verdict

    for stage in stages:
        for copy in stage.get("COPY"):
            if copy.startswith("--from"):
                continue
            *sources, _dest = copy.split()
            for source in sources:
                source = source.rstrip("/")
                assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
                assert not ignored(source), f"COPY {source}: excluded by .dockerignore"
    assert ignored("tests") and ignored(".venv") and ignored(".git")
