"""The pure resolver: graph, flattening, overrides, conflicts, policy, ToolSet."""
