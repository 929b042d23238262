"""[SILENT]: the one word for "say nothing", wherever it is said.

A reply of exactly this is never sent (a schedule's run with nothing to report, a script
printing it); a failed job's error that starts with it is not told as an error (a turn a
spending limit paused: the budget tells the chat once per period instead). The channels,
the schedules, the budget and the job queue's error lists all read the same word.
"""

from __future__ import annotations

SILENT = "[SILENT]"
