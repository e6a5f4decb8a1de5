"""Where tools come from: built-in groups, SKILL.md documents and MCP servers."""
