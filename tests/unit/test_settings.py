"""Operator settings: a value that is set but does not parse stops the operator.

The default is for an unset variable only; ``SKILLOP_MCP_REFRESH_SECONDS=abc``
used to fall back to 300 s without a word.
"""

from __future__ import annotations

import math
import sys

import pytest
from clirun import run
from hypothesis import given
from hypothesis import strategies as st

from skillop.operator.settings import LeaseConfig, OperatorConfig, SettingsError

#: Every variable read as a number of seconds, with its default.
SECONDS = {
    "SKILLOP_MCP_REFRESH_SECONDS": ("mcp_refresh_seconds", 300.0),
    "SKILLOP_RESYNC_SECONDS": ("resync_seconds", 300.0),
}


@pytest.mark.parametrize(("name", "value"), [
    ("SKILLOP_MCP_REFRESH_SECONDS", "abc"),
    ("SKILLOP_RESYNC_SECONDS", "-5"),
    ("SKILLOP_WRITE_CONCURRENCY", "many"),
    ("SKILLOP_MCP_DISCOVERY", "maybe"),
    ("SKILLOP_LOG_LEVEL", "LOUD"),
    ("SKILLOP_LEASE_DURATION_SECONDS", "5"),  # not above the renew deadline (10)
])
def test_operator_stops_at_start_naming_the_variable(name: str, value: str) -> None:
    """The real command, as a Deployment starts it: exit 2, one line, no traceback."""
    result = run("operator", env={name: value, "KUBECONFIG": "/nonexistent"}, timeout=60)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("skillop operator: ") and name in lines[0]
    assert "Traceback" not in result.stderr


def test_unset_and_empty_mean_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SECONDS:
        monkeypatch.delenv(name, raising=False)
    config = OperatorConfig.from_env()
    for name, (attr, default) in SECONDS.items():
        assert getattr(config, attr) == default
        monkeypatch.setenv(name, "  ")
        assert getattr(OperatorConfig.from_env(), attr) == default


@given(st.floats(min_value=0.001, max_value=1e9, allow_nan=False))
def test_any_positive_number_parses(value: float) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SKILLOP_MCP_REFRESH_SECONDS", f" {value!r} ")
        assert OperatorConfig.from_env().mcp_refresh_seconds == value


@given(st.text(max_size=20))
def test_text_that_is_not_a_positive_number_is_refused(raw: str) -> None:
    try:
        number: float | None = float(raw.strip())
    except ValueError:
        number = None
    with pytest.MonkeyPatch.context() as mp:
        try:
            mp.setenv("SKILLOP_RESYNC_SECONDS", raw)
        except ValueError:  # a NUL cannot be in the environment
            return
        if not raw.strip():
            assert OperatorConfig.from_env().resync_seconds == 300.0
        elif number is not None and 0 < number < math.inf:
            assert OperatorConfig.from_env().resync_seconds == number
        else:
            with pytest.raises(SettingsError, match=r"^SKILLOP_RESYNC_SECONDS="):
                OperatorConfig.from_env()


@pytest.mark.parametrize(("raw", "expected"), [
    ("true", True), ("Yes", True), ("1", True), ("on", True),
    ("false", False), ("NO", False), ("0", False), ("off", False)])
def test_booleans(monkeypatch: pytest.MonkeyPatch, raw: str, expected: bool) -> None:
    monkeypatch.setenv("SKILLOP_LEADER_ELECTION", raw)
    assert OperatorConfig.from_env().lease.enabled is expected


def test_lease_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SKILLOP_LEASE_NAME", "SKILLOP_LEASE_NAMESPACE", "SKILLOP_LEASE_IDENTITY",
                 "SKILLOP_LEASE_DURATION_SECONDS", "SKILLOP_LEASE_RENEW_DEADLINE_SECONDS",
                 "SKILLOP_LEASE_RETRY_SECONDS", "POD_NAME"):
        monkeypatch.delenv(name, raising=False)
    default = LeaseConfig.from_env()
    assert (default.duration_seconds, default.renew_deadline_seconds,
            default.retry_seconds) == (15.0, 10.0, 1.0)
    assert default.name == "skillop" and default.enabled
    # Two replicas (or a restarted container) never share an identity.
    assert LeaseConfig.from_env().identity != default.identity
    monkeypatch.setenv("POD_NAME", "skillop-7d9f-abcde")
    assert LeaseConfig.from_env().identity.startswith("skillop-7d9f-abcde_")
    monkeypatch.setenv("SKILLOP_LEASE_DURATION_SECONDS", "30")
    monkeypatch.setenv("SKILLOP_LEASE_RENEW_DEADLINE_SECONDS", "20")
    monkeypatch.setenv("SKILLOP_LEASE_RETRY_SECONDS", "21")
    with pytest.raises(SettingsError, match="SKILLOP_LEASE_RETRY_SECONDS"):
        LeaseConfig.from_env()


# kopf's registry has no public list of its webhook handlers; the child process
# reads the private one to show which were registered.
IMPORT_THEN_REGISTER = """
import kopf
from skillop.operator import handlers
from skillop.operator.settings import OperatorConfig
def validating():
    return [h.id for h in kopf.get_default_registry()._webhooks.get_all_handlers()]
print(validating())
handlers.register_webhook(OperatorConfig(webhook=True))
print(validating())
"""


def test_importing_the_handlers_reads_no_settings() -> None:
    # The settings are read once (skillop operator, or kopf's startup) and passed
    # down: the environment at import time changes nothing, not even a bad value.
    import os
    import subprocess

    env = {**os.environ, "SKILLOP_WEBHOOK": "true", "SKILLOP_MCP_REFRESH_SECONDS": "abc"}
    done = subprocess.run([sys.executable, "-c", IMPORT_THEN_REGISTER], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    before, after = done.stdout.splitlines()[-2:]
    assert before == "[]"
    assert after == "['mutate-toolcallapprovals', 'validate-skills', 'validate-actors']"


def test_the_injected_sidecars_settings_come_from_the_charts_variables(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILLOP_INJECTION", "true")
    monkeypatch.setenv("SKILLOP_INJECT_IMAGE", "registry.example/skillop:1.2")
    monkeypatch.setenv("SKILLOP_INJECT_PORT", "9100")
    monkeypatch.setenv("SKILLOP_INJECT_METRICS_PORT", "9464")
    monkeypatch.setenv("SKILLOP_INJECT_PULL_POLICY", "Always")
    monkeypatch.setenv("SKILLOP_INJECT_RESOURCES", '{"requests": {"cpu": "10m"}}')
    monkeypatch.setenv("SKILLOP_MCP_ALLOW", "*.internal")
    config = OperatorConfig.from_env()
    assert config.injection and config.serves_webhooks
    sidecar = config.sidecar
    assert (sidecar.image, sidecar.port, sidecar.metrics_port, sidecar.pull_policy) == (
        "registry.example/skillop:1.2", 9100, 9464, "Always")
    assert sidecar.requests == (("cpu", "10m"),)
    assert sidecar.limits == (("memory", "512Mi"),)  # not given: the default
    assert sidecar.allow == ("*.internal",)


@pytest.mark.parametrize(("name", "value", "message"), [
    ("SKILLOP_INJECT_PORT", "0", "must be between 1 and 65535"),
    ("SKILLOP_INJECT_METRICS_PORT", "http", "is not a whole number"),
    ("SKILLOP_INJECT_PULL_POLICY", "Sometimes", "is not one of Always, IfNotPresent, Never"),
    ("SKILLOP_INJECT_RESOURCES", "{", "is not JSON"),
    ("SKILLOP_INJECT_RESOURCES", '{"limit": {}}', "must be an object with requests"),
    ("SKILLOP_INJECT_RESOURCES", '{"limits": {"cpu": true}}', "must map resource names"),
])
def test_a_sidecar_setting_that_does_not_parse_names_the_variable(
        monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=message) as err:
        OperatorConfig.from_env()
    assert name in str(err.value)
