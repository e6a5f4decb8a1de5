"""``skillop gateway``: the agent's only MCP endpoint, enforcing its tool set at call time.

The gateway runs beside the agent (a sidecar in the actor pod, the same image).
It reads the Actor's ToolSet from the mounted ConfigMap directory and the
upstream headers from mounted Secret files (never the Kubernetes API), serves
exactly the set's ``mcp`` and ``agent_skill`` tools over MCP (streamable HTTP on
a loopback port, or stdio), and forwards each call to its upstream server under
the tool's name there. Everything else is refused. See docs/gateway.md for the
trust model.

* ``served``: the mounted ToolSet, parsed into what the gateway serves;
* ``secrets``: the mounted Secret files (upstream headers, stdio env) and CA
  bundles;
* ``upstream``: one pooled MCP client session per upstream server, with its
  live listing (for rug-pull checks);
* ``caller`` and ``wire``: a call to a streamable-HTTP upstream as one plain
  JSON-RPC POST, and its answer read without trusting it;
* ``front``: plain JSON answers to the agent, before the SDK's HTTP server;
* ``audit``: one JSON line per call;
* ``search`` and ``thesaurus``: ``disclosure: Search``'s ranking of the served set
  for ``search_tools`` (BM25, blended with a sentence model's cosine when it is
  installed, and "nothing fits");
* ``embedding`` and ``vectors``: that sentence model (all-MiniLM-L6-v2 in numpy)
  and the set's vectors, computed once per text in a background thread and cached;
* ``server``: the MCP server, the call path and hot reload.
"""
