"""MCP: servers lend their tools to agents, and Habakkuk serves its agents over MCP.

Modules: `naming` (tool names), `results` (CallToolResult -> text), `transport`
(config -> a connection), `manager` (connections, reconnects, calls), `tools`
(MCP tools as registry tools), `oauth` (sign-in and tokens), `catalog` (the
built-in list and `mcp add`), `toolsearch` (tool_search / tool_describe) and
`server` (Habakkuk as an MCP server). The `mcp` SDK is imported lazily by the
modules that talk to servers, so importing this package stays cheap.
"""
