"""The disclosure benchmark's data: real servers' tool lists with their licences,
and queries whose labels name tools of the set (bench/disclosure.py)."""

from __future__ import annotations

import json

from benchload import BENCH, bench_module


def test_every_recording_names_its_package_version_and_licence() -> None:
    recordings = sorted((BENCH / "mcp_tools" / "servers").glob("*.json"))
    total = 0
    for path in recordings:
        data = json.loads(path.read_text())
        assert data["package"] and data["version"] and data["registry"] in ("npm", "pypi")
        assert "Permission is hereby granted" in data["licenseText"] or (
            "Apache License" in data["licenseText"]), path.name
        assert data["licenseSource"]
        for tool in data["tools"]:
            assert tool["name"] and isinstance(tool["inputSchema"], dict)
        total += len(data["tools"])
    assert total >= 500


def test_the_set_has_500_tools_and_every_label_is_one_of_them() -> None:
    bench = bench_module("disclosure")
    keys = {f"{short}/{tool['name']}" for short, stem in bench.SERVERS.items()
            for tool in bench.load(stem)}
    assert len(keys) >= 500
    labelled = [q for name in bench.QUERY_FILES for q in bench.queries(name)]
    assert len(labelled) >= 100
    for query, relevant in labelled:
        assert relevant and relevant <= keys, query
    assert bench.skill_name("zereight__mcp-gitlab") == "gitlab"
    assert bench.skill_name("playwright__mcp") == "playwright"
    assert bench.skill_name("mcp-server-kubernetes") == "kubernetes"


def test_the_kinded_query_sets_are_complete_and_the_held_out_part_large_enough() -> None:
    bench = bench_module("disclosure")
    keys = {f"{short}/{tool['name']}" for short, stem in bench.SERVERS.items()
            for tool in bench.load(stem)}
    parts = {part: bench.kinded_queries(name) for name, part in bench.SEEN}
    parts |= {name: bench.kinded_queries(name) for name in bench.FROZEN_FILES
              if (bench.DATA / name).exists()}
    for labelled in parts.values():
        for kind, query, relevant in labelled:
            assert kind in (*bench.KINDS, "none"), query
            assert (kind == "none") == (not relevant), query
            assert relevant <= keys, query
    held_out = parts["v2 held-out"]
    assert sum(1 for _, _, r in held_out if r) >= 100
    assert sum(1 for _, _, r in held_out if not r) >= 20
    assert len(held_out) + len(parts["v2 tuning"]) >= 200
    assert {k for k, _, _ in held_out} == {*bench.KINDS, "none"}


def test_each_frozen_set_is_scored_alone_when_named_and_covers_every_kind() -> None:
    bench = bench_module("disclosure")
    assert bench.frozen_files(None) == []
    latest = bench.FROZEN_FILES[-1]
    assert bench.frozen_files([latest]) == [latest]
    assert set(bench.frozen_files([])) <= set(bench.FROZEN_FILES)
    try:
        bench.frozen_files(["queries-v2-tuning.txt"])
    except SystemExit:
        pass
    else:
        raise AssertionError("a seen set was accepted as frozen")
    fifth = bench.kinded_queries("queries-v5-frozen.txt")
    assert {k for k, _, _ in fifth} == {*bench.KINDS, "none"}
    assert sum(1 for _, _, r in fifth if not r) >= 50 and len(fifth) >= 300
    assert len({q for _, q, _ in fifth}) == len(fifth)


def test_the_abstentions_checks_switched_off_are_restored_whatever_module_holds_them() -> None:
    import importlib

    from skillop.gateway import abstain

    bench = bench_module("disclosure")

    def owner_and_attribute(name: str) -> tuple[object, str]:
        module, _, attribute = name.rpartition(".")
        return importlib.import_module(f"skillop.gateway.{module or 'abstain'}"), attribute

    places = [owner_and_attribute(name) for name in abstain.SWITCHES]
    assert any(owner is not abstain for owner, _ in places)
    before = [getattr(owner, attribute) for owner, attribute in places]
    with bench.switched_off(*abstain.SWITCHES):
        assert all(getattr(owner, attribute) is False for owner, attribute in places)
    assert [getattr(owner, attribute) for owner, attribute in places] == before
