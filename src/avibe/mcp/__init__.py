"""MCP servers give Vibey their tools (adapters; docs/mcp.md), through the official SDK (`mcp`).

`config` the `[mcp.servers.NAME]` tables and the peers' files (pure), `edit` those tables in the
person's config.toml (pure), `client` one server's connection on the session's event loop (start, list,
call with timeout and cancellation, bounded restarts), `launch` stdio under the shell's sandbox or
streamable HTTP, `tools` the servers' tools as `NAME.tool` and their results as tool output, `servers`
a session's servers and their state for `/mcp`. The SDK is imported only where a server is reached.
"""
