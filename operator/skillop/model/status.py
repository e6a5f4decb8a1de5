"""The status of Skills and Actors, as models: the CRDs' status schemas come from here.

Conditions follow ``metav1.Condition`` (KEP-1623): ``Ready`` is always present,
``lastTransitionTime`` changes only when a condition's status does.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from pydantic.alias_generators import to_camel

MAX_STATUS_TOOLS = 256
Short = Annotated[str, StringConstraints(max_length=1024)]


class StatusModel(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )


class Condition(StatusModel):
    type: Annotated[str, StringConstraints(max_length=316)]
    status: Literal["True", "False", "Unknown"]
    reason: Annotated[str, StringConstraints(max_length=1024)]
    message: Annotated[str, StringConstraints(max_length=32768)] = ""
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
    error: Annotated[str, StringConstraints(max_length=4096)] | None = None
    url: Annotated[str, StringConstraints(max_length=2048)] | None = None
    #: sha256 of the server's current tool list (lastSync moves only when it changes).
    tools_digest: Short | None = None
    #: Pinned servers: the accepted definition digest of each tool.
    pinned_digests: dict[Short, Short] | None = Field(default=None, max_length=1024)


class CommonStatus(StatusModel):
    observed_generation: int | None = None
    conditions: list[Condition] = Field(default_factory=list, max_length=16)
    tool_count: int | None = None
    tools_hash: Short | None = None
    tools: list[StatusTool] = Field(default_factory=list, max_length=MAX_STATUS_TOOLS)
    skills: list[Short] = Field(default_factory=list, max_length=4096)
    warnings: list[Annotated[str, StringConstraints(max_length=4096)]] = Field(
        default_factory=list, max_length=64)


class ActorStatus(CommonStatus):
    config_map_name: Short | None = None
    pruned: list[PrunedStatus] = Field(default_factory=list, max_length=1024)


class SkillStatus(CommonStatus):
    mcp_servers: list[McpServerStatus] = Field(default_factory=list, max_length=64)
