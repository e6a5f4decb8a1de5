Feature: The gateway lets an Actor call only the tools it was given
  As someone who writes Skills, I rely on the gateway in the Actor's pod: it
  serves the Actor's tool set over MCP and refuses a call of anything else, so
  that a tool left out by a filter or a policy cannot be called by name.

  Background:
    Given the full-stack-dev Skills from the examples

  Scenario: A call of a tool in the set reaches its MCP server
    Given the gateway serves the tool set of the Actor "team-a/developer"
    When the Actor calls "list_images"
    Then the call is answered
    And the MCP server received a call of "list_images"

  Scenario: A tool the Skill filtered out cannot be called by name
    Given the gateway serves the tool set of the Actor "team-a/developer"
    When the Actor calls "system_prune"
    Then the call is refused with "Unknown tool: system_prune"
    And the MCP server received no call of "system_prune"

  Scenario: A reviewer cannot call a tool its access policy removed
    Given the gateway serves the tool set of the Actor "team-a/reviewer"
    When the Actor calls "push_image"
    Then the call is refused with "Unknown tool: push_image"
    And the MCP server received no call of "push_image"
