"""Kubernetes label selectors (``matchLabels``, ``matchExpressions``) and their evaluation."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from skillop.model.specbase import MAX_LIST, SpecModel, empty_dict, empty_list


class LabelSelectorRequirement(SpecModel):
    """A requirement on one label: key, operator and values."""

    key: Annotated[str, StringConstraints(min_length=1, max_length=317)]
    """The label key."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    """In, NotIn, Exists or DoesNotExist."""
    values: list[Annotated[str, StringConstraints(max_length=63)]] = Field(
        default_factory=empty_list, max_length=MAX_LIST
    )
    """The values for In and NotIn; empty for Exists and DoesNotExist."""

    def holds(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        inside = present and labels[self.key] in self.values
        return inside if self.operator == "In" else not inside


class LabelSelector(SpecModel):
    """Namespaces by their labels; every condition must hold."""

    match_labels: dict[str, str] = Field(default_factory=empty_dict, max_length=MAX_LIST)
    """Labels a namespace must carry, each with exactly this value."""
    match_expressions: list[LabelSelectorRequirement] = Field(
        default_factory=empty_list, max_length=MAX_LIST
    )
    """Requirements the namespace's labels must all meet."""

    def matches(self, labels: dict[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.match_labels.items()):
            return False
        return all(r.holds(labels) for r in self.match_expressions)
