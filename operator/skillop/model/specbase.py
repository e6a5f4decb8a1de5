"""What every spec model shares: its configuration, list bounds, and rules stated once.

A rule that both the API server (a CEL ``x-kubernetes-validations`` entry in
the generated CRD) and the models (the CLI and the webhook, which see no CEL)
enforce is one ``Rule``: its CEL, its Python check and its one message, so the
two cannot come to mean different things or say them differently.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel, to_snake
from pydantic.config import JsonDict
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

MAX_LIST = 256
MAX_TOOLS_PER_LIST = 1024
#: Nested lists stay short: the API server bounds what a CEL rule may cost, and a
#: rule's cost is multiplied by the longest list around it.
MAX_NESTED = 64


def empty_list() -> list[Any]:
    """A list field's default: ``Field(default_factory=empty_list)``, not ``list``.

    Building a validator, pydantic reads each default factory's signature; a
    builtin's (``list``, ``dict``) is parsed from its text signature with the
    tokenizer, whose first use compiles a large regular expression: about 3% of
    a ``skillop validate`` (docs/benchmarks.md). A Python function's signature is
    read from its code.
    """
    return []


def empty_dict() -> dict[str, Any]:
    """A map field's default: ``Field(default_factory=empty_dict)`` (``empty_list``)."""
    return {}


class SpecModel(BaseModel):
    """Shared configuration: camelCase on the wire, frozen, unknown fields rejected.

    Attribute docstrings become the CRDs' field descriptions (``kubectl explain``):
    one or two sentences that agree with docs/api.md.
    """

    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True,
        # Validators are built on first use: a run that never parses a kind does
        # not pay for it at import (every CLI run imports every model).
        defer_build=True,
    )


@dataclass(frozen=True, slots=True)
class Rule(Generic[T]):
    """One validation rule: the CEL the API server runs and the check the models run,
    with one message (the Python error may add what only it knows: ``detail``)."""

    cel: str
    message: str
    holds: Callable[[T], bool]
    #: More for the Python error, from the value (the API server's message is fixed).
    detail: Callable[[T], str] | None = None

    @property
    def cel_rule(self) -> JsonDict:
        return {"rule": self.cel, "message": self.message}

    def check(self, value: T) -> T:
        """``value``, or the rule's error."""
        if self.holds(value):
            return value
        message = self.message if self.detail is None else f"{self.message}: {self.detail(value)}"
        # Braces in a message are pydantic's placeholders; none of ours have any.
        raise PydanticCustomError("rule", message, {})


def cel_rules(*rules: Rule[Any]) -> JsonDict:
    """The CRD side of ``rules``: ``json_schema_extra`` of a model or field."""
    return {"x-kubernetes-validations": [rule.cel_rule for rule in rules]}


def field_rules(*rules: Rule[Any]) -> tuple[FieldInfo | AfterValidator, ...]:
    """``Annotated`` metadata enforcing ``rules`` on a field, in the CRD and the model."""
    field: FieldInfo = Field(json_schema_extra=cel_rules(*rules))
    return (field, *(AfterValidator(rule.check) for rule in rules))


def check_rules(model: M, rules: Sequence[Rule[Any]]) -> M:
    """``model`` if every rule holds (call it from the model's after-validator)."""
    for rule in rules:
        rule.check(model)
    return model


def one_of(first: str, second: str) -> Rule[Any]:
    """Exactly one of two fields (camelCase names) is set."""
    a, b = to_snake(first), to_snake(second)
    return Rule(f"has(self.{first}) != has(self.{second})",
                f"exactly one of {first} and {second} must be set",
                lambda m: (getattr(m, a) is None) != (getattr(m, b) is None))
