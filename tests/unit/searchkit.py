"""Search documents for the tests of the search's modules: from (skill, tool name,
description) triples (the abstention's tests), and four tools of three services with
twins across two of them (the learned order's tests: test_fusion.py, test_ranker.py)."""

from __future__ import annotations

from skillop.gateway.search import Document


def documents(*specs: tuple[str, str, str]) -> list[Document]:
    """One ``Document`` a triple, keyed ``skill/name``."""
    return [Document(f"{skill}/{name}", name, skill=skill, description=text)
            for skill, name, text in specs]


#: Two services' ``create_issue`` twins, a sibling, and another service's tool.
FOUR_TOOLS = [
    Document("gh/create_issue", "create_issue", skill="github",
             description="Create a new issue in a GitHub repository.",
             parameters="owner repo title body"),
    Document("gl/create_issue", "create_issue", skill="gitlab",
             description="Create a new issue in a GitLab project."),
    Document("gh/list_issues", "list_issues", skill="github",
             description="List issues in a GitHub repository."),
    Document("slack/post", "slack_post_message", skill="slack",
             description="Post a new message to a Slack channel."),
]
