"""The HTTP surface: JSON API, web chat, OpenAI-compatible API, webhooks, metrics, dashboard.

Everything here reaches the engine through the `Runtime` facade and its events
bus; `HttpServer` (in app.py) is started by `Runtime.start_http()`.
"""
