@cluster
Feature: The cluster keeps every Actor's tools up to date
  As someone who writes Skills, I apply them with kubectl; the cluster refuses what
  cannot work and the operator writes each Actor's tools into its ConfigMap, and
  rewrites it when anything the Actor reaches changes.

  Background:
    Given the full-stack-dev Skills are applied to the cluster

  Scenario: The developer's ConfigMap holds the whole hierarchy
    Then the ConfigMap of the Actor "team-a/developer" soon has these tools:
      | tool                | source      | reached through                                |
      | run_pytest          | tool        | full-stack-dev > testing                       |
      | tag_image           | mcp         | full-stack-dev > devops-toolkit > docker-tools |
      | release-notes       | agent_skill | full-stack-dev > devops-toolkit > deploy       |
      | git_log             | builtin     | full-stack-dev > code-analysis > read-only-git |
      | team-a/testing.lint | anonymous   | full-stack-dev > testing                       |

  Scenario: A change deep in the hierarchy reaches the Actor's ConfigMap
    When the Skill "team-a/deploy" gains an inline tool "rollback" that says "Roll back the last release."
    Then the ConfigMap of the Actor "team-a/developer" soon has these tools:
      | tool     | source    | reached through                          |
      | rollback | anonymous | full-stack-dev > devops-toolkit > deploy |

  Scenario: A cycle is refused at apply
    When I apply the Skill "team-a/deploy" including "full-stack-dev"
    Then the cluster refuses it with "spec.includes[0].skill: CycleDetected: include cycle: team-a/deploy -> team-a/full-stack-dev -> team-a/devops-toolkit -> team-a/deploy"
    And the Skill "team-a/deploy" in the cluster includes nothing

  Scenario: A SkillPolicy narrows what the reviewer gets
    Given the ConfigMap of the Actor "team-a/reviewer" soon has these tools:
      | tool                | source    | reached through          |
      | team-a/testing.lint | anonymous | full-stack-dev > testing |
    When the admins of "team-a" apply a SkillPolicy that denies the source "anonymous"
    Then the ConfigMap of the Actor "team-a/reviewer" soon does not have "team-a/testing.lint" or "team-a/code-analysis.lint"
    And the ConfigMap of the Actor "team-a/reviewer" soon has these tools:
      | tool      | source  | reached through           |
      | read_file | builtin | full-stack-dev > file-ops |
