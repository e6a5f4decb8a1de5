"""Mounted Secrets: upstream headers and stdio environment, read from files.

Each Secret an upstream names (``headersFrom.secretRef``, ``valueFrom.secretKeyRef``)
is mounted into the gateway container only, one directory per Secret:
``<secrets-dir>/<secret-name>/<key>`` (default secrets-dir
``/var/run/skillop/secrets``; docs/gateway.md). For ``headersFrom`` every key is
a header name and its file the value, as the operator sends them.

Values are read when a connection is opened, held in memory and never printed:
errors name the Secret and the key, never a value.

CA bundles (``ca_bundles``) are read the same way, at each connection: the
operator-wide file (``--ca-file``) and the server's ``tls`` key, from a Secret
mounted as above or a ConfigMap mounted at ``<configmaps-dir>/<name>/<key>``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path

from skillop.model.mcpserver import McpTls
from skillop.model.settings import CONFIGMAPS_DIR, SECRETS_DIR
from skillop.model.toolset import ServerEntry

DEFAULT_SECRETS_DIR = Path(SECRETS_DIR.default)
DEFAULT_CONFIGMAPS_DIR = Path(CONFIGMAPS_DIR.default)
#: A header value never needs more; a larger file is not a header.
_MAX_VALUE_BYTES = 64 * 1024
#: A CA bundle is a few certificates; a ConfigMap holds at most 1 MiB.
_MAX_CA_BYTES = 1024 * 1024


class SecretMissing(Exception):
    """A Secret (or one of its keys, or a CA bundle) is not mounted; the message
    names it, never a value."""


def headers_of(upstream: ServerEntry, root: Path) -> dict[str, str]:
    """The HTTP headers for ``upstream``: every key of its ``headersFrom`` Secret."""
    if upstream.headers_from is None:
        return {}
    secret = upstream.headers_from.secret_ref.name
    directory = root / secret
    try:
        keys = sorted(name for name in os.listdir(directory) if not name.startswith("."))
    except OSError:
        raise SecretMissing(f"Secret {secret} is not mounted at {directory}") from None
    return {key: _value(secret, key, root) for key in keys}


def env_of(upstream: ServerEntry, root: Path) -> dict[str, str]:
    """The environment of a stdio upstream: literal values and Secret keys."""
    env: dict[str, str] = {}
    for var in upstream.env or ():
        if var.value_from is not None:
            ref = var.value_from.secret_key_ref
            env[var.name] = _value(ref.name, ref.key, root)
        elif var.value is not None:
            env[var.name] = var.value
    return env


def secret_values(upstream: ServerEntry, env: Mapping[str, str]) -> list[str]:
    """Of a stdio upstream's ``env``, the values read from Secrets."""
    return [env[var.name] for var in upstream.env or () if var.value_from is not None]


def credentials(root: Path, *, api_dir: Path | None = None) -> tuple[str, ...]:
    """Every value of every Secret mounted under ``root``, and the API token in
    ``api_dir``: what an upstream client redacts, whichever upstream it reaches. A stdio child
    runs as the gateway's user and can read them all; an HTTP upstream may have
    been given another's value by mistake: no upstream client's answers may carry any."""
    values: list[str] = []
    for name in _entries(root):
        for key in _entries(root / name):
            try:
                values.append(_value(name, key, root))
            except SecretMissing:
                continue  # a key that is not a file or not text: nothing to recognise
    if api_dir is not None:
        with suppress(OSError, UnicodeDecodeError):  # none mounted: approvals say why
            values.append((api_dir / "token").read_text("ascii").strip())
    return tuple(values)


def _entries(directory: Path) -> list[str]:
    """The visible entries of ``directory`` (kubelet's ``..data`` are hidden), sorted."""
    try:
        return sorted(name for name in os.listdir(directory) if not name.startswith("."))
    except OSError:
        return []


def secret_value(secret: str, key: str, root: Path) -> str:
    """One key of a mounted Secret (a trailing newline dropped); ``SecretMissing``
    naming the Secret and key when it cannot be read."""
    return _value(secret, key, root)


def _value(secret: str, key: str, root: Path) -> str:
    path = root / secret / key
    try:
        with path.open("rb") as handle:
            raw = handle.read(_MAX_VALUE_BYTES + 1)
    except OSError:
        raise SecretMissing(f"key {key} of Secret {secret} is not mounted at"
                            f" {path}") from None
    if len(raw) > _MAX_VALUE_BYTES:
        raise SecretMissing(f"key {key} of Secret {secret} is larger than"
                            f" {_MAX_VALUE_BYTES} bytes")
    try:
        # A trailing newline (echo > file) is never part of a header value.
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise SecretMissing(f"key {key} of Secret {secret} is not UTF-8") from None


def secrets_signature(names: tuple[str, ...], root: Path) -> Mapping[str, object]:
    """What changes when kubelet updates a mounted Secret: each directory's entries
    with the identity of the files they point to (kubelet swaps ``..data``)."""
    signature: dict[str, object] = {}
    for name in names:
        directory = root / name
        try:
            entries = []
            with os.scandir(directory) as scan:
                for entry in scan:
                    if entry.name.startswith(".") and entry.name != "..data":
                        continue
                    stat = entry.stat()
                    entries.append((entry.name, stat.st_ino, stat.st_mtime_ns, stat.st_size))
            signature[name] = tuple(sorted(entries))
        except OSError:
            signature[name] = None
    return signature


def ca_bundles(tls: McpTls | None, *, secrets_root: Path, configmaps_root: Path,
               ca_file: Path | None) -> list[str]:
    """The PEM bundles trusted besides the system's CAs: ``--ca-file``'s and a
    server's ``tls`` one."""
    bundles = file_bundles(ca_file)
    if tls is not None:
        kind, ca = tls.ca()
        root = secrets_root if kind == "Secret" else configmaps_root
        path = root / ca.name / ca.key
        bundles.append(_pem(path, f"tls: key {ca.key} of {kind} {ca.name} (at {path})"))
    return bundles


def file_bundles(ca_file: Path | None) -> list[str]:
    """The PEM bundle of ``--ca-file`` (none without one)."""
    return [] if ca_file is None else [_pem(ca_file, f"the CA file {ca_file}")]


def _pem(path: Path, what: str) -> str:
    try:
        with path.open("rb") as handle:
            raw = handle.read(_MAX_CA_BYTES + 1)
    except OSError:
        raise SecretMissing(f"{what} is not mounted") from None
    if len(raw) > _MAX_CA_BYTES:
        raise SecretMissing(f"{what} is larger than {_MAX_CA_BYTES} bytes")
    return raw.decode("utf-8", "replace")


def file_signature(path: Path | None) -> object:
    """What changes when a mounted file is replaced (kubelet swaps it)."""
    if path is None:
        return None
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)
