"""The runtime authors' snippet in docs/toolset.md works on a real ToolSet."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from skillop.cli.load import load_paths
from skillop.model.names import ObjectRef
from skillop.model.toolset import TOOLS_KEY
from skillop.resolve.catalog import Catalog
from skillop.resolve.resolver import Resolver
from skillop.resolve.toolset import configmap_data

ROOT = Path(__file__).resolve().parents[2]


def test_snippet_loads_the_toolset_and_binds_every_tool(tmp_path: Path) -> None:
    resolver = Resolver(Catalog.of(load_paths([str(ROOT / "examples")]).objects))
    resolution = resolver.resolve_actor(ObjectRef("team-a", "developer"))
    assert resolution is not None
    data = configmap_data(resolution.text, resolution.tools)
    (tmp_path / "tools.json").write_text(data[TOOLS_KEY])
    text = (ROOT / "docs" / "toolset.md").read_text()
    snippet = re.search(r"```python\n(.*?)```", text, re.S)
    assert snippet is not None
    code = snippet.group(1).replace("/etc/skillop/tools.json", str(tmp_path / "tools.json"))
    scope: dict[str, Any] = {}
    exec(compile(code, "docs/toolset.md", "exec"), scope)
    names = [f["function"]["name"] for f in scope["functions"]]
    assert names == [t.binding_name for t in resolution.tools]
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", n) for n in names)
    assert set(scope["by_binding"]) == set(names)


def test_the_large_set_snippet_reads_a_packed_set_and_refuses_a_stale_part(
        tmp_path: Path) -> None:
    from benchload import bench_module
    from skillop.resolve.toolset import configmap_layout

    bench = bench_module("largesets")
    resolution = bench.resolve(bench.manifests(5000, distinct=True))
    layout = configmap_layout("big-tools", resolution.text, resolution.hash, resolution.tools)
    assert len(layout.configmaps) == 3
    for stored in layout.configmaps:
        for key, value in stored.data.items():
            (tmp_path / key).write_text(value)
        for key, data in stored.binary.items():
            (tmp_path / key).write_bytes(data)
    text = (ROOT / "docs" / "toolset.md").read_text()
    snippets = re.findall(r"```python\n(.*?)```", text, re.S)
    code = snippets[1].replace('"/etc/skillop"', repr(str(tmp_path)))
    scope: dict[str, Any] = {}
    exec(compile(code, "docs/toolset.md", "exec"), scope)
    assert scope["toolset"]["hash"] == resolution.hash
    assert len(scope["toolset"]["tools"]) == 5000
    (key,) = [k for k in layout.configmaps[1].binary][:1]
    for edit in (lambda: (tmp_path / key).write_bytes(b"an older part"),
                 lambda: (tmp_path / key).unlink()):
        edit()
        try:
            exec(compile(code, "docs/toolset.md", "exec"), {})
        except RuntimeError as err:
            assert "not updated yet" in str(err)
        else:
            raise AssertionError("a stale part was read")
