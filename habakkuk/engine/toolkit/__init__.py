"""Tool registry, permission modes and approvals."""
