"""The status of Skills and Actors, as models: the one source of what a status holds.

The CRDs' status schemas are generated from these models, and the operator
builds every status it writes as one of them (``wire()`` is the body sent). A
field the schema does not know would be pruned silently by the API server, and a
list or text over a declared limit would get the whole write rejected; neither
can happen when both sides come from here. The limits are named so that the
builders cut to them (and say so) instead of failing.

Conditions follow ``metav1.Condition`` (KEP-1623): ``Ready`` is always present,
``lastTransitionTime`` changes only when a condition's status does.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from pydantic.alias_generators import to_camel

MAX_STATUS_TOOLS = 256
MAX_CONDITIONS = 16
MAX_SKILLS = 4096
MAX_WARNINGS = 64
MAX_PRUNED = 1024
MAX_SERVERS = 64
MAX_TEXT = 4096
MAX_MESSAGE = 32768
Short = Annotated[str, StringConstraints(max_length=1024)]
Text = Annotated[str, StringConstraints(max_length=MAX_TEXT)]


def clip(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` cut to ``limit`` characters, marked when cut."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


class StatusModel(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )

    def wire(self) -> dict[str, Any]:
        """The JSON body the API server gets: camelCase, unset optional fields absent."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class Condition(StatusModel):
    type: Annotated[str, StringConstraints(max_length=316)]
    status: Literal["True", "False", "Unknown"]
    reason: Annotated[str, StringConstraints(max_length=1024)]
    message: Annotated[str, StringConstraints(max_length=MAX_MESSAGE)] = ""
    observed_generation: int | None = Field(default=None, ge=0)
    last_transition_time: Annotated[str, StringConstraints(max_length=64)]


class StatusTool(StatusModel):
    name: Short
    binding_name: Short
    source: Short
    skill: Short
    qualified_name: Short | None = None
    digest: Short | None = None


class PrunedStatus(StatusModel):
    kind: Literal["Skill", "Tool"]
    name: Short
    reason: Short
    skill: Short | None = None


class McpServerStatus(StatusModel):
    name: Short
    tool_count: int = 0
    last_sync: Short | None = None
    error: Text | None = None
    url: Annotated[str, StringConstraints(max_length=2048)] | None = None
    #: sha256 of the server's current tool list (lastSync moves only when it changes).
    tools_digest: Short | None = None
    #: Pinned servers: the accepted definition digest of each tool.
    pinned_digests: dict[Short, Short] | None = Field(default=None, max_length=1024)


class CommonStatus(StatusModel):
    observed_generation: int | None = None
    conditions: list[Condition] = Field(default_factory=list, max_length=MAX_CONDITIONS)
    tool_count: int | None = None
    tools_hash: Short | None = None
    #: Absent until a tool set was resolved (an empty list is an empty tool set).
    tools: list[StatusTool] | None = Field(default=None, max_length=MAX_STATUS_TOOLS)
    skills: list[Short] = Field(default_factory=list, max_length=MAX_SKILLS)
    warnings: list[Text] = Field(default_factory=list, max_length=MAX_WARNINGS)


class ActorStatus(CommonStatus):
    config_map_name: Short | None = None
    pruned: list[PrunedStatus] = Field(default_factory=list, max_length=MAX_PRUNED)


class SkillStatus(CommonStatus):
    mcp_servers: list[McpServerStatus] = Field(default_factory=list, max_length=MAX_SERVERS)
