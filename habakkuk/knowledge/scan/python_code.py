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
  dangerous).

A file that does not parse is itself a caution (obfuscation or not Python) and goes to the
regex rules instead.
"""

from __future__ import annotations

import ast
import base64
import binascii
import bz2
import codecs
import lzma
import shlex
import zlib
from typing import Any

from habakkuk.knowledge.scan.context import Context
from habakkuk.knowledge.scan.paths import credential_kind, write_risk

__all__ = ["scan_python"]

_MAX_FOLD = 1 << 20  # a folded string bigger than this is not followed
_MAX_FOLD_DEPTH = 40

CODE_EXEC = {"eval", "exec", "compile", "execfile", "runpy.run_path", "code.InteractiveInterpreter"}
IMPORTERS = {"__import__", "importlib.import_module", "importlib.__import__"}
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
DECODERS = {
    "base64.b64decode", "base64.b32decode", "base64.b16decode", "base64.a85decode",
    "base64.b85decode", "base64.urlsafe_b64decode", "base64.decodebytes",
    "base64.standard_b64decode",
    "binascii.unhexlify", "binascii.a2b_hex", "binascii.a2b_base64", "bytes.fromhex",
    "codecs.decode", "zlib.decompress", "gzip.decompress", "bz2.decompress", "lzma.decompress",
    "marshal.loads",
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
DANGEROUS_ATTRS = {"system", "popen", "exec", "eval", "spawn", "execv", "execve", "Popen",
                   "check_output", "call", "run", "getoutput", "__import__", "import_module",
                   "loads", "compile"}  # fmt: skip


_PATH_WRAPPERS = {
    "os.path.expanduser", "os.path.expandvars", "os.path.abspath", "os.path.realpath",
    "pathlib.Path", "pathlib.PurePath", "Path", "str", "os.fspath",
}  # fmt: skip


class _Unfoldable(Exception):
    pass


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
        _PyScan(ctx, tree, line, depth).run()
    except RecursionError:
        ctx.add("caution", "python-unparsed", line, "Python nested too deeply to read")
    return True


class _PyScan:
    def __init__(self, ctx: Context, tree: ast.Module, base: int, depth: int) -> None:
        self.ctx = ctx
        self.tree = tree
        self.base = base - 1
        self.depth = depth
        self.aliases: dict[str, str] = {}
        self.assigns: dict[str, list[ast.expr]] = {}
        self.taint: dict[str, set[str]] = {}
        self.parents: dict[int, ast.AST] = {}
        self.creds: list[tuple[int, str]] = []
        self.env_dump: list[int] = []
        self.sends: list[tuple[int, str]] = []
        self.downloads: list[int] = []
        self.chmod_x: list[int] = []
        self.ctypes: list[int] = []
        self.decodes: list[int] = []
        self._folding: set[str] = set()

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

    # -- names ---------------------------------------------------------------------

    def qual(self, node: ast.AST) -> str | None:
        """The dotted name an expression refers to (through imports and aliases)."""
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return self.aliases[node.id]
            return node.id
        if isinstance(node, ast.Attribute):
            base = self.qual(node.value)
            if base is None:
                return None
            return _norm(f"{base}.{node.attr}")
        if isinstance(node, ast.Call):
            fq = self.qual(node.func)
            if fq in IMPORTERS and node.args:
                mod = self.fold_str(node.args[0])
                return mod
            if fq == "getattr" and len(node.args) >= 2:
                base = self.qual(node.args[0])
                attr = self.fold_str(node.args[1])
                if base is not None and attr is not None:
                    return _norm(f"{base}.{attr}")
            if fq in ("vars", "globals", "locals") and not node.args:
                return "builtins"
            if fq == "vars" and node.args:
                return self.qual(node.args[0])
        if isinstance(node, ast.Subscript):
            base = self.qual(node.value)
            key = self.fold_str(node.slice)
            if base is not None and key is not None:
                base = base.removesuffix(".__dict__")
                if base in ("builtins", "__builtins__") or key == "__builtins__":
                    return _norm(f"builtins.{key}" if key != "__builtins__" else "builtins")
                if base in ("os", "sys.modules"):
                    return key if base == "sys.modules" else None
        return None

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

    # -- folding -------------------------------------------------------------------

    def fold_str(self, node: ast.AST) -> str | None:
        try:
            value = self.fold(node, 0)
        except (_Unfoldable, RecursionError):
            return None
        if isinstance(value, bytes):
            return value.decode("utf-8", "replace")
        return value if isinstance(value, str) else None

    def fold(self, node: ast.AST, depth: int) -> Any:
        if depth > _MAX_FOLD_DEPTH:
            raise _Unfoldable
        d = depth + 1
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            values = self.assigns.get(node.id, [])
            if len(values) != 1 or node.id in self._folding:
                raise _Unfoldable
            self._folding.add(node.id)
            try:
                return self.fold(values[0], d)
            finally:
                self._folding.discard(node.id)
        if isinstance(node, ast.List | ast.Tuple):
            return [self.fold(e, d) for e in node.elts]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.Invert):
            value = self.fold(node.operand, d)
            if not isinstance(value, int):
                raise _Unfoldable
            return -value if isinstance(node.op, ast.USub) else ~value
        if isinstance(node, ast.BinOp):
            left, right = self.fold(node.left, d), self.fold(node.right, d)
            try:
                if isinstance(node.op, ast.Add):
                    result = left + right
                elif (
                    isinstance(node.op, ast.Mult)
                    and isinstance(left, str | bytes)
                    and isinstance(right, int)
                ):
                    result = left * min(right, 1000)
                elif isinstance(node.op, ast.Mod) and isinstance(left, str):
                    result = left % (tuple(right) if isinstance(right, list) else right)
                elif isinstance(node.op, ast.Sub | ast.BitXor | ast.BitOr) and isinstance(
                    left, int
                ):
                    if isinstance(node.op, ast.Sub):
                        result = left - right
                    elif isinstance(node.op, ast.BitXor):
                        result = left ^ right
                    else:
                        result = left | right
                else:
                    raise _Unfoldable
            except (TypeError, ValueError, OverflowError) as exc:
                raise _Unfoldable from exc
            return _capped(result)
        if isinstance(node, ast.JoinedStr):
            out = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    out.append(str(v.value))
                elif isinstance(v, ast.FormattedValue):
                    out.append(str(self.fold(v.value, d)))
            return _capped("".join(out))
        if isinstance(node, ast.Subscript):
            value = self.fold(node.value, d)
            if isinstance(node.slice, ast.Slice):
                parts = [
                    None if p is None else self.fold(p, d)
                    for p in (node.slice.lower, node.slice.upper, node.slice.step)
                ]
                try:
                    return value[slice(*parts)]
                except (TypeError, ValueError) as exc:
                    raise _Unfoldable from exc
            key = self.fold(node.slice, d)
            try:
                return value[key]
            except (TypeError, KeyError, IndexError) as exc:
                raise _Unfoldable from exc
        if isinstance(node, ast.ListComp | ast.GeneratorExp) and len(node.generators) == 1:
            gen = node.generators[0]
            items = self.fold(gen.iter, d)
            if (
                not isinstance(gen.target, ast.Name)
                or gen.ifs
                or not isinstance(items, list | str | bytes)
            ):
                raise _Unfoldable
            return [
                self.fold_with(node.elt, gen.target.id, item, d) for item in list(items)[:100_000]
            ]
        if isinstance(node, ast.Call):
            return self.fold_call(node, d)
        raise _Unfoldable

    def fold_with(self, node: ast.AST, name: str, value: Any, depth: int) -> Any:
        saved = self.assigns.get(name)
        self.assigns[name] = [ast.Constant(value)]
        try:
            return self.fold(node, depth)
        finally:
            if saved is None:
                del self.assigns[name]
            else:
                self.assigns[name] = saved

    def fold_call(self, node: ast.Call, d: int) -> Any:
        func = node.func
        args = node.args
        if isinstance(func, ast.Attribute):
            method = func.attr
            fq = self.qual(func)
            if fq in DECODERS or fq in ("base64.b64encode",):
                return _decode(fq, [self.fold(a, d) for a in args])
            target = self.fold(func.value, d)
            vals = [self.fold(a, d) for a in args]
            try:
                if method == "join" and isinstance(target, str | bytes):
                    return _capped(target.join(vals[0]))
                if method in ("decode", "encode") and isinstance(target, str | bytes):
                    if isinstance(target, bytes) and method == "decode":
                        return target.decode(str(vals[0]) if vals else "utf-8", "replace")
                    if isinstance(target, str) and method == "encode":
                        return target.encode("utf-8", "replace")
                    if isinstance(target, str) and method == "decode":  # py2 habits
                        raise _Unfoldable
                if method in ("replace", "lower", "upper", "strip", "lstrip", "rstrip", "format",
                              "swapcase", "title", "capitalize", "zfill"
                              ) and isinstance(target, str):  # fmt: skip
                    return _capped(getattr(target, method)(*vals))
                if (
                    method == "fromhex"
                    and isinstance(func.value, ast.Name)
                    and func.value.id in ("bytes", "bytearray")
                ):
                    return bytes.fromhex(vals[0])
            except (TypeError, ValueError, IndexError) as exc:
                raise _Unfoldable from exc
            raise _Unfoldable
        fq = self.qual(func)
        if fq == "map" and len(args) == 2:
            fn = self.qual(args[0])
            items: Any = self.fold(args[1], d)
            if fn in ("chr", "str") and isinstance(items, list | str | bytes):
                try:
                    seq: list[Any] = list(items)
                    return [chr(x) if fn == "chr" else str(x) for x in seq]
                except (TypeError, ValueError, OverflowError) as exc:
                    raise _Unfoldable from exc
            raise _Unfoldable
        vals = [self.fold(a, d) for a in args]
        try:
            if fq in DECODERS:
                return _decode(fq, vals)
            if fq == "chr":
                return chr(vals[0])
            if fq == "ord":
                return ord(vals[0])
            if fq == "str" and vals:
                return vals[0] if isinstance(vals[0], str) else str(vals[0])
            if fq in ("bytes", "bytearray") and vals and isinstance(vals[0], list):
                return bytes(vals[0])
            if fq in ("bytes", "bytearray") and len(vals) >= 2 and isinstance(vals[0], str):
                return vals[0].encode(vals[1], "replace")
            if fq == "reversed":
                return list(reversed(vals[0]))
            if fq in ("list", "tuple") and vals:
                return list(vals[0])
        except (TypeError, ValueError, IndexError, OverflowError) as exc:
            raise _Unfoldable from exc
        raise _Unfoldable

    def built(self, node: ast.AST) -> bool:
        """Whether an expression is a string made at run time (not a plain literal)."""
        seen = 0
        while isinstance(node, ast.Name) and seen < 20:
            values = self.assigns.get(node.id, [])
            if len(values) != 1:
                return False
            node = values[0]
            seen += 1
        return not isinstance(node, ast.Constant)

    # -- taint -------------------------------------------------------------------------

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
        if (
            fq in SENDS
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
                except (_Unfoldable, RecursionError):
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
        except (_Unfoldable, RecursionError):
            value = None
            if isinstance(node, ast.List | ast.Tuple):
                parts = []
                for e in node.elts:
                    s = self.fold_str(e)
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

    def fold_path(self, node: ast.AST) -> str | None:
        """A path expression folded: expanduser, os.path.join, Path(...) / "x", Path.home()."""
        if isinstance(node, ast.Call):
            fq = self.qual(node.func) or ""
            if fq.endswith("home") and not node.args:
                return "~"
            if fq in _PATH_WRAPPERS and node.args:
                return self.fold_path(node.args[0])
            if fq == "os.path.join" and node.args:
                parts = [self.fold_path(a) for a in node.args]
                return "/".join(p for p in parts if p is not None) if all(parts) else None
            if isinstance(node.func, ast.Attribute) and node.func.attr in (
                "expanduser",
                "resolve",
                "absolute",
            ):
                return self.fold_path(node.func.value)
            if isinstance(node.func, ast.Attribute) and node.func.attr == "joinpath":
                base = self.fold_path(node.func.value)
                rest = [self.fold_path(a) for a in node.args]
                return "/".join([base, *rest]) if base and all(rest) else None  # type: ignore[list-item]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            left, right = self.fold_path(node.left), self.fold_path(node.right)
            return f"{left}/{right}" if left and right else None
        if isinstance(node, ast.Subscript) and self.qual(node.value) == "os.environ":
            key = self.fold_str(node.slice)
            return "~" if key == "HOME" else None
        if isinstance(node, ast.Name):
            values = self.assigns.get(node.id, [])
            if len(values) == 1 and node.id not in self._folding:
                self._folding.add(node.id)
                try:
                    return self.fold_path(values[0])
                finally:
                    self._folding.discard(node.id)
            return None
        return self.fold_str(node)

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


def _norm(q: str) -> str:
    for prefix in ("builtins.", "__builtins__.", "__builtin__."):
        if q.startswith(prefix):
            return q[len(prefix) :]
    if q.startswith("posix."):
        return "os." + q[6:]
    return q


def _capped(value: Any) -> Any:
    if isinstance(value, str | bytes | list) and len(value) > _MAX_FOLD:
        raise _Unfoldable
    return value


def _decode(fq: str | None, vals: list[Any]) -> Any:
    """Apply a decoder to folded data, as the program would at run time."""
    if not vals:
        raise _Unfoldable
    data = vals[0]
    if isinstance(data, str) and fq != "codecs.decode":
        data = data.encode("latin-1", "replace")
    try:
        if fq in (
            "base64.b64decode",
            "base64.standard_b64decode",
            "base64.decodebytes",
            "binascii.a2b_base64",
        ):
            return base64.b64decode(data + b"=" * (-len(data) % 4))
        if fq == "base64.urlsafe_b64decode":
            return base64.urlsafe_b64decode(data + b"=" * (-len(data) % 4))
        if fq == "base64.b32decode":
            return base64.b32decode(data)
        if fq == "base64.b16decode":
            return base64.b16decode(data, casefold=True)
        if fq == "base64.a85decode":
            return base64.a85decode(data)
        if fq == "base64.b85decode":
            return base64.b85decode(data)
        if fq == "base64.b64encode":
            return base64.b64encode(data)
        if fq in ("binascii.unhexlify", "binascii.a2b_hex", "bytes.fromhex"):
            return binascii.unhexlify(data.strip() if isinstance(data, bytes) else data)
        if fq == "zlib.decompress":
            return zlib.decompressobj().decompress(data, _MAX_FOLD)
        if fq == "bz2.decompress":
            return bz2.BZ2Decompressor().decompress(data, _MAX_FOLD)
        if fq == "lzma.decompress":
            return lzma.LZMADecompressor().decompress(data, _MAX_FOLD)
        if fq == "gzip.decompress":
            return zlib.decompressobj(47).decompress(data, _MAX_FOLD)
        if fq == "codecs.decode":
            codec = vals[1] if len(vals) > 1 else "utf-8"
            if isinstance(codec, str) and codec.replace("_", "").replace("-", "").lower() in (
                "rot13",
            ):
                return codecs.decode(str(data), "rot_13")
            if isinstance(data, str):
                data = data.encode("latin-1", "replace")
            return codecs.decode(data, codec)
    except (
        binascii.Error,
        ValueError,
        TypeError,
        zlib.error,
        OSError,
        LookupError,
        EOFError,
        lzma.LZMAError,
    ) as exc:
        raise _Unfoldable from exc
    raise _Unfoldable
