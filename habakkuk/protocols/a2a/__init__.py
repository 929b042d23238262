"""Agent2Agent (spec 000 "Agent2Agent"): the wire both versions share, the Agent Cards, the
a2a-sdk client behind the a2a toolset. The server's routes are habakkuk/server/a2a_api.py."""
