"""Search documents from (skill, tool name, description) triples, for the tests of
the abstention's checks (tests/unit/test_abstain.py, test_actions.py)."""

from __future__ import annotations

from skillop.gateway.search import Document


def documents(*specs: tuple[str, str, str]) -> list[Document]:
    """One ``Document`` a triple, keyed ``skill/name``."""
    return [Document(f"{skill}/{name}", name, skill=skill, description=text)
            for skill, name, text in specs]
