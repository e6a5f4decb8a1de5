"""What a CLI run loads: only what its command needs (bench/startup.py has the
figures; these guards are not timed, they check what is imported and read)."""

from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys

import pytest
from clirun import EXAMPLES, PYTHON_ARGS, run
from pydantic import BaseModel

import skillop.model as model_package

#: Never loaded by an offline command: the operator's and the gateway's
#: dependencies, and what only other commands use.
HEAVY = {"mcp", "kubernetes", "kopf", "httpx", "httpx2", "uvicorn", "aiohttp", "anyio",
         "jsonschema", "prometheus_client", "cryptography"}
OTHER_COMMANDS = {"skillop.resolve.inject", "skillop.resolve.explain", "skillop.cli.render",
                  "skillop.sources.egress", "skillop.sources.mcp_discovery",
                  "skillop.operator", "skillop.gateway.server", "skillop.cli.cluster",
                  "skillop.cli.discover",
                  # the approval and status models: only the approvals command and
                  # the operator read them (printing a line uses model.visible)
                  "skillop.model.approval", "skillop.model.status"}
#: What only running an offline command loads: parsing the command line (and
#: --help, and the other commands' parsers) loads none of it.
OFFLINE_ONLY = {"pydantic", "pydantic_core", "yaml", "importlib.metadata", "skillop.cli.offline",
                "skillop.cli.load", "skillop.model.manifest", "skillop.model.specs",
                "skillop.model.capabilities", "skillop.resolve", "skillop.sources"}


def _within(imported: set[str], modules: set[str]) -> set[str]:
    return {name for name in imported
            if any(name == m or name.startswith(m + ".") for m in modules)}


def _imported(*args: str) -> set[str]:
    result = run(*args, command=[sys.executable, "-X", "importtime", *PYTHON_ARGS])
    assert result.returncode == 0, result.stderr[-2000:]
    return {line.split("|")[-1].strip() for line in result.stderr.splitlines()
            if line.startswith("import time:")}


@pytest.mark.parametrize("args", [("validate", "-f", str(EXAMPLES)), ("--help",)])
def test_an_offline_command_loads_only_what_it_needs(args: tuple[str, ...]) -> None:
    imported = _imported(*args)
    assert "skillop.cli.main" in imported
    assert not {name.split(".")[0] for name in imported} & HEAVY
    assert not _within(imported, OTHER_COMMANDS)


@pytest.mark.parametrize("args", [("--help",), ("validate", "--help"), ("gateway", "--help"),
                                  ("inject", "--help"), ("approvals", "--help")])
def test_parsing_the_command_line_loads_no_model(args: tuple[str, ...]) -> None:
    # pydantic and the models are most of a run's start-up: only a command that
    # reads manifests pays for them, when it runs.
    imported = _imported(*args)
    assert "skillop.cli.main" in imported
    assert not _within(imported, OFFLINE_ONLY)


def test_validate_loads_what_its_command_needs() -> None:
    # The other side of the guard above: if it passes because nothing is
    # recorded, this one fails.
    assert _within(_imported("validate", "-f", str(EXAMPLES)), OFFLINE_ONLY) >= {
        "pydantic", "yaml", "skillop.cli.offline", "skillop.model.manifest"}


def test_the_builtin_groups_are_read_with_the_manifests_parser(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # libyaml's parser, as manifests are read (model.yamlread): PyYAML's pure one
    # costs every offline command about 20 ms at start-up.
    import yaml

    from skillop.sources import builtins

    if not yaml.__with_libyaml__:
        pytest.skip("PyYAML is built without libyaml")

    class Refused(yaml.SafeLoader):
        def __init__(self, stream: object) -> None:
            raise AssertionError("the built-in groups are read with PyYAML's pure parser")

    monkeypatch.setattr(yaml, "SafeLoader", Refused)
    builtins.builtin_groups.cache_clear()
    try:
        assert "file_operations" in builtins.builtin_groups()
    finally:
        builtins.builtin_groups.cache_clear()


def test_importing_the_cli_reads_no_model_source() -> None:
    # The models' attribute docstrings are the CRDs' descriptions, read from the
    # source when a CRD is generated (model.fielddocs), not when a model is defined.
    code = ("import linecache, skillop.cli.main; "
            "print([f for f in linecache.cache if 'skillop' in f])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "[]"


#: Runs validate in this interpreter, then says whether the collector is on and
#: whether the model classes the import made are still in its generations.
_COLLECTED = """
import contextlib, gc, io, sys
from skillop.cli.main import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(["validate", "-f", sys.argv[1]])
from skillop.model.manifest import Resource
from skillop.resolve.resolver import Resolver
walked = {id(o) for o in gc.get_objects()}
print(code, gc.isenabled(), id(Resource) in walked or id(Resolver) in walked)
"""


def test_the_collector_leaves_the_commands_classes_alone_and_stays_on() -> None:
    # Classes that live as long as the process, frozen once imported: collections
    # no longer walk them (part of every offline run's CPU); the collector itself is
    # not switched off for what the command does.
    out = subprocess.run([sys.executable, "-c", _COLLECTED, str(EXAMPLES)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "0 True False"


#: Runs an offline command in this interpreter, then says whether it loaded the
#: tokenizer.
_COUNTED = """
import contextlib, io, sys
from skillop.cli.main import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
from skillop.resolve.tokens import counting
print(code, counting())
"""


@pytest.mark.parametrize(("args", "counted"), [
    (("validate",), False),
    # ``tools`` prints every tool's count: the guard sees a load when there is one.
    (("tools", "team-a/developer"), True),
])
def test_validate_loads_no_tokenizer_when_nothing_reads_a_count(args: tuple[str, ...],
                                                               counted: bool) -> None:
    # The BPE tokenizer is about a tenth of a validate's CPU; the examples set no
    # maxToolTokens and fit a ConfigMap whatever their counts (resolve.limits).
    out = subprocess.run([sys.executable, "-c", _COUNTED, *args, "-f", str(EXAMPLES)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == f"0 {counted}"


def _models() -> list[type[BaseModel]]:
    """Every pydantic model of skillop (they are all in ``skillop.model``)."""
    for module in pkgutil.iter_modules(model_package.__path__, "skillop.model."):
        importlib.import_module(module.name)
    found: list[type[BaseModel]] = []
    todo: list[type[BaseModel]] = [BaseModel]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__.startswith("skillop."):
                found.append(sub)
    return found


def test_no_model_field_defaults_to_a_builtins_factory() -> None:
    # Building a validator, pydantic reads each default factory's signature; a
    # builtin's (list, dict) is parsed from its text with the tokenizer, whose first
    # use compiles a large regular expression: about 3% of a validate's CPU.
    # ``specbase.empty_list`` and ``empty_dict`` are read from their code.
    models = _models()
    builtin = [f"{model.__qualname__}.{name}" for model in models
               for name, info in model.model_fields.items()
               if getattr(info.default_factory, "__module__", None) == "builtins"]
    assert len(models) > 40
    assert builtin == []


#: Runs validate in this interpreter, then says whether pydantic scanned the
#: installed distributions for its plugins.
_PLUGINS = """
import contextlib, io, sys
from skillop.cli.main import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(["validate", "-f", sys.argv[1]])
from pydantic.plugin import _loader
print(code, _loader._plugins is not None)
"""


@pytest.mark.parametrize(("setting", "scanned"), [(None, False), ("", True), ("1", False)])
def test_an_offline_command_loads_pydantic_plugins_only_when_asked(
        setting: str | None, scanned: bool) -> None:
    # The entry-point scan over every installed distribution is a few percent of a
    # validate; a user who wants their plugins in the CLI sets the variable (even
    # empty), which is then pydantic's to read as it documents.
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    if setting is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = setting
    out = subprocess.run([sys.executable, "-c", _PLUGINS, str(EXAMPLES)], env=env,
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == f"0 {scanned}"
