"""Habakkuk inside code editors: `habakkuk acp` speaks the Agent Client Protocol on stdio
(spec 000 "Editors (ACP)"), with the `agent-client-protocol` package's connection.

- kind.py: the editors' turn kind (run only by the `habakkuk acp` process that queued it)
  and how a session records the editor's folder.
- mapping.py: what the editor is shown (tool kinds, titles, locations, replayed messages)
  and what the prompt's content blocks become.
- editor_tools.py: read_file, write_file and edit_file through the editor's buffers, and
  update_plan, in a registry that overlays the home's tools.
- session_agent.py: the protocol's agent side (sessions, prompts, permissions, cancel, load).
- runs.py: the pool of editor turns; serve.py: `habakkuk acp` put together.
"""
