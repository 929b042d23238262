"""Subscription logins: `habakkuk auth login chatgpt|copilot` and the tokens they give.

A login lives in HOME/auth.json (beside the MCP servers' `mcp:<server>` entries), under
its kind's name. A provider with `auth: chatgpt|copilot` gets its key from a
`LoginToken` (credential.py) before each attempt: the stored token while it has more
than five minutes left, else a refresh under the process lock and auth.json.lock
(store.py), so several processes share one login. chatgpt.py and copilot.py speak
the two services' sign-in and token wires; adapters.py points the Responses and Chat
Completions adapters at the subscription backends. Nothing here is imported until a
login is used.
"""
