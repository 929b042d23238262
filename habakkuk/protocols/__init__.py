"""Protocols Habakkuk speaks with other programs (MCP first)."""
