"""The configs Habakkuk writes for a new user: `habakkuk init`, the setup screen's demo, --smoke.

They live in the engine (below the CLI and the terminal app) because both the
`init` command and the setup screen write them.
"""

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
    toolsets: [core, memory]           # files, commands, web; notes about you

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
