"""The gateway's lines on stderr are written whole (gateway/serve.py's ``say``):
its threads (the event loop, the vectors' thread) say things at once, and a client
reads the URL it serves at from one of those lines."""

from __future__ import annotations

import pytest

from skillop.gateway import serve


class _Writes:
    def __init__(self) -> None:
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def test_a_line_is_one_write_with_its_end(monkeypatch: pytest.MonkeyPatch) -> None:
    stderr = _Writes()
    monkeypatch.setattr("sys.stderr", stderr)
    serve.say("serving 11 tools of team-a/dev at http://127.0.0.1:1/mcp")
    assert stderr.writes == ["skillop gateway: serving 11 tools of team-a/dev at"
                             " http://127.0.0.1:1/mcp\n"]
