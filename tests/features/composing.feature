Feature: An Actor composed from a hierarchy of Skills
  As someone who writes Skills, I build an Actor's tools from small Skills that
  include one another, and I read what the Actor gets with the skillop command
  before anything reaches a cluster.

  The hierarchy is the design's full-stack-dev (examples/30-skills.yaml): file-ops,
  code-analysis (which includes platform/read-only-git), testing, and
  devops-toolkit, which includes docker-tools and deploy. The docker tools come
  from a live MCP server.

  Background:
    Given the full-stack-dev Skills from the examples

  Scenario: The developer gets tools from all five sources
    When I list the tools of the Actor "team-a/developer", asking the MCP servers
    Then the Actor has these tools:
      | tool                | source      | reached through                                |
      | run_pytest          | tool        | full-stack-dev > testing                       |
      | tag_image           | mcp         | full-stack-dev > devops-toolkit > docker-tools |
      | release-notes       | agent_skill | full-stack-dev > devops-toolkit > deploy       |
      | git_log             | builtin     | full-stack-dev > code-analysis > read-only-git |
      | team-a/testing.lint | anonymous   | full-stack-dev > testing                       |
    And the Actor does not have "system_prune"

  Scenario: Two Skills ship a tool of the same name and both are kept, qualified
    When I list the tools of the Actor "team-a/developer"
    Then the Actor has these tools:
      | tool                      | source    | reached through               |
      | team-a/code-analysis.lint | anonymous | full-stack-dev > code-analysis |
      | team-a/testing.lint       | anonymous | full-stack-dev > testing       |
    And the Actor does not have "lint"

  Scenario: An override at inclusion changes the tool for the including Skill only
    When I list the tools of the Actor "team-a/developer"
    Then "push_image" requires approval
    And "push_image" is still the MCP server "docker"'s tool "push_image"
    When I flatten the Skill "team-a/docker-tools"
    Then "push_image" does not require approval

  Scenario: A cycle is refused before it is applied
    Given the Skill "team-a/deploy" also includes "full-stack-dev"
    When I validate the manifests
    Then validation fails with "CycleDetected: include cycle: team-a/deploy -> team-a/full-stack-dev -> team-a/devops-toolkit -> team-a/deploy"

  Scenario: A reviewer's access policy keeps the devops and writing tools away
    When I list the tools of the Actor "team-a/reviewer"
    Then the Actor has these tools:
      | tool      | source  | reached through                                |
      | read_file | builtin | full-stack-dev > file-ops                      |
      | git_log   | builtin | full-stack-dev > code-analysis > read-only-git |
    And the Actor does not have "push_image", "kubectl_apply", "release-notes", "write_file" or "git_commit"
    When I ask why the Actor "team-a/reviewer" has no "push_image"
    Then I am told "it is declared by skill team-a/docker-tools, reached through skill team-a/devops-toolkit, which was pruned: denied by skillAccessPolicy.deny '*/devops-*'"
