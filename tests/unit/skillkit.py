"""Small builders for manifests in tests, and one-call resolution.

``skill("a", includes=[{"skill": "b"}])`` is the YAML a user would write, as a
dict; spec fields are given in their camelCase spelling. ``resolve_actor`` and
``resolve_skill`` go through the same parsing as the CLI, so a test cannot build
an object the real input could not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from skillop.cli.load import load_text
from skillop.model import problems as P
from skillop.model.manifest import parse_object
from skillop.model.names import GROUP_VERSION, ObjectRef
from skillop.model.problems import Problem
from skillop.resolve.catalog import Catalog
from skillop.resolve.resolver import Resolution, Resolver

Doc = dict[str, Any]
NS = "team-a"


def _meta(name: str, ns: str | None, labels: Mapping[str, str] | None) -> Doc:
    meta: Doc = {"name": name}
    if ns is not None:
        meta["namespace"] = ns
    if labels:
        meta["labels"] = dict(labels)
    return meta


def skill(name: str, /, ns: str | None = NS, *, labels: Mapping[str, str] | None = None,
          **spec: Any) -> Doc:
    return {"apiVersion": GROUP_VERSION, "kind": "Skill", "metadata": _meta(name, ns, labels),
            "spec": spec}


def actor(name: str, /, ns: str | None = NS, *, skills: Iterable[str] = (), **spec: Any) -> Doc:
    return {"apiVersion": GROUP_VERSION, "kind": "Actor", "metadata": _meta(name, ns, None),
            "spec": {"skills": list(skills), **spec}}


def tool(name: str, /, ns: str | None = NS, *, labels: Mapping[str, str] | None = None,
         **spec: Any) -> Doc:
    spec.setdefault("description", f"the {name} tool")
    return {"apiVersion": GROUP_VERSION, "kind": "Tool", "metadata": _meta(name, ns, labels),
            "spec": spec}


def cluster_policy(name: str, /, **spec: Any) -> Doc:
    """A ClusterSkillPolicy (cluster-scoped: no namespace)."""
    return {"apiVersion": GROUP_VERSION, "kind": "ClusterSkillPolicy",
            "metadata": {"name": name}, "spec": spec}


def skill_policy(name: str, /, ns: str = NS, **spec: Any) -> Doc:
    """A SkillPolicy of namespace ``ns``."""
    return {"apiVersion": GROUP_VERSION, "kind": "SkillPolicy",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}


def anon(name: str, /, **fields: Any) -> Doc:
    """An inline tool (anonymousTools[] or mcpServers[].tools[])."""
    fields.setdefault("description", f"inline {name}")
    return {"name": name, **fields}


def configmap(name: str, data: Mapping[str, str], ns: str = NS) -> Doc:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
            "data": dict(data)}


def namespace(name: str, **labels: str) -> Doc:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": labels}}


def skill_md(name: str, description: str = "does a thing", body: str = "# Body\n",
             **extra: Any) -> str:
    front = yaml.safe_dump({"name": name, "description": description, **extra},
                           sort_keys=False)
    return f"---\n{front}---\n{body}"


def parse_problems(doc: Any) -> list[Problem]:
    return list(parse_object(doc).problems)


def catalog(docs: Iterable[Any]) -> Catalog:
    """A catalog of valid manifests; a manifest that does not parse fails the test."""
    objects = []
    for doc in docs:
        result = parse_object(doc)
        assert not result.problems, [p.line() for p in result.problems]
        if result.obj is not None:
            objects.append(result.obj)
    return Catalog.of(objects)


def catalog_from_yaml(text: str) -> Catalog:
    loaded = load_text(text, origin="test.yaml")
    assert not loaded.problems, [p.line() for p in loaded.problems]
    return Catalog.of(loaded.objects)


def ref(text: str) -> ObjectRef:
    ns, name = text.split("/")
    return ObjectRef(ns, name)


def resolver(docs: Iterable[Any]) -> Resolver:
    return Resolver(catalog(docs))


def resolve_actor(docs: Iterable[Any], name: str) -> Resolution:
    resolution = resolver(docs).resolve_actor(ref(name))
    assert resolution is not None, f"actor {name} not found"
    return resolution


def resolve_skill(docs: Iterable[Any], name: str) -> Resolution:
    resolution = resolver(docs).resolve_skill(ref(name))
    assert resolution is not None, f"skill {name} not found"
    return resolution


def names(resolution: Resolution) -> list[str]:
    return [t.name for t in resolution.tools]


def by_name(resolution: Resolution) -> dict[str, Doc]:
    """The ToolSet document's tools, by effective name."""
    return {t["name"]: t for t in resolution.document["tools"]}


def reasons(problems: Iterable[Problem]) -> list[str]:
    return [p.reason for p in problems]


def problems_of(resolution: Resolution, reason: str) -> list[Problem]:
    return [p for p in resolution.problems if p.reason == reason]


def all_problems(docs: Iterable[Any]) -> list[Problem]:
    return resolver(docs).all_problems()


__all__ = [
    "NS",
    "P",
    "actor",
    "all_problems",
    "anon",
    "by_name",
    "catalog",
    "catalog_from_yaml",
    "cluster_policy",
    "configmap",
    "names",
    "namespace",
    "parse_problems",
    "problems_of",
    "reasons",
    "ref",
    "resolve_actor",
    "resolve_skill",
    "resolver",
    "skill",
    "skill_md",
    "skill_policy",
    "tool",
]


def noise(seed: str, size: int) -> str:
    """``size`` characters that gzip cannot shrink much (base64 of a sha512 chain),
    the same for the same seed: text that makes a set large once compressed."""
    import base64
    import hashlib

    out, block = [], hashlib.sha512(seed.encode()).digest()
    while sum(map(len, out)) < size:
        block = hashlib.sha512(block).digest()
        out.append(base64.b64encode(block).decode())
    return "".join(out)[:size]
