"""The gateway's own OTLP/HTTP sender (otlp_send.py) against real receivers: it
sends what the SDK's exporter would (endpoint, headers, gzip, certificates, as the
``OTEL_EXPORTER_OTLP_*`` variables set them) over one kept-alive connection, retries
what the SDK's exporter retries, drops and counts what never gets through, and
never logs a header."""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from bad_servers import make_ca

pytest.importorskip("opentelemetry.sdk")

from otlpkit import Receiver
from prometheus_client import CollectorRegistry

from pinkit import installed_within_pin
from skillop.gateway import otlp_send
from skillop.gateway import tracing as t
from skillop.gateway.metrics import GatewayMetrics
from skillop.gateway.observe import Observer
from skillop.gateway.own_tracing import OwnTracing

SECRET = "Bearer s3cret-token"
DOWN = "http://127.0.0.1:9"  # nothing listens


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.close()


def _tracing(monkeypatch: pytest.MonkeyPatch, endpoint: str,
             **variables: str) -> tuple[OwnTracing, GatewayMetrics]:
    """The gateway's tracing as the variables set it (the SDK's exporter reads them
    from the environment), spans exported only when flushed, drops counted."""
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_TRACES_SAMPLER": "always_on",
               "OTEL_BSP_SCHEDULE_DELAY": "600000", **variables}
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    tracing = t.start(environ)
    assert isinstance(tracing, OwnTracing)
    metrics = GatewayMetrics(CollectorRegistry())
    Observer(metrics=metrics, tracing=tracing)  # counts the drops
    return tracing, metrics


def _calls(tracing: OwnTracing, *names: str) -> None:
    for name in names:
        with tracing.request("tools/call", name, brought={}):
            pass
    tracing.batches.flush()


def _dropped(metrics: GatewayMetrics) -> float | None:
    return metrics.registry.get_sample_value("skillop_gateway_spans_dropped_total")


def test_batches_go_over_one_kept_alive_connection_with_the_exporters_headers(
        monkeypatch: pytest.MonkeyPatch, receiver: Receiver,
        caplog: pytest.LogCaptureFixture) -> None:
    tracing, metrics = _tracing(monkeypatch, receiver.url,
                                OTEL_EXPORTER_OTLP_HEADERS=f"Authorization={SECRET}")
    assert tracing.sender is not None
    try:
        _calls(tracing, "a", "b")
        _calls(tracing, "c")
    finally:
        tracing.shutdown()
    assert receiver.exports == [["tools/call a", "tools/call b"], ["tools/call c"]]
    assert receiver.connections == 1
    sent = receiver.headers[0]
    assert sent["authorization"] == SECRET
    assert sent["content-type"] == "application/x-protobuf"
    assert sent["user-agent"].startswith("OTel-OTLP-Exporter-Python/")
    assert _dropped(metrics) == 0


def test_a_connection_the_receiver_closed_is_opened_again_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    closing = Receiver(close=True)
    tracing, metrics = _tracing(monkeypatch, closing.url)
    assert tracing.sender is not None
    tracing.sender._sleep = lambda seconds: pytest.fail("no backoff for a closed connection")
    try:
        for name in ("a", "b", "c"):
            _calls(tracing, name)
    finally:
        tracing.shutdown()
        closing.close()
    assert closing.exports == [["tools/call a"], ["tools/call b"], ["tools/call c"]]
    assert closing.connections == 3
    assert _dropped(metrics) == 0


def test_gzip_as_the_variable_asks(monkeypatch: pytest.MonkeyPatch, receiver: Receiver) -> None:
    tracing, _ = _tracing(monkeypatch, receiver.url, OTEL_EXPORTER_OTLP_COMPRESSION="gzip")
    try:
        _calls(tracing, "zipped")
    finally:
        tracing.shutdown()
    assert receiver.headers[0]["content-encoding"] == "gzip"
    assert receiver.exports == [["tools/call zipped"]]


def test_https_to_a_self_signed_receiver_trusted_by_the_certificate_variable(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "server").mkdir()
    (tmp_path / "client").mkdir()
    server = make_ca(tmp_path / "server", self_signed_leaf=True)
    client = make_ca(tmp_path / "client", self_signed_leaf=True)
    trusted = tmp_path / "server.pem"
    trusted.write_text(server.ca_pem)
    tls = server.server_context()
    tls.verify_mode = ssl.CERT_REQUIRED  # and the gateway's certificate asked for
    tls.load_verify_locations(cadata=client.ca_pem)
    secure = Receiver(tls=tls)
    try:
        tracing, metrics = _tracing(
            monkeypatch, secure.url, OTEL_EXPORTER_OTLP_CERTIFICATE=str(trusted),
            OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE=str(client.cert_file),
            OTEL_EXPORTER_OTLP_CLIENT_KEY=str(client.key_file))
        try:
            _calls(tracing, "a")
            _calls(tracing, "b")
        finally:
            tracing.shutdown()
        assert secure.exports == [["tools/call a"], ["tools/call b"]]
        assert secure.connections == 1
        assert _dropped(metrics) == 0
        # Not trusting it (certifi's bundle), the batch is dropped and counted.
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_CERTIFICATE")
        tracing, metrics = _tracing(monkeypatch, secure.url, OTEL_EXPORTER_OTLP_TIMEOUT="2")
        assert tracing.sender is not None
        tracing.sender._sleep = lambda seconds: False
        try:
            _calls(tracing, "c")
        finally:
            tracing.shutdown()
        assert _dropped(metrics) == 1
        assert len(secure.exports) == 2
    finally:
        secure.close()


def test_a_receiver_answering_503_then_200_gets_the_batch_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    busy = Receiver(answers=(503, 503))
    tracing, metrics = _tracing(monkeypatch, busy.url)
    try:
        _calls(tracing, "a", "b")
    finally:
        tracing.shutdown()
        busy.close()
    assert busy.exports == [["tools/call a", "tools/call b"]]
    assert len(busy.headers) == 3
    assert _dropped(metrics) == 0


def test_a_refused_batch_is_dropped_counted_and_not_retried(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    refusing = Receiver(answers=(400,))
    tracing, metrics = _tracing(monkeypatch, refusing.url,
                                OTEL_EXPORTER_OTLP_TRACES_HEADERS=f"authorization={SECRET}")
    try:
        with caplog.at_level(logging.DEBUG):
            _calls(tracing, "a", "b", "c")
    finally:
        tracing.shutdown()
        refusing.close()
    assert len(refusing.headers) == 1 and refusing.exports == []
    assert _dropped(metrics) == 3
    assert "HTTP 400" in caplog.text and "s3cret" not in caplog.text


def test_a_receiver_that_is_down_is_retried_with_backoff_then_the_batch_dropped(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    tracing, metrics = _tracing(monkeypatch, DOWN, OTEL_EXPORTER_OTLP_TIMEOUT="100",
                                OTEL_EXPORTER_OTLP_HEADERS=f"authorization={SECRET}")
    assert tracing.sender is not None
    waits: list[float] = []
    tracing.sender._sleep = lambda seconds: waits.append(seconds) or False
    try:
        with caplog.at_level(logging.DEBUG):
            started = time.monotonic()
            _calls(tracing, "a", "b")
            assert time.monotonic() - started < 5  # the waits faked: no real backoff
    finally:
        tracing.shutdown()
    assert [round(w / 2 ** n, 1) for n, w in enumerate(waits)] == [
        pytest.approx(1, abs=0.21)] * 5
    assert _dropped(metrics) == 2
    assert "ConnectionRefusedError" in caplog.text and "s3cret" not in caplog.text


def test_within_the_timeout_a_down_receiver_costs_no_call_anything(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The real backoff (1 s, then 2 s: past a 2 s timeout) on the exporter's thread,
    while calls go on."""
    tracing, metrics = _tracing(monkeypatch, DOWN, OTEL_EXPORTER_OTLP_TIMEOUT="2",
                                OTEL_BSP_MAX_EXPORT_BATCH_SIZE="2")
    observer = Observer(metrics=metrics, tracing=tracing)
    started = time.perf_counter()
    for _ in range(200):
        with observer.request("tools/call", "ping"):
            pass
    assert time.perf_counter() - started < 1
    deadline = time.monotonic() + 10
    while (_dropped(metrics) or 0) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (_dropped(metrics) or 0) >= 2
    tracing.batches._queue.clear()
    tracing.shutdown()


def test_what_the_own_sender_does_not_cover_goes_through_the_sdks_exporter(
        monkeypatch: pytest.MonkeyPatch, receiver: Receiver) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "")
    tracing, _ = _tracing(monkeypatch, receiver.url)
    try:
        assert tracing.sender is None
    finally:
        tracing.batches._queue.clear()
        tracing.shutdown()
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    tracing, _ = _tracing(monkeypatch, receiver.url)
    try:
        assert tracing.sender is not None
        _calls(tracing, "direct")
    finally:
        tracing.shutdown()
    assert receiver.exports == [["tools/call direct"]]


def test_retry_after_is_read_as_the_sdk_reads_it() -> None:
    assert otlp_send._retry_after("3") == 3.0
    assert otlp_send._retry_after(" -1 ") == 0.0
    assert otlp_send._retry_after("inf") is None
    assert otlp_send._retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    assert otlp_send._retry_after("soon") is None
    assert otlp_send._retry_after(None) is None


def test_a_header_that_http_refuses_drops_the_batch_without_logging_it(
        monkeypatch: pytest.MonkeyPatch, receiver: Receiver,
        caplog: pytest.LogCaptureFixture) -> None:
    tracing, metrics = _tracing(monkeypatch, receiver.url,
                                OTEL_EXPORTER_OTLP_HEADERS="authorization=s3cret%0Ainjected")
    if tracing.sender is None:
        tracing.shutdown()
        pytest.skip("the SDK's exporter refused the header itself")
    try:
        with caplog.at_level(logging.DEBUG):
            _calls(tracing, "a")
    finally:
        tracing.shutdown()
    assert receiver.headers == [] and _dropped(metrics) == 1
    assert "not a valid HTTP header" in caplog.text and "s3cret" not in caplog.text


def test_the_installed_exporter_is_the_one_the_sender_reads() -> None:
    """The sender reads the SDK exporter's resolved settings from its private client
    (``_endpoint``, ``_headers``, ``_timeout``, ``_compression``,
    ``_transport._session``) and leaves the export to the SDK's client without them:
    a release that renames them would be slower, not wrong; the tests above, which
    need the own sender, would fail, and this says why."""
    installed_within_pin("opentelemetry-exporter-otlp-proto-http")
