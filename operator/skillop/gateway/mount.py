"""The mounted set and credentials, read again when kubelet changes them.

Every ``poll_interval`` seconds the gateway stats the mounted files (kubelet
updates a ConfigMap or Secret volume by swapping its ``..data`` link, which
changes the files' identity; a packed set's index and chunks too,
docs/toolset.md). ``Mounts.read_if_changed`` re-reads the set on a change; a set
that cannot be read leaves the current one served (said once, on stderr). What
an upstream's connection was made with (its Secrets, CA ConfigMap, the
``--ca-file``) is part of the signature: a change reconnects it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from skillop.gateway.options import Options
from skillop.gateway.secrets import file_signature, secrets_signature
from skillop.gateway.served import ServedSet, ServerKey, ToolSetError, load_served_set
from skillop.model.toolset import INDEX_KEY, PACKED_KEY, TOOLS_KEY
from skillop.model.wording import count


class Mounts:
    """What was read of the mounts last, and reading them again when they change."""

    def __init__(self, options: Options, say: Callable[[str], None]) -> None:
        self._options = options
        self._say = say
        self._signature: object = None
        self._last_error: str | None = None

    def read_if_changed(self, current: ServedSet) -> ServedSet | None:
        """The set as mounted now, if the mounts changed since ``current`` was read
        and it can be read; else None (``current`` stays served)."""
        files = self._files_signature()
        if (files, self._upstreams_signature(current)) == self._signature:
            return None
        try:
            served = load_served_set(self._options.toolset_dir)
        except ToolSetError as exc:
            self._signature = (files, self._upstreams_signature(current))
            if str(exc) != self._last_error:
                self._last_error = str(exc)
                self._say(f"{exc}; serving the previous set"
                          f" ({count(len(current.tools), 'tool')})")
            return None
        # Signed with the upstreams of the set read, which is what the next poll
        # compares (the files as they were before the read: a change meanwhile is
        # read at the next poll).
        self._signature = (files, self._upstreams_signature(served))
        self._last_error = None
        return served

    def _files_signature(self) -> object:
        directory = self._options.toolset_dir
        tools = tuple(_file_identity(directory / key) for key in (TOOLS_KEY, INDEX_KEY,
                                                                  *_chunk_keys(directory)))
        try:
            data: object = os.readlink(directory / "..data")
        except OSError:
            data = None
        return (tools, data)

    def _upstreams_signature(self, served: ServedSet) -> object:
        return tuple(sorted(self.upstream_signatures(served).items()))

    def upstream_signatures(self, served: ServedSet) -> dict[ServerKey, object]:
        """What an upstream's connection was made with, besides its entry: its
        Secrets, its CA ConfigMap and the ``--ca-file`` (a change reconnects it)."""
        settings = self._options.upstream
        ca_file = file_signature(settings.ca_file)
        return {key: (
            tuple(sorted(secrets_signature(upstream.secrets(), settings.secrets_dir).items())),
            tuple(sorted(secrets_signature(upstream.configmaps(),
                                           settings.configmaps_dir).items())),
            ca_file if upstream.url is not None else None,
        ) for key, upstream in served.upstreams.items()}


def _file_identity(path: Path) -> object:
    """What changes when a file is replaced (kubelet swaps the directory under it)."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_dev, stat.st_ino, stat.st_mtime_ns, stat.st_size)


def _chunk_keys(directory: Path) -> list[str]:
    """A packed set's chunk files (the Actor's ConfigMap and its parts project them)."""
    try:
        return sorted(name for name in os.listdir(directory) if name.startswith(PACKED_KEY))
    except OSError:
        return []
