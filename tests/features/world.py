"""What the acceptance scenarios act on, built from the project's own test kits.

* ``Manifests``: the design's ``full-stack-dev`` hierarchy as ``examples/`` ships
  it, with the docker-tools MCP server pointed at a real SDK server on loopback;
* ``docker_server``: that server (``tests/mcp/mcp_servers.py``), serving one tool
  more than the manifest declares, so that live discovery shows;
* ``ClusterWorld``: one control plane for every cluster scenario (``realkit``,
  ``controlplane``), with one operator serving the chart's admission webhook.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import yaml
from mcp_servers import ServerHandle, make_tool

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
#: Where examples/30-skills.yaml says the docker MCP server lives (in a cluster).
DECLARED_DOCKER_URL = "http://docker-mcp.tools.svc:8080/mcp"
#: The examples the scenarios read; 10-policies.yaml is left out on purpose: its
#: ClusterSkillPolicy allows only in-cluster MCP servers, and ours is on loopback.
FILES = ("00-namespaces.yaml", "20-tools.yaml", "30-skills.yaml", "40-actors.yaml")
SKILLS = "30-skills.yaml"
#: Namespaces the cluster scenarios use; the webhook validates these only.
NAMESPACES = ("team-a", "platform", "bdd-cycles")


def docker_server() -> ServerHandle:
    """The docker MCP server: the tools examples/30-skills.yaml declares for it, as
    declared, and ``tag_image``, which only the live server lists."""
    (docker,) = [d for d in yaml.safe_load_all((EXAMPLES / SKILLS).read_text())
                 if d and d["metadata"]["name"] == "docker-tools"]
    declared = [types.Tool.model_validate({"inputSchema": {"type": "object"}, **tool})
                for tool in docker["spec"]["mcpServers"][0]["tools"]]
    live = make_tool("tag_image", description="Tag an image.",
                     annotations=types.ToolAnnotations(read_only_hint=True))
    return ServerHandle(tools=[*declared, live])


class Manifests:
    """A folder of the examples' manifests, the docker server at ``url``."""

    def __init__(self, folder: Path, url: str) -> None:
        self.folder = folder
        for name in FILES:
            text = (EXAMPLES / name).read_text()
            (folder / name).write_text(text.replace(DECLARED_DOCKER_URL, url))

    def docs(self) -> list[dict[str, Any]]:
        return [doc for name in FILES
                for doc in yaml.safe_load_all((self.folder / name).read_text()) if doc]

    def skill(self, ref: str) -> dict[str, Any]:
        """The Skill ``namespace/name`` as 30-skills.yaml has it."""
        ns, name = ref.split("/")
        (found,) = [d for d in self.docs() if d["kind"] == "Skill"
                    and d["metadata"] == {**d["metadata"], "name": name, "namespace": ns}]
        return found

    def replace_skill(self, doc: dict[str, Any]) -> None:
        """30-skills.yaml with ``doc`` in place of the Skill of its name."""
        path = self.folder / SKILLS
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        docs = [doc if d["metadata"]["name"] == doc["metadata"]["name"]
                and d["metadata"]["namespace"] == doc["metadata"]["namespace"] else d
                for d in docs]
        path.write_text(yaml.safe_dump_all(docs, sort_keys=False))

    def include(self, ref: str, included: str) -> dict[str, Any]:
        """The Skill ``ref`` also including ``included``, written; the new Skill."""
        doc = self.skill(ref)
        doc["spec"].setdefault("includes", []).append({"skill": included})
        self.replace_skill(doc)
        return doc


def tool_names(toolset: dict[str, Any]) -> set[str]:
    return {tool["name"] for tool in toolset.get("tools", [])}


def tool_named(toolset: dict[str, Any], name: str) -> dict[str, Any]:
    found = [tool for tool in toolset.get("tools", []) if tool["name"] == name]
    assert len(found) == 1, (f"{name}: {len(found)} tools of that name in "
                             f"{sorted(tool_names(toolset))}")
    return found[0]


class ClusterWorld:
    """The real API tier, started on first use and stopped with ``stack``."""

    def __init__(self, stack: contextlib.ExitStack) -> None:
        self.stack = stack
        self.real: Any = None
        self.unavailable: str | None = None

    def start(self) -> str | None:
        """Start once; the reason the tier is unavailable, else None."""
        if self.real is not None or self.unavailable is not None:
            return self.unavailable
        from controlplane import Unavailable, find_binaries, install_crds, start_control_plane
        from realkit import RealCluster

        try:
            binaries = find_binaries()
        except Unavailable as err:
            self.unavailable = f"real-API tier: {err}"
            return self.unavailable
        plane = self.stack.enter_context(start_control_plane(binaries))
        install_crds(plane, ROOT / "crds")
        self.real = RealCluster(plane)
        self.stack.enter_context(self._operator())
        return None

    @contextlib.contextmanager
    def _operator(self) -> Iterator[None]:
        from realkit import webhook_operator
        from skillkit import actor

        for ns in NAMESPACES:
            self.real.namespace(ns)
        folder = Path(self.stack.enter_context(tempfile.TemporaryDirectory()))
        with webhook_operator(self.real, folder, kind="ValidatingWebhookConfiguration",
                              webhook="webhook", name="bdd-operator",
                              values={"webhook": {"enabled": True},
                                      "namespaces": list(NAMESPACES)},
                              env={"SKILLOP_WEBHOOK": "true"}):
            from clusterkit import wait_for

            # The API server picks the configuration up within a moment; a dry run
            # of an Actor only the webhook refuses says when.
            probe = json.dumps(actor("probe", NAMESPACES[-1], skills=["x"],
                                     skillAccessPolicy={"allow": ["x/[x"]}))
            wait_for(lambda: "denied the request" in self.real.kubectl(
                "apply", "--dry-run=server", "-f", "-", stdin=probe).stderr,
                timeout=30, interval=0.2, message="webhook called by the API server")
            yield

    def apply(self, text: str) -> Any:
        """``kubectl apply`` of ``text``, as the person writing Skills runs it."""
        return self.real.kubectl("apply", "-f", "-", stdin=text)

    def apply_manifests(self, manifests: Manifests) -> None:
        files = [arg for name in FILES for arg in ("-f", str(manifests.folder / name))]
        done = self.real.kubectl("apply", *files)  # in this order: namespaces first
        assert done.returncode == 0, done.stderr

    def toolset(self, ns: str, actor: str) -> dict[str, Any]:
        """The Actor's ToolSet as its ConfigMap holds it ({} before it exists)."""
        from skillop.model.toolset import TOOLS_KEY, default_configmap_name

        spec = self.real.get("Actor", ns, actor).get("spec") or {}
        name = spec.get("configMapName") or default_configmap_name(actor)
        cm = self.real.configmap(ns, name)
        if cm is None or not cm.data or TOOLS_KEY not in cm.data:
            return {}
        loaded: dict[str, Any] = json.loads(cm.data[TOOLS_KEY])
        return loaded


def rows(table: Any) -> list[dict[str, str]]:
    """A step's table as one dict per row, keyed by its headings."""
    return [dict(zip(row.headings, row.cells, strict=True)) for row in table]


def names_in(text: str) -> list[str]:
    """The quoted names of a step's text: ``"a", "b" or "c"``."""
    import re

    return re.findall(r'"([^"]+)"', text)


def _short_path(tool: dict[str, Any]) -> str:
    return " > ".join(ref.rpartition("/")[2] for ref in tool.get("path", []))


def mismatches(toolset: dict[str, Any], rows: list[dict[str, str]]) -> list[str]:
    """What differs between ``toolset`` and the expected ``rows`` (tool, source,
    reached through): an empty list when every row is there as written."""
    problems = []
    for row in rows:
        found = [t for t in toolset.get("tools", []) if t["name"] == row["tool"]]
        if len(found) != 1:
            problems.append(f"{row['tool']}: {len(found)} tools of that name")
            continue
        got = {"source": found[0]["source"], "reached through": _short_path(found[0])}
        for column in ("source", "reached through"):
            if got[column] != row[column]:
                problems.append(f"{row['tool']}: {column} is {got[column]!r}, "
                                f"not {row[column]!r}")
    return problems


def present(toolset: dict[str, Any], names: list[str]) -> list[str]:
    """The ``names`` the toolset has (that it should not)."""
    return sorted(set(names) & tool_names(toolset))


def eventually(problems: Any, *, timeout: float = 30.0) -> None:
    """Until ``problems()`` returns nothing; fails with the last ones it returned."""
    import time

    deadline = time.monotonic() + timeout
    while (last := problems()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not last, f"after {timeout}s: {last}"
