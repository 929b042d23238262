"""What an agent knows: memory notes, the user profile, the identity (later skills, plugins).

Services and their tools; above the built-in tools, below the command layer and every
surface (see the layers contract in pyproject.toml).
"""
