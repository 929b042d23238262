"""The configs Habakkuk writes for a new user: `habakkuk init`, the setup screen's demo, --smoke.

They live in the engine (below the CLI and the terminal app) because both the
`init` command and the setup screen write them. The starter leaves `toolsets:` out, so
its agent gets the default of the version that runs it (engine/toolsets.py).
"""

# The line with which the starter config of earlier versions pinned two toolsets, its
# words as written: `habakkuk setup` drops that pin from the agent it rewrites, so a home
# begun with the demo gets the default (a list the user wrote is kept).
OLD_STARTER_TOOLSETS_LINE = "toolsets: [core, memory] # files, commands, web; notes about you"


def has_old_starter_pin(config_text: str) -> bool:
    """Whether `config_text` still holds the old starter's `toolsets:` line (spacing aside)."""
    return any(
        " ".join(line.split()) == OLD_STARTER_TOOLSETS_LINE for line in config_text.splitlines()
    )


STARTER_CONFIG = """\
# Habakkuk config. Unknown keys are errors; `habakkuk doctor` checks this file.
#
# Providers are model services. `demo` works offline: it replays a script and
# otherwise echoes you. Uncomment a real one and point an agent at it.
providers:
  demo:
    type: mock
  # anthropic:
  #   type: anthropic
  #   key_env: ANTHROPIC_API_KEY       # the variable holding the key (.env works too)
  # openai:
  #   type: openai
  #   key_env: OPENAI_API_KEY
  # local:
  #   preset: ollama                   # or lmstudio, vllm, llamacpp: no key needed

# Agents: a model chain, a permission mode and a workspace each.
agents:
  habakkuk:
    model: demo/tour                   # PROVIDER/MODEL, e.g. anthropic/claude-sonnet-4-6
    # fallbacks: [openai/gpt-5-mini]   # tried in order when the model fails
    mode: workspace                    # read-only | ask | workspace | full
    # workspace: ~/projects            # default: HOME/agents/habakkuk/workspace
    # toolsets: [core, "mcp:files"]    # only these; left out, the agent gets the default
    #                                  # toolsets and every MCP server (see the README)

timezone: UTC                          # Area/City, used for the time the agent sees
"""

SMOKE_CONFIG = """\
providers:
  mock:
    type: mock
    script:
      - text: "Let me look at the workspace."
        tool_calls:
          - name: list_dir
            arguments: {path: "."}
      - text: "smoke reply: the workspace is ready."
agents:
  smoke:
    model: mock/smoke
    mode: read-only
"""
