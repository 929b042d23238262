"""web_search: titles, URLs and snippets from the provider `search:` names.

One module per provider (brave, tavily, exa, searxng, duckduckgo), each speaking that
service's documented API through the shared HTTP helper (http.py), the Protocol they
share (types.py), and the tool (tool.py). Without a `search:` section the tool scrapes
DuckDuckGo's no-script page, best effort. The provider's address is the owner's choice
(config), so it is not put through fetch_url's SSRF guard; the tool itself is network
risk like fetch_url, decided the same way in every mode, and it taints the turn.
"""
