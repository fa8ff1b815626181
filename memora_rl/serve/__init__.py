"""The memory service: retrieve/ingest over HTTP, a web page for graphs and walks, and MCP tools."""
