"""The offline demo's guided tour: the mock provider's script for the model `tour`.

A new user who picks the offline demo has no model, but should still see what
Habakkuk does: a reply streaming in, a tool call that asks first, a turn
stopped with Ctrl+C, a question with lettered choices, a file written in the
workspace. Each scenario is matched on the user's words; anything else gets the
introduction, which lists what to try. A reply that follows a tool call says what
happened to it (its `after` texts): a denied or stopped command is never said to
have run.
"""

from __future__ import annotations

from typing import Any

# Seconds between streamed pieces, so the demo's replies visibly stream.
TOUR_CHUNK_DELAY = 0.012

INTRO = (
    "**Offline demo**: no model is connected, so I follow a short script. "
    "You said: {input}\n\n"
    "Try one of these:\n\n"
    "- `run a command`: a tool call that asks you first (**y** allows once, "
    "**a** for the session, **n** denies)\n"
    "- `sleep`: a slow command; approve it, then press **Ctrl+C** to stop the turn\n"
    "- `write a note`: writes a file in the workspace (no approval needed there)\n"
    "- `remember that I like tea`: a memory note, listed in every new session "
    "(**Ctrl+L** shows them)\n"
    "- `ask me something`: a question with lettered choices\n"
    "- `think it over`: thinking, shown dimmed above the reply\n"
    "- `show some markdown`: a longer reply, streamed\n\n"
    "**Ctrl+S** lists your sessions, **Ctrl+P** opens the command palette. "
    "Run `habakkuk setup` to connect Anthropic, OpenAI or any OpenAI-compatible server."
)

MARKDOWN = """\
## What Habakkuk keeps for you

Every message is a **durable job**: quit, crash or `kill -9` at any moment and
nothing committed is lost; a turn left running resumes on the next start.

| Where        | What lives there                      |
|--------------|---------------------------------------|
| transcripts  | every session, searchable (Ctrl+S)    |
| control      | the job queue, channels, approvals    |
| usage        | tokens and cost per model and agent   |

```python
# the same agent answers here, in Telegram, over HTTP and through MCP
reply = await runtime.turns.wait_turn(await runtime.turns.submit(session, "hello"))
```

1. Streamed replies render as Markdown while they arrive.
2. Tool calls show as cards; risky ones ask first.
3. `/export md` writes this conversation to a file.
"""

TOUR: list[dict[str, Any]] = [
    {
        "match": r"\b(sleep|slow|stop|cancel)\b",
        "steps": [
            {
                "text": "This command takes a minute. Approve it with **y**, then press "
                "**Ctrl+C** to stop the turn: the command is killed and the transcript "
                "records that you stopped it.",
                "tool_calls": [{"name": "exec", "arguments": {"command": "sleep 60; echo woke"}}],
            },
            {
                "text": "The command ran to the end: you let it finish.",
                "after": {
                    "denied": "You denied the command, so it did not run. Ask again and "
                    "press **y** to see a turn stopped with **Ctrl+C** while it runs.",
                    "not_run": "The command never ran: the turn was stopped while it waited "
                    "for approval.",
                    "interrupted": "The command was stopped before it finished; the "
                    "transcript records that it was interrupted.",
                    "error": "The command failed: open its card above to read why.",
                },
            },
        ],
    },
    {
        "match": r"\b(run|command|shell|exec|ls)\b",
        "steps": [
            {
                "text": "I'll run a harmless command in the workspace. Commands ask first "
                "in workspace mode.",
                "tool_calls": [
                    {
                        "name": "exec",
                        "arguments": {"command": "echo 'hello from the Habakkuk demo' && ls -a"},
                    }
                ],
            },
            {
                "text": "Done: the card above shows the command, its status and time; "
                "open it to read the whole output.",
                "after": {
                    "denied": "You denied the command, so nothing ran. Commands ask first "
                    "in workspace mode; **y** allows once, **a** for the session.",
                    "not_run": "The command never ran: the turn was stopped while it waited "
                    "for approval.",
                    "interrupted": "The command was stopped before it finished.",
                    "error": "The command failed: open its card above to read the output.",
                },
            },
        ],
    },
    {
        "match": r"\b(remember|memory|memories)\b",
        "steps": [
            {
                "text": "Saving that as a memory note.",
                "tool_calls": [
                    {
                        "name": "memory_save",
                        "arguments": {
                            "title": "Something you told the demo",
                            "content": "You asked the offline demo to remember something "
                            "(a real model would save your words).",
                            "tags": ["demo"],
                        },
                    }
                ],
            },
            {
                "text": "Saved. Every new session lists the newest notes in its prompt, so "
                "the agent knows them next time; **Ctrl+L** opens the memory screen, where "
                "you can read, edit, forget and see the history of each note.",
                "after": {
                    "denied": "Saving the note was denied; its card above says why.",
                    "error": "Saving the note failed; open its card above to see why.",
                },
            },
        ],
    },
    {
        "match": r"\b(file|write|note|save)\b",
        "steps": [
            {
                "text": "Writing a note in the workspace, then reading it back.",
                "tool_calls": [
                    {
                        "name": "write_file",
                        "arguments": {
                            "path": "notes/demo.md",
                            "content": "# A note from the Habakkuk demo\n\n"
                            "Writes inside the workspace need no approval in workspace mode.\n",
                        },
                    }
                ],
            },
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes/demo.md"}}]},
            {
                "text": "Wrote `notes/demo.md` and read it back. Writes inside the workspace "
                "run without asking in workspace mode; `/undo` puts the workspace back as it "
                "was before the turn.",
                "after": {
                    "denied": "Reading the note back was denied; its card above says why.",
                    "error": "Reading the note back failed; open its card above to see why.",
                },
            },
        ],
    },
    {
        "match": r"\b(ask|question|choose|pick)\b",
        "steps": [
            {
                "tool_calls": [
                    {
                        "name": "clarify",
                        "arguments": {
                            "questions": [
                                {
                                    "question": "Which colour should the demo's next chart use?",
                                    "choices": ["blue", "green", "orange"],
                                }
                            ]
                        },
                    }
                ]
            },
            {
                "text": "Thanks: your answer came back to me as the question's result "
                "(its card above shows it). A real model would carry on from there."
            },
        ],
    },
    {
        "match": r"\b(think|reason|plan)\b",
        "steps": [
            {
                "thinking": "The user wants to see thinking. A real model streams its "
                "reasoning here when /think sets an effort; the terminal shows it dimmed, "
                "in a block that Enter folds when it has the focus (Tab moves there).",
                "text": "That was my thinking, shown dimmed above. With a real model, "
                "`/think high` asks for more of it in this session.",
            }
        ],
    },
    {
        "match": r"\b(markdown|table|code|long|stream)\b",
        "steps": [{"text": MARKDOWN}],
    },
    {"steps": [{"text": INTRO}]},
]
