"""A Skill's MCP server (``spec.mcpServers[]``): where it is, how it is reached
(headers, TLS, environment), which of its tools are kept and how often it is
discovered (docs/api.md, MCP servers)."""

from __future__ import annotations

import fnmatch
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from skillop.model.canonical import canonical_json
from skillop.model.credentials import USERINFO_PATTERN, has_userinfo
from skillop.model.durations import DURATION_PATTERN, MAX_NANOS, duration_nanos
from skillop.model.exchange import TokenExchange
from skillop.model.names import (
    ObjectRef,
)
from skillop.model.serverkeys import CaSource, ServerKey
from skillop.model.specbase import (
    MAX_LIST,
    MAX_TOOLS_PER_LIST,
    Rule,
    SpecModel,
    cel_rules,
    check_rules,
    empty_dict,
    empty_list,
    field_rules,
    one_of,
)
from skillop.model.toolspecs import (
    DeclaredMcpTool,
    Glob,
    ObjectName,
    Override,
    ServerName,
    ServerToolName,
)
from skillop.model.urls import normal_url


class SecretRef(SpecModel):
    """A Secret in the Skill's namespace."""

    name: ObjectName
    """The Secret's name."""


class HeadersFrom(SpecModel):
    """HTTP headers taken from a Secret."""

    secret_ref: SecretRef
    """A Secret in the Skill's namespace whose keys are HTTP headers, sent on
    discovery and by pods; values never leave the Secret."""


#: A key of a ConfigMap's or Secret's data (what the API server allows there).
DataKey = Annotated[str, StringConstraints(pattern=r"^[-._a-zA-Z0-9]+$", max_length=253)]


class CaKeyRef(SpecModel):
    """A key of a ConfigMap or Secret in the Skill's namespace holding PEM CA certificates."""

    name: ObjectName
    """The ConfigMap's or Secret's name."""
    key: DataKey = "ca.crt"
    """The key holding the PEM bundle; default ca.crt."""


_TLS_RULES = (one_of("caConfigMapRef", "caSecretRef"),)


class McpTls(SpecModel):
    """Trust for an https server signed by a private CA, besides the system's CAs."""

    model_config = ConfigDict(json_schema_extra=cel_rules(*_TLS_RULES))

    ca_config_map_ref: CaKeyRef | None = None
    """A ConfigMap key holding the PEM CA bundle."""
    ca_secret_ref: CaKeyRef | None = None
    """A Secret key holding the PEM CA bundle."""

    @model_validator(mode="after")
    def _rules_hold(self) -> McpTls:
        return check_rules(self, _TLS_RULES)

    def ca(self) -> tuple[Literal["ConfigMap", "Secret"], CaKeyRef]:
        """The CA bundle's reference: the ConfigMap's or the Secret's key (the rules
        hold exactly one)."""
        if self.ca_config_map_ref is not None:
            return "ConfigMap", self.ca_config_map_ref
        assert self.ca_secret_ref is not None
        return "Secret", self.ca_secret_ref

    def source(self, namespace: str) -> CaSource:
        """The CA reference as a listing's key holds it (with the Skill's namespace)."""
        kind, ref = self.ca()
        return CaSource(kind, ObjectRef(namespace, ref.name), ref.key)


class SecretKeySelector(SpecModel):
    """One key of a Secret in the Skill's namespace."""

    name: ObjectName
    """The Secret's name."""
    key: DataKey
    """The key in the Secret."""


class EnvVarSource(SpecModel):
    """Where an environment variable's value comes from."""

    secret_key_ref: SecretKeySelector
    """A key of a Secret in the Skill's namespace, carried as a reference for the pod
    running the server; skillop never reads it."""


_ENV_RULES = (one_of("value", "valueFrom"),)


class EnvVar(SpecModel):
    """An environment variable for a stdio server: a public value or a Secret key reference."""

    # ``value`` is copied into every ConfigMap reaching the skill; ``valueFrom`` is
    # carried into the ToolSet as the reference it is, for the pod running the
    # server to resolve: skillop never reads it.

    model_config = ConfigDict(json_schema_extra=cel_rules(*_ENV_RULES))

    name: Annotated[str, StringConstraints(min_length=1, max_length=256)]
    """The variable's name."""
    value: Annotated[str, StringConstraints(max_length=4096)] | None = None
    """A public value, copied into every ConfigMap reaching the skill; use valueFrom
    for secrets."""
    value_from: EnvVarSource | None = None
    """A Secret key reference, resolved by the pod that runs the server."""

    @model_validator(mode="after")
    def _rules_hold(self) -> EnvVar:
        return check_rules(self, _ENV_RULES)


class ToolFilter(SpecModel):
    """Which of a server's tools the skill takes, by globs over tool names."""

    include: list[Glob] = Field(default_factory=empty_list, max_length=MAX_LIST)
    """When set, only tools matching one of these globs are taken."""
    exclude: list[Glob] = Field(default_factory=empty_list, max_length=MAX_LIST)
    """Tools matching one of these globs are dropped."""

    def admits(self, name: str) -> bool:
        if self.include and not any(fnmatch.fnmatchcase(name, g) for g in self.include):
            return False
        return not any(fnmatch.fnmatchcase(name, g) for g in self.exclude)


Transport = Literal["streamable-http", "sse", "stdio"]
#: Polling a server more often than this costs every namespace sharing it a
#: reconnect for nothing: a server that changes more often should announce
#: ``tools.listChanged``, which is followed at once.
MIN_REFRESH_SECONDS = 10
#: The floor, for the API server (CEL's duration() parses Go durations, a superset
#: of the pattern, and fails beyond Go's range) and the models alike.
REFRESH_FLOOR: Rule[str] = Rule(
    f"duration(self) >= duration('{MIN_REFRESH_SECONDS}s')",
    f"refreshInterval must be at least {MIN_REFRESH_SECONDS}s",
    lambda text: duration_nanos(text) >= MIN_REFRESH_SECONDS * 10**9,
    detail=lambda text: f"not {text}")


def _within_go_range(text: str) -> str:
    # The API server refuses these too: CEL's duration() fails beyond Go's range.
    if duration_nanos(text) > MAX_NANOS:
        raise PydanticCustomError(
            "too_long", "refresh interval {d} is longer than a Kubernetes duration can be",
            {"d": text})
    return text


Duration = Annotated[str, StringConstraints(pattern=DURATION_PATTERN, max_length=32),
                     AfterValidator(_within_go_range), *field_rules(REFRESH_FLOOR)]


_SERVER_RULES: tuple[Rule[Any], ...] = (
    one_of("url", "command"),
    Rule("!has(self.command) || !has(self.transport) || self.transport == 'stdio'",
         "a command server uses transport stdio",
         lambda server: server.command is None or server.transport in (None, "stdio"),
         detail=lambda server: f"not {server.transport}"),
    Rule("!has(self.url) || !has(self.transport) || self.transport != 'stdio'",
         "a url server cannot use transport stdio",
         lambda server: server.url is None or server.transport != "stdio"),
    # docs/api.md: tools are required for stdio, since the operator never runs one.
    Rule("!has(self.command) || (has(self.tools) && size(self.tools) > 0)",
         "a stdio server (command) declares its tools: the operator never runs it",
         lambda server: server.command is None or bool(server.tools)),
    # Fields of the other kind of server would be dropped without a word.
    Rule("!has(self.url) || ((!has(self.args) || size(self.args) == 0)"
         " && (!has(self.env) || size(self.env) == 0))",
         "args and env are for stdio servers (command), not url ones",
         lambda server: server.url is None or not (server.args or server.env)),
    Rule("!has(self.command) || (!has(self.headersFrom) && !has(self.tls))",
         "headersFrom and tls are for url servers, not stdio ones (command)",
         lambda server: server.command is None or (server.headers_from is None
                                                   and server.tls is None)),
    # Only the gateway's own streamable-HTTP calls carry a header per call; an SSE
    # session or a stdio child has one set of credentials for every caller.
    Rule("!has(self.tokenExchange) || (has(self.url) && (!has(self.transport)"
         " || self.transport == 'streamable-http'))",
         "tokenExchange is for streamable-http url servers",
         lambda server: server.token_exchange is None or (
             server.url is not None and server.effective_transport == "streamable-http"),
         detail=lambda server: f"not {server.effective_transport}"),
)


#: The fields saying how a server is reached: the ToolSet's ``ServerEntry`` carries
#: each as written (``resolve.toolset.server_entry``), a listing's key holds each
#: unless ``UNKEYED`` says why not. A field of neither tuple fails a test.
CONNECTION_FIELDS = ("url", "transport", "command", "args", "env", "headers_from", "tls",
                     "token_exchange")
#: The fields saying which of its tools a skill takes, and how often: the set
#: holds their effect on the tools, not the fields.
SELECTION_FIELDS = ("name", "tools", "tool_filter", "overrides", "pin", "refresh_interval")
#: Connection fields that only a command (stdio) server has, by its rules: the set
#: carries them for stdio servers only (and the others for url ones only).
STDIO_FIELDS = ("command", "args", "env")
#: Connection fields a listing's key leaves out, and why.
UNKEYED = {
    "transport": "one listing per URL: the watch speaks the first naming Skill's transport",
    **{name: "stdio servers are never listed" for name in STDIO_FIELDS},
    "token_exchange": "calls only: a listing is the gateway's own, never made for a caller",
}
#: Settings the key holds in slots of its own (by camelCase path): the URL in
#: normal form, the Secret and the CA source with the Skill's namespace.
_KEY_SLOTS = ("url", "headersFrom", "tls.caConfigMapRef", "tls.caSecretRef")


def _leaves(value: Any, path: str) -> list[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        return [leaf for key, item in value.items() for leaf in _leaves(item, f"{path}.{key}")]
    return [(path, value)]


class McpServer(SpecModel):
    """An MCP server whose tools (all of them, filtered) the skill includes."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [
        *(rule.cel_rule for rule in _SERVER_RULES),
        {"rule": f"!has(self.url) || !self.url.matches('{USERINFO_PATTERN}')",
         "message": "url must not carry credentials (user:password@); name a Secret in"
                    " headersFrom instead"},
    ]})

    name: ServerName
    """The server's name, unique within the skill."""
    url: Annotated[str, StringConstraints(pattern=r"^https?://", max_length=2048)] | None = None
    """The server's http(s) URL, without user:password@ (use headersFrom); exactly
    one of url and command."""
    transport: Transport | None = None
    """streamable-http (default for url), sse, or stdio (default for command)."""
    command: list[Annotated[str, StringConstraints(max_length=4096)]] | None = Field(
        default=None, min_length=1, max_length=64
    )
    """A stdio server's command line, never run by the operator (declare its tools);
    exactly one of url and command."""
    args: list[Annotated[str, StringConstraints(max_length=4096)]] = Field(
        default_factory=empty_list, max_length=256
    )
    """Arguments to command."""
    env: list[EnvVar] = Field(default_factory=empty_list, max_length=256)
    """Environment of a stdio server: public values or Secret key references."""
    headers_from: HeadersFrom | None = None
    """A Secret whose keys are HTTP headers, for discovery and for pods."""
    tls: McpTls | None = None
    """A PEM CA bundle to trust, for an https server signed by a private CA."""
    token_exchange: TokenExchange | None = None
    """Call the server with a token exchanged for the caller's (RFC 8693) at the
    issuer of the Actor's spec.callers, in place of the same header of headersFrom;
    a call without a verified caller is refused. streamable-http url servers only."""
    tools: list[DeclaredMcpTool] = Field(default_factory=empty_list, max_length=MAX_TOOLS_PER_LIST)
    """Declared tools: required for stdio servers, and used whenever the server has
    not been listed successfully."""
    tool_filter: ToolFilter | None = None
    """Include and exclude globs over the server's tool names."""
    overrides: dict[ServerToolName, Override] = Field(
        default_factory=empty_dict, max_length=MAX_TOOLS_PER_LIST
    )
    """By tool name: description, title and capabilities, set freely (this skill
    declares the server)."""
    pin: bool = False
    """Keep the accepted tool definitions: changed tools are withheld (PinViolation)
    until accepted."""
    refresh_interval: Duration | None = None
    """How often the server is listed again, e.g. 5m; at least 10s. Default:
    the Skill's refreshInterval."""

    @field_validator("url")
    @classmethod
    def _no_userinfo(cls, url: str | None) -> str | None:
        # The message never repeats the URL: it holds the password.
        if url is not None and has_userinfo(url):
            raise PydanticCustomError(
                "userinfo", "url must not carry credentials (user:password@); name a Secret"
                " in headersFrom instead", {})
        return url

    @model_validator(mode="after")
    def _rules_hold(self) -> McpServer:
        return check_rules(self, _SERVER_RULES)

    @property
    def effective_transport(self) -> Transport:
        if self.transport is not None:
            return self.transport
        return "streamable-http" if self.url is not None else "stdio"

    @property
    def endpoint(self) -> str:
        """What identifies the server: its URL (RFC 3986 normal form), or its command line."""
        if self.url is not None:
            return normal_url(self.url)
        return " ".join([*(self.command or []), *self.args])

    def discovery_key(self, namespace: str) -> ServerKey | None:
        """What this server's live tool list is keyed by, for a Skill in ``namespace``.

        None for stdio servers, which are never contacted. The Secret named by
        ``headersFrom`` lives in the Skill's namespace.
        """
        if self.url is None:
            return None
        secret = (ObjectRef(namespace, self.headers_from.secret_ref.name)
                  if self.headers_from is not None else None)
        ca = self.tls.source(namespace) if self.tls is not None else None
        return ServerKey(normal_url(self.url), secret, ca, self._key_options(), tls=self.tls)

    def _key_options(self) -> tuple[tuple[str, str], ...]:
        """The connection settings, set away from their defaults, that no slot of
        the key holds: ``(camelCase path, canonical JSON)``, sorted."""
        keyed = set(CONNECTION_FIELDS) - set(UNKEYED)
        written = self.model_dump(mode="json", by_alias=True, exclude_defaults=True,
                                  include=keyed)
        leaves = [leaf for key, value in written.items() for leaf in _leaves(value, key)]
        return tuple(sorted(
            (path, canonical_json(value)) for path, value in leaves
            if not any(path == slot or path.startswith(f"{slot}.") for slot in _KEY_SLOTS)))
