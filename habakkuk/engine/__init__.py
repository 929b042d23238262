"""The durable core: config, home, storage, jobs, sessions, events, models, tools, the turn loop.

Nothing in this package imports the UI, the server, channels or the built-in tools;
those plug into the registries defined here.
"""
