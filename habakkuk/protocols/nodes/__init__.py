"""Device nodes (spec 000 "Device nodes"): other machines and browsers that lend the agents
their capabilities (notifications, screenshots, clipboard, location, files, ...).

- store.py: nodes.db (paired nodes by secret hash, one-time pairing codes).
- hub.py: the live connections of this process and the invoke round trip.
- devices.py: the hub of a runtime whose config has `nodes:` (imported only then).
- tools.py: nodes_list and node_invoke.
- client.py, capabilities.py: `habakkuk node run` on the device.
"""
