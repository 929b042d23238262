"""Reverse and bind shells in Python: which names hold a socket, and what is wired to one.

The Python scanner (python_code.py) feeds this its module's nodes and each process start
it sees; at the end `finish` reports a socket put on this process's stdio (``os.dup2``)
or handed to a process, or a shell started with no command in a file that opens one.
"""

from __future__ import annotations

import ast
import shlex
from collections.abc import Callable

from habakkuk.knowledge.scan.context import Context
from habakkuk.tools.shell_syntax import SHELLS

# What makes a socket, and what turns one into something a process can be given.
SOCKET_MAKERS = {"socket.socket", "socket.create_connection", "socket.fromfd", "socket",
                 "ssl.wrap_socket", "socket.socketpair", "socket.create_server"}  # fmt: skip
SOCKET_VIEWS = {"fileno", "makefile", "detach", "dup", "wrap_socket", "accept"}
# Programs that are a shell when started without a command: interactive, or reading
# their commands from stdin (which a reverse shell points at the socket).
SHELL_PROGRAMS = SHELLS | {"cmd", "cmd.exe", "powershell", "powershell.exe", "pwsh"}


class SocketWatch:
    """The socket bookkeeping of one module's scan; `qual` resolves a name to what it
    really is (the scan's Resolver)."""

    def __init__(self, qual: Callable[[ast.AST], str | None]) -> None:
        self.qual = qual
        self.sockets: set[str] = set()  # names bound to a socket or its descriptor
        self.socket_lines: list[int] = []  # where a socket is made
        self.stdio_dups: list[tuple[int, bool]] = []  # os.dup2 onto 0/1/2: (line, of a socket)
        self.shells: list[tuple[int, str]] = []  # a shell started without a command
        self.wired: list[tuple[int, str]] = []  # a process given a socket as its stdio

    def finish(self, ctx: Context) -> None:
        """Reverse (or bind) shells: a socket wired to a process or to this one's stdio,
        or a shell with no command in a file that opens a socket."""
        add = ctx.add
        if self.wired:
            line, shell = self.wired[0]
            add(
                "dangerous",
                "reverse-shell",
                line,
                f"hands a network socket to {shell} as its input and output",
            )
            return
        if not self.socket_lines:
            return
        dups = [line for line, of_socket in self.stdio_dups if of_socket] or [
            line for line, _ in self.stdio_dups
        ]
        if dups:
            add(
                "dangerous",
                "reverse-shell",
                dups[0],
                "puts a network socket on stdin/stdout (os.dup2): what runs next obeys the network",
            )
        elif self.shells:
            line, shell = self.shells[0]
            add(
                "dangerous",
                "reverse-shell",
                line,
                f"starts {shell} with no command in a script that opens a network socket",
            )

    def collect(self, nodes: list[ast.AST]) -> None:
        """The names bound to a socket, its descriptor or a file made from it."""
        bindings: list[tuple[list[ast.expr], ast.AST]] = []
        for node in nodes:
            if isinstance(node, ast.Assign):
                bindings.append((list(node.targets), node.value))
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                bindings.append(([node.optional_vars], node.context_expr))
        for _ in range(3):
            for targets, value in bindings:
                if not self.is_socket(value):
                    continue
                for t in targets:
                    first = t.elts[0] if isinstance(t, ast.Tuple) and t.elts else t
                    if isinstance(first, ast.Name):
                        self.sockets.add(first.id)

    def is_socket(self, node: ast.AST) -> bool:
        """Whether an expression is a socket (made here, or a view of a named one)."""
        if isinstance(node, ast.Name):
            return node.id in self.sockets
        if isinstance(node, ast.Call):
            fq = self.qual(node.func) or ""
            if fq in SOCKET_MAKERS:
                return not self.unix_socket(node, fq)
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in SOCKET_VIEWS:
                return self.is_socket(func.value) or func.attr == "wrap_socket"
        return False

    def unix_socket(self, node: ast.Call, fq: str) -> bool:
        """socket.socket(AF_UNIX, ...): a local socket, not the network."""
        if fq not in ("socket.socket", "socket") or not (node.args or node.keywords):
            return False
        family = node.args[0] if node.args else node.keywords[0].value
        return (self.qual(family) or "").endswith("AF_UNIX")

    def mentions_socket(self, node: ast.AST) -> bool:
        return any(self.is_socket(sub) for sub in ast.walk(node))

    def shell_without_command(self, text: str) -> str | None:
        """The shell a command line starts when it starts one with no command to run."""
        head = text.split(None, 1)[0].strip("'\"") if text.strip() else ""
        if head.rsplit("/", 1)[-1].rsplit("\\", 1)[-1].lower() not in SHELL_PROGRAMS:
            return None
        try:
            argv = shlex.split(text)
        except ValueError:
            return None
        if not argv:
            return None
        name = argv[0].rsplit("/", 1)[-1].rsplit("\\", 1)[-1].lower()
        if name not in SHELL_PROGRAMS:
            return None
        rest = argv[1:]
        # Options only (-i, -l, -s, --login, -NoLogo...): no command, no script.
        if any(not a.startswith("-") or a.lower() in ("-c", "/c", "-command") for a in rest):
            return None
        return argv[0]

    def started(self, node: ast.Call, text: str | None, line: int) -> None:
        """Note a process start: a shell with no command; a socket given as its stdio."""
        shell = self.shell_without_command(text) if text is not None else None
        given = [
            k.value for k in node.keywords if k.arg in ("stdin", "stdout", "stderr", "pass_fds")
        ]
        if any(self.mentions_socket(v) for v in given):
            self.wired.append((line, shell or "a process"))
        if shell is not None:
            self.shells.append((line, shell))
