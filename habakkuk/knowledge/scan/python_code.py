"""The Python scanner: `ast.parse`, constant folding, and what the calls really are.

Names are resolved through imports and aliases (``import os as o``, ``from os import
system as s``, ``m = __import__("o" + "s")``, ``getattr(os, "sys" + "tem")``), and
strings are folded where they are built from constants: concatenation, ``%``, f-strings,
``"".join``, slices (``"metsys"[::-1]``), ``chr`` lists, ``bytes.fromhex``, base64 / hex /
zlib / rot13 decodes. What matters then:

* ``eval``/``exec``/``compile`` of decoded, downloaded or built text (dangerous; of other
  non-literal data a caution); a literal or foldable program is scanned as Python too;
* ``importlib.import_module``/``__import__`` of a built name, ``getattr`` of a built name,
  any built string that spells a dangerous name (dangerous: obfuscation);
* ``os.system``/``os.popen``/``subprocess`` (``shell=True`` or an argv): the command is
  scanned as shell when it folds, a caution when it does not, dangerous when it carries a
  download or a decode; ``subprocess.run(["git", "status"])`` is nothing;
* credential files or the whole environment read in a file that also sends over the
  network (exfiltration), writes to home dotfiles and system folders, ``pickle.loads`` of
  downloaded data, downloads made executable, ``ctypes`` (a caution; with decoded bytes
  dangerous);
* reverse and bind shells: a socket's descriptor put on stdin/stdout (``os.dup2``) or
  handed to a process, or a shell started without a command (``/bin/sh -i``,
  ``pty.spawn("sh")``, a bare ``bash`` fed through pipes) in a file that opens a socket;
* recursive deletion of the home, root or a system folder by any API: ``shutil.rmtree``
  of ``os.path.expanduser("~")`` or ``Path.home()``, a walk of one of them that removes
  what it finds, ``rm -rf`` of one built in ``subprocess`` (judged by the hardline
  blocklist, like the shell's).

A file that does not parse is itself a caution (obfuscation or not Python) and goes to the
regex rules instead.
"""

from __future__ import annotations

import ast
import re
import shlex

from habakkuk.knowledge.scan.context import Context
from habakkuk.knowledge.scan.paths import credential_kind, write_risk
from habakkuk.knowledge.scan.python_fold import DECODERS, IMPORTERS, Resolver, Unfoldable
from habakkuk.knowledge.scan.python_sockets import SOCKET_MAKERS, SocketWatch
from habakkuk.tools.hardline import check_hardline

__all__ = ["scan_python"]


CODE_EXEC = {"eval", "exec", "compile", "execfile", "runpy.run_path", "code.InteractiveInterpreter"}
SHELL_STRING = {
    "os.system", "os.popen", "commands.getoutput", "commands.getstatusoutput",
    "subprocess.getoutput", "subprocess.getstatusoutput", "asyncio.create_subprocess_shell",
    "pty.spawn",
}  # fmt: skip
SUBPROCESS = {
    "subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output",
    "subprocess.Popen", "asyncio.create_subprocess_exec", "os.execv", "os.execve", "os.execvp",
    "os.execl", "os.execlp", "os.execvpe", "os.spawnv", "os.spawnl", "os.spawnlp", "os.spawnvp",
    "os.posix_spawn", "os.posix_spawnp",
}  # fmt: skip
DOWNLOADS = {
    "requests.get", "requests.post", "requests.request", "httpx.get", "httpx.request",
    "urllib.request.urlopen", "urllib.request.urlretrieve", "urllib.urlopen", "urllib2.urlopen",
    "urllib.request.Request", "http.client.HTTPConnection", "http.client.HTTPSConnection",
    "socket.socket", "socket.create_connection",
}  # fmt: skip
SENDS = {
    "requests.post", "requests.put", "requests.patch", "requests.request", "httpx.post",
    "httpx.put", "httpx.patch", "socket.socket", "socket.create_connection", "smtplib.SMTP",
    "smtplib.SMTP_SSL", "ftplib.FTP", "ftplib.FTP_TLS", "http.client.HTTPConnection",
    "http.client.HTTPSConnection", "paramiko.SSHClient", "telnetlib.Telnet",
}  # fmt: skip
UNPICKLE = {"pickle.loads", "pickle.load", "dill.loads", "cloudpickle.loads", "marshal.loads",
            "shelve.open", "joblib.load"}  # fmt: skip
# A built (not literal) string spelling one of these is there to hide from a scanner.
HIDDEN_NAMES = {
    "os", "system", "popen", "subprocess", "exec", "eval", "compile", "__import__",
    "import_module", "importlib", "builtins", "__builtins__", "getattr", "b64decode", "socket",
    "pty", "spawn", "check_output", "Popen", "ctypes", "marshal", "pickle", "execv", "run",
    "call", "urlopen", "requests", "loads", "decompress", "getoutput", "environ", "sh", "bash",
}  # fmt: skip
# Recursive deletion of what a path names; walks whose every entry a delete may remove.
TREE_DELETERS = {"shutil.rmtree", "os.removedirs", "send2trash.send2trash",
                 "distutils.dir_util.remove_tree"}  # fmt: skip
WALKERS = {"os.walk", "os.listdir", "os.scandir", "os.fwalk", "glob.glob", "glob.iglob"}
DELETERS = {"os.remove", "os.unlink", "os.rmdir", "shutil.rmtree", "os.removedirs"}
DELETE_METHODS = {"unlink", "rmdir"}
WALK_METHODS = {"iterdir", "rglob", "glob", "walk"}
STDIO = {0, 1, 2}

DANGEROUS_ATTRS = {"system", "popen", "exec", "eval", "spawn", "execv", "execve", "Popen",
                   "check_output", "call", "run", "getoutput", "__import__", "import_module",
                   "loads", "compile"}  # fmt: skip


def scan_python(
    ctx: Context, text: str, line: int = 1, depth: int = 0, *, strict: bool = True
) -> bool:
    """Scan Python source whose first line is `line`; False when it does not parse.

    `strict` (a .py file): a file that does not parse is a caution finding.
    """
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        if strict:
            ctx.add("caution", "python-unparsed", line, "Python that does not parse (obfuscated?)")
        ctx.scan("foreign", text, line, depth + 1)
        return False
    try:
        _PyScan(ctx, tree, line, depth, networked="socket" in text).run()
    except RecursionError:
        ctx.add("caution", "python-unparsed", line, "Python nested too deeply to read")
    return True


class _PyScan(Resolver):
    """One module's scan: a first pass collects imports, assignments and parents, then
    every call is judged by what it resolves to (Resolver folds names and strings)."""

    def __init__(
        self, ctx: Context, tree: ast.Module, base: int, depth: int, *, networked: bool = True
    ) -> None:
        super().__init__()
        # Whether the source names sockets at all (a name built from pieces to hide it is
        # a finding of its own): the socket bookkeeping is skipped when it does not.
        self.networked = networked
        self.ctx = ctx
        self.tree = tree
        self.base = base - 1
        self.depth = depth
        self.taint: dict[str, set[str]] = {}
        self.parents: dict[int, ast.AST] = {}
        self.creds: list[tuple[int, str]] = []
        self.env_dump: list[int] = []
        self.sends: list[tuple[int, str]] = []
        self.downloads: list[int] = []
        self.chmod_x: list[int] = []
        self.ctypes: list[int] = []
        self.decodes: list[int] = []
        self.net = SocketWatch(self.qual)  # sockets, and shells wired to them
        # A loop over the home, root or a system folder: (line, path, the loop's body).
        self.walks: list[tuple[int, str, list[ast.AST]]] = []
        self.deletes: set[int] = set()  # ids of the delete calls

    def at(self, node: ast.AST) -> int:
        return self.base + getattr(node, "lineno", 1)

    # -- passes -------------------------------------------------------------------

    def run(self) -> None:
        nodes = list(ast.walk(self.tree))
        for node in nodes:
            for child in ast.iter_child_nodes(node):
                self.parents[id(child)] = node
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.aliases[a.asname or a.name.split(".")[0]] = (
                        a.name if a.asname else a.name.split(".")[0]
                    )
            elif isinstance(node, ast.ImportFrom) and node.module:
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        self.assigns.setdefault(t.id, []).append(node.value)
            elif (
                isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value
            ):
                self.assigns.setdefault(node.target.id, []).append(node.value)
        for name, values in self.assigns.items():
            if len(values) == 1 and name not in self.aliases:
                q = self.qual(values[0])
                if q is not None:
                    self.aliases[name] = q
        if self.networked:
            self.net.collect(nodes)
        for _ in range(2):
            for node in nodes:
                if isinstance(node, ast.Assign):
                    kinds = self.expr_taint(node.value)
                    for t in node.targets:
                        if isinstance(t, ast.Name) and kinds:
                            self.taint.setdefault(t.id, set()).update(kinds)
                elif isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name):
                    kinds = self.expr_taint(node.context_expr)
                    if kinds:
                        self.taint.setdefault(node.optional_vars.id, set()).update(kinds)
        for node in nodes:
            if isinstance(node, ast.Call):
                self.call(node)
            elif isinstance(node, ast.Attribute | ast.Name):
                self.name_use(node)
            if isinstance(node, ast.BinOp | ast.JoinedStr | ast.Call | ast.Subscript):
                self.built_string(node)
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and len(node.value) < 300
                and credential_kind(node.value) == "strong"
            ):
                self.creds.append((self.at(node), node.value))
        self.finish()

    def finish(self) -> None:
        add = self.ctx.add
        leaked = self.creds[:1] or [(line, "the whole environment") for line in self.env_dump[:1]]
        if leaked and self.sends:
            (cred_line, what), (send_line, how) = leaked[0], self.sends[0]
            add(
                "dangerous",
                "exfiltration",
                send_line,
                f"reads {what} (line {cred_line}) and sends over the network ({how})",
            )
        elif self.creds:
            add(
                "caution",
                "reads-credentials",
                self.creds[0][0],
                f"reads credentials: {self.creds[0][1]}",
            )
        if self.downloads and self.chmod_x:
            add(
                "dangerous",
                "download-and-run",
                self.chmod_x[0],
                "downloads a file and makes it executable",
            )
        self.net.finish(self.ctx)
        for line, path, body in self.walks:
            if any(id(sub) in self.deletes for part in body for sub in ast.walk(part)):
                add(
                    "dangerous",
                    "destructive-command",
                    line,
                    f"walks {path} (the home, root or a system folder) and deletes what it finds",
                )
                break
        if self.ctypes:
            if self.decodes:
                add(
                    "dangerous",
                    "python-ctypes",
                    self.ctypes[0],
                    "ctypes with decoded bytes (shellcode loader)",
                )
            else:
                add(
                    "caution",
                    "python-ctypes",
                    self.ctypes[0],
                    "uses ctypes (native code outside Python's checks)",
                )

    def protected(self, path: str) -> str | None:
        """Whether deleting `path` recursively is what the hardline blocklist refuses."""
        word = path if re.fullmatch(r"[~\w@%+=:,./-]+", path) else shlex.quote(path)
        return check_hardline(f"rm -rf {word}")

    # -- names ---------------------------------------------------------------------

    def name_use(self, node: ast.Attribute | ast.Name) -> None:
        q = self.qual(node)
        if q is None:
            return
        if (q == "ctypes" or q.startswith("ctypes.")) and (
            isinstance(node, ast.Name) or not isinstance(self.parents.get(id(node)), ast.Attribute)
        ):
            self.ctypes.append(self.at(node))
        if q == "os.environ" and isinstance(node, ast.Attribute):
            parent = self.parents.get(id(node))
            if isinstance(parent, ast.Subscript):
                return
            if isinstance(parent, ast.Attribute) and parent.attr in (
                "get",
                "setdefault",
                "pop",
                "update",
            ):
                return
            if isinstance(parent, ast.Compare):
                return
            self.env_dump.append(self.at(node))

    def expr_taint(self, node: ast.AST) -> set[str]:
        kinds: set[str] = set()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id in self.taint:
                kinds |= self.taint[sub.id]
            elif isinstance(sub, ast.Call):
                q = self.qual(sub.func)
                if q in DECODERS or (q and q.endswith((".b64decode", ".decompress", ".unhexlify"))):
                    kinds.add("decode")
                elif q in DOWNLOADS or (
                    q and q.startswith(("requests.", "httpx.", "urllib.", "aiohttp."))
                ):
                    kinds.add("download")
        return kinds

    # -- calls -------------------------------------------------------------------------

    def call(self, node: ast.Call) -> None:
        fq = self.qual(node.func) or ""
        line = self.at(node)
        args = node.args
        if fq in DECODERS:
            self.decodes.append(line)
        if fq in DOWNLOADS or fq.startswith(("requests.", "httpx.", "urllib.request.")):
            self.downloads.append(line)
        local = self.net.unix_socket(node, fq)
        if (
            (fq in SENDS and not local)
            or (
                fq in ("urllib.request.urlopen", "urllib.request.Request")
                and (len(args) > 1 or any(k.arg == "data" for k in node.keywords))
            )
            or (fq in ("requests.get", "httpx.get", "urllib.request.urlopen") and self.creds)
        ):
            self.sends.append((line, fq))
        if (
            isinstance(node.func, ast.Attribute)
            and node.func.attr in ("connect", "send", "sendall", "sendto")
            and (fq.startswith("socket.") or "download" in self.expr_taint(node.func.value))
        ):
            self.sends.append((line, f"socket {node.func.attr}"))
        if fq in SOCKET_MAKERS and not local:
            self.net.socket_lines.append(line)
        if fq == "os.dup2" and len(args) >= 2:
            try:
                onto = self.fold(args[1], 0)
            except (Unfoldable, RecursionError):
                onto = ast.unparse(args[1])
            source = ast.unparse(args[0])
            if isinstance(args[0], ast.Name) and len(self.assigns.get(args[0].id, [])) == 1:
                source += " " + ast.unparse(self.assigns[args[0].id][0])
            to_stdio = onto in STDIO or (
                isinstance(onto, str) and re.search(r"std(?:in|out|err)", onto)
            )
            # A daemon points its stdio at /dev/null or a log file: not the network.
            if to_stdio and not re.search(r"devnull|/dev/null|\bopen\(|\.log\b", source):
                self.net.stdio_dups.append((line, self.net.mentions_socket(args[0])))
        self.deletion(node, fq, line)
        if fq in CODE_EXEC:
            self.code_exec(node, fq, line)
        elif fq in IMPORTERS:
            self.dynamic_import(node, fq, line)
        elif fq == "getattr" and len(args) >= 2:
            self.getattr_call(node, line)
        elif fq in SHELL_STRING:
            self.shell_string(node, fq, line)
        elif fq in SUBPROCESS:
            self.subprocess_call(node, fq, line)
        elif fq in UNPICKLE and args:
            kinds = self.expr_taint(args[0])
            if "download" in kinds:
                self.ctx.add(
                    "dangerous",
                    "python-unpickle-download",
                    line,
                    f"{fq} of downloaded data runs code",
                )
            elif fq == "marshal.loads" and "decode" in kinds:
                self.ctx.add(
                    "dangerous",
                    "python-dynamic-code",
                    line,
                    "marshal.loads of decoded bytes (hidden code)",
                )
            elif not isinstance(args[0], ast.Constant):
                self.ctx.add("caution", "python-unpickle", line, f"{fq} can run code from its data")
        elif fq in ("os.chmod", "pathlib.Path.chmod") or (
            isinstance(node.func, ast.Attribute) and node.func.attr == "chmod"
        ):
            mode = args[1] if fq == "os.chmod" and len(args) > 1 else (args[0] if args else None)
            if mode is not None:
                try:
                    value = self.fold(mode, 0)
                except (Unfoldable, RecursionError):
                    value = None
                if (isinstance(value, int) and value & 0o111) or (
                    value is None and "S_IX" in ast.unparse(mode)
                ):
                    self.chmod_x.append(line)
        elif fq in ("open", "io.open", "codecs.open", "builtins.open") and args:
            self.open_call(node, line)
        elif isinstance(node.func, ast.Attribute) and node.func.attr in (
            "write_text", "write_bytes", "read_text", "read_bytes", "open", "touch", "symlink_to",
        ):  # fmt: skip
            path = self.fold_path(node.func.value)
            if path is not None:
                if node.func.attr.startswith("read"):
                    self.cred_path(path, line)
                elif node.func.attr != "open" or _mode_writes(args[0] if args else None, node):
                    self.write_path(path, line)
                else:
                    self.cred_path(path, line)
        elif fq in ("shutil.copy", "shutil.copyfile", "shutil.copy2", "shutil.move", "os.rename",
                    "os.replace", "os.symlink", "shutil.copytree") and len(args) >= 2:  # fmt: skip
            src, dst = self.fold_path(args[0]), self.fold_path(args[1])
            if src:
                self.cred_path(src, line)
            if dst:
                self.write_path(dst, line)

    def deletion(self, node: ast.Call, fq: str, line: int) -> None:
        """rmtree of the home or root; walks of them, and the deletes that may empty them."""
        func = node.func
        method = func.attr if isinstance(func, ast.Attribute) else ""
        if fq in DELETERS or (method in DELETE_METHODS and fq not in WALKERS):
            self.deletes.add(id(node))
        if fq in TREE_DELETERS and node.args:
            path = self.fold_path(node.args[0])
            reason = self.protected(path) if path else None
            if path and reason:
                self.ctx.add(
                    "dangerous",
                    "destructive-command",
                    line,
                    f"{fq} of {path} deletes the home, root or a system folder",
                )
            return
        walked: ast.AST | None = None
        if fq in WALKERS and node.args:
            walked = node.args[0]
        elif method in WALK_METHODS and isinstance(func, ast.Attribute):
            walked = func.value
        if walked is None:
            return
        path = self.fold_path(walked)
        if path is not None and fq in ("glob.glob", "glob.iglob"):
            path = re.sub(r"(?:/\*\*?)+/?$|/\*\*?/\*.*$", "", path) or "/"
        body = self.loop_body(node) if path and self.protected(path) else None
        if path and body:
            self.walks.append((line, path, body))

    def loop_body(self, call: ast.Call) -> list[ast.AST] | None:
        """The body of the for loop or comprehension that iterates over `call`."""
        child: ast.AST = call
        for _ in range(6):
            parent = self.parents.get(id(child))
            if parent is None:
                return None
            if isinstance(parent, ast.For | ast.AsyncFor) and child is parent.iter:
                return [*parent.body, *parent.orelse]
            if isinstance(parent, ast.comprehension) and child is parent.iter:
                comp = self.parents.get(id(parent))
                if isinstance(comp, ast.ListComp | ast.SetComp | ast.GeneratorExp):
                    return [comp.elt]
                if isinstance(comp, ast.DictComp):
                    return [comp.key, comp.value]
                return None
            child = parent
        return None

    def code_exec(self, node: ast.Call, fq: str, line: int) -> None:
        if not node.args:
            return
        arg = node.args[0]
        kinds = self.expr_taint(arg)
        text = self.fold_str(arg)
        if "download" in kinds:
            self.ctx.add("dangerous", "python-runs-download", line, f"{fq} of downloaded code")
        elif "decode" in kinds:
            self.ctx.add(
                "dangerous", "python-dynamic-code", line, f"{fq} of decoded data (hidden code)"
            )
        elif text is not None and self.built(arg):
            self.ctx.add(
                "dangerous", "python-dynamic-code", line, f"{fq} of code built from strings"
            )
        elif text is None and not isinstance(arg, ast.Constant):
            self.ctx.add(
                "caution", "python-dynamic-code", line, f"{fq} of data that is not in the file"
            )
        if text is not None:
            self.ctx.nested(line).scan("python", text, line, self.depth + 1)

    def dynamic_import(self, node: ast.Call, fq: str, line: int) -> None:
        if not node.args:
            return
        name = self.fold_str(node.args[0])
        if name is None:
            self.ctx.add(
                "caution", "python-dynamic-import", line, f"{fq} of a module named at run time"
            )
        elif self.built(node.args[0]):
            self.ctx.add(
                "dangerous",
                "python-dynamic-import",
                line,
                f"{fq} of a module name built from pieces ({name!r}): hides what it imports",
            )

    def getattr_call(self, node: ast.Call, line: int) -> None:
        attr_node = node.args[1]
        attr = self.fold_str(attr_node)
        base = self.qual(node.args[0]) or ""
        if attr is None:
            if base in ("os", "subprocess", "builtins", "__builtins__", "importlib", "pty"):
                self.ctx.add(
                    "caution",
                    "python-getattr-dynamic",
                    line,
                    f"getattr on {base} with a name chosen at run time",
                )
            return
        if self.built(attr_node) and (attr in DANGEROUS_ATTRS or attr in HIDDEN_NAMES):
            self.ctx.add(
                "dangerous",
                "python-getattr-obfuscation",
                line,
                f"getattr({base or '...'}, {attr!r}) with the name built from pieces",
            )

    def built_string(self, node: ast.AST) -> None:
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.BinOp | ast.JoinedStr | ast.FormattedValue):
            return
        if isinstance(node, ast.Call) and self.qual(node.func) in IMPORTERS | CODE_EXEC:
            return
        value = self.fold_str(node) if self.built(node) else None
        if value is None:
            return
        stripped = value.strip()
        line = self.at(node)
        if stripped in HIDDEN_NAMES or (
            stripped.split(".")[0] in ("os", "subprocess", "builtins") and "." in stripped
        ):
            self.ctx.add(
                "dangerous",
                "python-string-building",
                line,
                f"builds the name {stripped!r} from pieces (hides it from a reader)",
            )
        elif len(stripped) > 3 and any(
            t in stripped
            for t in ("curl ", "wget ", "| sh", "|sh", "| bash", "/bin/sh", "base64 -d")
        ):
            self.ctx.add(
                "dangerous", "python-string-building", line, "builds a shell command from pieces"
            )
            self.ctx.nested(line).scan("shell", stripped, line, self.depth + 1)

    def command_text(self, node: ast.AST) -> str | None:
        try:
            value = self.fold(node, 0)
        except (Unfoldable, RecursionError):
            value = None
            if isinstance(node, ast.List | ast.Tuple):
                parts = []
                for e in node.elts:
                    s = self.fold_str(e)
                    if s is None:
                        # os.path.expanduser("~"), Path.home(): the home as a shell spells it
                        path = self.fold_path(e)
                        if path is not None and (path == "~" or path.startswith("~/")):
                            parts.append("~" + shlex.quote(path[1:]) if path != "~" else "~")
                            continue
                    parts.append(shlex.quote(s) if s is not None else "ARG")
                return " ".join(parts)
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        if isinstance(value, str):
            return value
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return " ".join(shlex.quote(v) for v in value)
        return None

    def shell_string(self, node: ast.Call, fq: str, line: int) -> None:
        if not node.args:
            return
        arg = node.args[0]
        kinds = self.expr_taint(arg)
        if kinds & {"download", "decode"}:
            self.ctx.add(
                "dangerous", "python-runs-download", line, f"{fq} runs downloaded or decoded data"
            )
        text = self.command_text(arg)
        self.net.started(node, text, line)
        if text is None:
            self.ctx.add(
                "caution", "python-shell-command", line, f"{fq} of a command built at run time"
            )
            return
        self.ctx.nested(line).scan("shell", text, line, self.depth + 1)

    def subprocess_call(self, node: ast.Call, fq: str, line: int) -> None:
        args = node.args
        if not args:
            return
        shell = any(
            k.arg == "shell" and not (isinstance(k.value, ast.Constant) and not k.value.value)
            for k in node.keywords
        )
        target = (
            args[0]
            if not fq.startswith(("os.exec", "os.spawn", "os.posix"))
            else ast.List(
                elts=list(args[1:]) if fq.startswith("os.exec") else list(args), ctx=ast.Load()
            )
        )
        if fq == "asyncio.create_subprocess_exec":
            target = ast.List(elts=list(args), ctx=ast.Load())
        kinds = set().union(*(self.expr_taint(a) for a in args)) if args else set()
        if kinds & {"download", "decode"}:
            self.ctx.add(
                "dangerous", "python-runs-download", line, f"{fq} runs downloaded or decoded data"
            )
        text = self.command_text(target)
        self.net.started(node, text, line)
        if text is None:
            if shell:
                self.ctx.add(
                    "caution",
                    "python-shell-command",
                    line,
                    f"{fq} with shell=True of a command built at run time",
                )
            return
        self.ctx.nested(line).scan("shell", text, line, self.depth + 1)

    # -- files --------------------------------------------------------------------------

    def open_call(self, node: ast.Call, line: int) -> None:
        path = self.fold_path(node.args[0])
        if path is None:
            return
        mode_node = node.args[1] if len(node.args) > 1 else None
        if _mode_writes(mode_node, node):
            self.write_path(path, line)
        else:
            self.cred_path(path, line)

    def write_path(self, path: str, line: int) -> None:
        risk = write_risk(path)
        if risk is not None:
            severity, message = risk
            self.ctx.add(severity, "writes-outside", line, message)

    def cred_path(self, path: str, line: int) -> None:
        if credential_kind(path) == "strong":
            self.creds.append((line, path))


def _mode_writes(mode_node: ast.AST | None, call: ast.Call) -> bool:
    for k in call.keywords:
        if k.arg == "mode":
            mode_node = k.value
    if isinstance(mode_node, ast.Constant) and isinstance(mode_node.value, str):
        return any(c in mode_node.value for c in "wax+")
    return False
