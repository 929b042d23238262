"""`habakkuk memory list|search|show|add|forget|trust|history|restore|reindex`.

The parser is declared with the standard library only (habakkuk/cli/entry.py builds it);
running a command opens the runtime and goes through `runtime.memory` (MemoryAccess).
`--json` prints the HTTP API's shapes (habakkuk.knowledge.memory_views). A user error
(unknown agent, note or change, a refused secret) is one line on stderr and an exit code
from engine/exit_codes.py, through entry.main's handling of HabakkukError.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from habakkuk.engine.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE, error_line, exit_code
from habakkuk.engine.i18n import t

if TYPE_CHECKING:
    from habakkuk.knowledge.memory_types import MemoryAccess, NoteSummary

ACTIONS = ("list", "search", "show", "add", "forget", "trust", "history", "restore", "reindex")
KINDS = ("note", "profile", "identity", "skill")  # argparse's choices (memory_views.CHANGE_KINDS)


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= 10_000:
        raise argparse.ArgumentTypeError(f"must be from 1 to 10000, not {value}")
    return value


def add_arguments(command: str, memory: argparse.ArgumentParser) -> None:
    """Declare the actions of `habakkuk memory` (entry.py declares the command itself)."""
    actions = memory.add_subparsers(dest="memory_command", metavar="ACTION")

    def action(name: str, about: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = actions.add_parser(name, help=about)
        parser.add_argument("--agent", help="agent name (default: the first agent)")
        parser.add_argument("--json", action="store_true", help="print the API's JSON")
        return parser

    listing = action("list", "notes, newest first")
    listing.add_argument("--limit", type=_count, default=50)
    search = action("search", "ranked matches with a snippet")
    search.add_argument("query", nargs="*", help="words to find")
    search.add_argument("--tags", default="", help="only notes with every tag: a,b")
    search.add_argument("--limit", type=_count, default=10)
    show = action("show", "one note with its body")
    show.add_argument("slug")
    add = action("add", "save a note (content from the argument, or standard input)")
    add.add_argument("title")
    add.add_argument("content", nargs="*", help="the note (none, or -, reads standard input)")
    add.add_argument("--tags", default="", help="tags: a,b")
    forget = action("forget", "move a note to memory/.trash/")
    forget.add_argument("slug")
    trust = action("trust", "vouch for an untrusted note")
    trust.add_argument("slug")
    history = action("history", "changes, newest first; with an ID, one change and its diff")
    history.add_argument("id", nargs="?", help="a change id (four characters are enough)")
    history.add_argument("--file", help="a slug, USER.md, IDENTITY.md or a skill name")
    history.add_argument("--kind", choices=KINDS)
    history.add_argument("--since", help="7d, 12h or a date")
    history.add_argument("--limit", type=_count, default=50)
    restore = action("restore", "put back the content before a change (--after: after it)")
    restore.add_argument("id")
    restore.add_argument("--after", action="store_true", help="redo instead of undo")
    reindex = action("reindex", "bring the index up to date with the files")
    reindex.add_argument("--full", action="store_true", help="rebuild the index from scratch")


def main(args: argparse.Namespace) -> int:
    """Run `habakkuk memory ACTION` (the exit code)."""
    if args.memory_command not in ACTIONS:
        print("habakkuk: memory: give an action: " + ", ".join(ACTIONS), file=sys.stderr)
        return EXIT_USAGE
    content = None
    if args.memory_command == "add":
        content = _content(args.content)
        if content is None:
            return EXIT_USAGE
    import asyncio  # not at module level: `habakkuk --help` builds this parser

    return asyncio.run(_main(args, content))


def _content(words: list[str]) -> str | None:
    """`add`'s content: the words, or standard input for none (or -); None when empty."""
    if words in ([], ["-"]):
        if not words and sys.stdin.isatty():
            print("habakkuk: memory add: give the content, or pipe it in", file=sys.stderr)
            return None
        text = sys.stdin.read().strip()
    else:
        text = " ".join(words).strip()
    if not text:
        print("habakkuk: memory add: the content is empty", file=sys.stderr)
        return None
    return text


async def _main(args: argparse.Namespace, content: str | None) -> int:
    from habakkuk.engine.errors import NotFound
    from habakkuk.runtime import Runtime

    runtime = await Runtime.open()
    try:
        agent = runtime.config.agent(args.agent).name  # ConfigError for an unknown agent
        try:
            return await _act(runtime.memory, agent, args, content)
        except NotFound as exc:  # a note or change the user named
            print(error_line(f"memory {args.memory_command}", exc), file=sys.stderr)
            return exit_code(exc)
    finally:
        await runtime.close()


def _out(data: Any) -> None:
    import json

    print(json.dumps(data, ensure_ascii=False, indent=2))


def _line(note: NoteSummary) -> str:
    tags = f"  [{', '.join(note.tags)}]" if note.tags else ""
    from habakkuk.knowledge.memory_views import PARTIAL_MARK

    mark = "  (untrusted)" if note.untrusted else ""
    if note.partial:
        mark += f"  {PARTIAL_MARK}"
    return f"{note.slug:<32} {note.updated}  {note.title}{tags}{mark}"


async def _act(
    memory: MemoryAccess, agent: str, args: argparse.Namespace, content: str | None
) -> int:
    from habakkuk.knowledge import memory_views as views
    from habakkuk.knowledge.memory_types import Provenance, RestoreVersion

    user = Provenance(by="user", tool="cli")
    action = args.memory_command
    if action in ("list", "search", "show"):
        return await _read(memory, agent, args)
    if action == "add":
        assert content is not None
        given = list(views.parse_tags(args.tags)) or None
        saved = await memory.save(agent, args.title, content, tags=given, provenance=user)
        if args.json:
            _out({**views.note_json(saved.note), "created": saved.created})
        else:
            verb = "unchanged" if saved.unchanged else "saved" if saved.created else "replaced"
            print(t(f"cli.memory.{verb}", slug=saved.note.slug))
        return EXIT_OK
    if action in ("forget", "trust"):
        if action == "forget":
            done: NoteSummary = await memory.forget(agent, args.slug, provenance=user)
        else:
            done = await memory.trust(agent, args.slug, provenance=user)
        if args.json:
            _out(views.note_json(done))
        else:
            print(
                t(
                    "cli.memory.forgot" if action == "forget" else "cli.memory.trusted",
                    slug=done.slug,
                )
            )
        return EXIT_OK
    if action == "history":
        return await _history(memory, agent, args)
    if action == "restore":
        version: RestoreVersion = "after" if args.after else "before"
        result = await memory.restore(agent, args.id, version=version, provenance=user)
        if args.json:
            _out(views.restore_json(result))
        elif result.unchanged or result.restored is None:
            print(t("cli.memory.restore_unchanged", id=args.id))
        else:
            print(t("cli.memory.restored", name=result.restored.name, id=result.restored.id))
        return EXIT_OK
    stats = await memory.reindex(agent, full=args.full)
    if args.json:
        _out(views.reindex_json(stats))
    else:
        print(
            t(
                "cli.memory.reindexed",
                scanned=stats.scanned,
                updated=stats.updated,
                removed=stats.removed,
                seconds=f"{stats.seconds:.3f}",
            )
        )
    return EXIT_OK


async def _read(memory: MemoryAccess, agent: str, args: argparse.Namespace) -> int:
    """`memory list`, `search` and `show`: they change nothing."""
    from habakkuk.knowledge import memory_views as views

    action = args.memory_command
    if action == "list":
        notes, total = await memory.list_notes(agent, limit=args.limit)
        if args.json:
            _out(views.notes_json(notes, total))
        else:
            for note in notes:
                print(_line(note))
            more = total - len(notes)
            shown = t("cli.memory.count", count=total)
            if more > 0:
                shown += t("cli.memory.not_shown", count=more)
            print(shown, file=sys.stderr)
        return EXIT_OK
    if action == "search":
        query = " ".join(args.query)
        tags = views.parse_tags(args.tags)
        if not query.strip() and not tags:
            print(error_line("memory search", t("cli.memory.search_empty")), file=sys.stderr)
            return EXIT_USAGE
        hits = await memory.search(agent, query, tags=tags, limit=args.limit)
        if args.json:
            _out(views.hits_json(hits))
        else:
            for hit in hits:
                print(f"{_line(hit.note)}\n    {hit.snippet}")
            if not hits:
                wanted = repr(query or args.tags)
                print(t("cli.memory.no_match", agent=agent, query=wanted), file=sys.stderr)
        return EXIT_OK if hits else EXIT_FAILED
    note = await memory.read(agent, args.slug)  # show
    if args.json:
        _out(views.note_json(note))
    else:
        print(_line(note))
        if note.partial:
            print(f"habakkuk: memory show: {views.PARTIAL_WORDS}", file=sys.stderr)
        print()
        print(note.body)
    return EXIT_OK


async def _history(memory: MemoryAccess, agent: str, args: argparse.Namespace) -> int:
    from habakkuk.knowledge import memory_views as views

    if args.id:
        detail = await memory.change(agent, args.id)
        if args.json:
            _out(views.change_detail_json(detail))
        else:
            c = detail.change
            taint = " tainted" if c.tainted else ""
            print(f"{c.id}  {c.at}  {c.op} {c.path} by {c.by}{taint}  {c.note}".rstrip())
            print(detail.diff or t("cli.memory.no_difference"))
        return EXIT_OK
    changes = await memory.history(
        agent,
        name=args.file,
        kind=views.change_kind(args.kind),
        since=args.since,
        limit=args.limit,
    )
    if args.json:
        _out(views.history_json(changes, await views.pins(memory, agent)))
        return EXIT_OK
    for c in changes:
        taint = " (tainted)" if c.tainted else ""
        print(f"{c.id}  {c.at}  {c.op:<7} {c.kind:<8} {c.name}  by {c.by}{taint}")
    if not changes:
        print(t("cli.memory.no_changes", agent=agent), file=sys.stderr)
    return EXIT_OK
