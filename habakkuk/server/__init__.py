"""The HTTP surface: JSON API, web chat, OpenAI-compatible API, webhooks, metrics, dashboard.

Everything here reaches the engine through `ServerHost` (host.py), the Protocol of
what the server uses of the runtime, and its events bus; `HttpServer` (in app.py) is
started and stopped by the runtime's HTTP listener (listener.py).
"""
