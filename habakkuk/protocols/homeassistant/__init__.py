"""Home Assistant (spec 000 "Home Assistant"): the toolset over its REST API (tools.py,
rules.py, rest.py) and event triggers over its WebSocket API in `habakkuk serve`
(events.py, stream.py, triggers.py)."""
