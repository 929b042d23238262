"""Constant folding for the Python scanner: what a name refers to, what a built string is.

`Resolver` follows imports and aliases (``import os as o``, ``getattr(os, "sys" +
"tem")``, ``vars(builtins)[...]``) and folds expressions built from constants
(concatenation, ``%``, f-strings, ``join``, slices, ``chr``, ``bytes.fromhex``, and real
base64 / hex / zlib / bz2 / lzma / rot13 decodes, each capped in size), so that
python_code.py judges what a call really is rather than how it is spelled.
"""

from __future__ import annotations

import ast
import base64
import binascii
import bz2
import codecs
import lzma
import re
import string
import zlib
from typing import Any

_MAX_FOLD = 1 << 20  # a folded string bigger than this is not followed
_MAX_FOLD_DEPTH = 40

IMPORTERS = {"__import__", "importlib.import_module", "importlib.__import__"}
DECODERS = {
    "base64.b64decode", "base64.b32decode", "base64.b16decode", "base64.a85decode",
    "base64.b85decode", "base64.urlsafe_b64decode", "base64.decodebytes",
    "base64.standard_b64decode",
    "binascii.unhexlify", "binascii.a2b_hex", "binascii.a2b_base64", "bytes.fromhex",
    "codecs.decode", "zlib.decompress", "gzip.decompress", "bz2.decompress", "lzma.decompress",
    "marshal.loads",
}  # fmt: skip
_PATH_WRAPPERS = {
    "os.path.expanduser", "os.path.expandvars", "os.path.abspath", "os.path.realpath",
    "pathlib.Path", "pathlib.PurePath", "Path", "str", "os.fspath",
}  # fmt: skip


class Unfoldable(Exception):
    """An expression whose value is not known before the program runs."""


class Resolver:
    """Names and folded values of one module: `aliases` (a name -> the dotted name it
    stands for) and `assigns` (a name -> the expressions assigned to it) are filled by the
    scanner's first pass."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}
        self.assigns: dict[str, list[ast.expr]] = {}
        self._folding: set[str] = set()

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

    # -- folding -------------------------------------------------------------------

    def fold_str(self, node: ast.AST) -> str | None:
        try:
            value = self.fold(node, 0)
        except (Unfoldable, RecursionError):
            return None
        if isinstance(value, bytes):
            return value.decode("utf-8", "replace")
        return value if isinstance(value, str) else None

    def fold(self, node: ast.AST, depth: int) -> Any:
        if depth > _MAX_FOLD_DEPTH:
            raise Unfoldable
        d = depth + 1
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            values = self.assigns.get(node.id, [])
            if len(values) != 1 or node.id in self._folding:
                raise Unfoldable
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
                raise Unfoldable
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
                    if _WIDE_PERCENT.search(left):
                        raise Unfoldable  # "%999999999s": built to exhaust the scanner
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
                    raise Unfoldable
            except (TypeError, ValueError, OverflowError, KeyError) as exc:
                raise Unfoldable from exc
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
                    raise Unfoldable from exc
            key = self.fold(node.slice, d)
            try:
                return value[key]
            except (TypeError, KeyError, IndexError) as exc:
                raise Unfoldable from exc
        if isinstance(node, ast.ListComp | ast.GeneratorExp) and len(node.generators) == 1:
            gen = node.generators[0]
            items = self.fold(gen.iter, d)
            if (
                not isinstance(gen.target, ast.Name)
                or gen.ifs
                or not isinstance(items, list | str | bytes)
            ):
                raise Unfoldable
            return [
                self.fold_with(node.elt, gen.target.id, item, d) for item in list(items)[:100_000]
            ]
        if isinstance(node, ast.Call):
            return self.fold_call(node, d)
        raise Unfoldable

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
                        raise Unfoldable
                if method == "format" and isinstance(target, str):
                    keywords = {k.arg: self.fold(k.value, d) for k in node.keywords if k.arg}
                    if len(keywords) != len(node.keywords) or _wide_format(target):
                        raise Unfoldable
                    return _capped(target.format(*vals, **keywords))
                if method in ("replace", "lower", "upper", "strip", "lstrip", "rstrip",
                              "swapcase", "title", "capitalize", "zfill"
                              ) and isinstance(target, str):  # fmt: skip
                    _check_growth(target, method, vals)
                    return _capped(getattr(target, method)(*vals))
                if (
                    method == "fromhex"
                    and isinstance(func.value, ast.Name)
                    and func.value.id in ("bytes", "bytearray")
                ):
                    return bytes.fromhex(vals[0])
            except (TypeError, ValueError, LookupError, AttributeError) as exc:
                raise Unfoldable from exc
            raise Unfoldable
        fq = self.qual(func)
        if fq == "map" and len(args) == 2:
            fn = self.qual(args[0])
            items: Any = self.fold(args[1], d)
            if fn in ("chr", "str") and isinstance(items, list | str | bytes):
                try:
                    seq: list[Any] = list(items)
                    return [chr(x) if fn == "chr" else str(x) for x in seq]
                except (TypeError, ValueError, OverflowError) as exc:
                    raise Unfoldable from exc
            raise Unfoldable
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
            raise Unfoldable from exc
        raise Unfoldable

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

    def fold_path(self, node: ast.AST) -> str | None:
        """A path expression folded: expanduser, os.path.join, Path(...) / "x", Path.home()."""
        if isinstance(node, ast.Call):
            fq = self.qual(node.func) or ""
            if fq.endswith("home") and not node.args:
                return "~"
            if fq in ("os.getenv", "os.environ.get") and node.args:
                key = self.fold_str(node.args[0])
                return "~" if key in ("HOME", "USERPROFILE") else None
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
                parts = [self.fold_path(a) for a in node.args]
                rest = [part for part in parts if part]
                return "/".join([base, *rest]) if base and len(rest) == len(parts) else None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            left, right = self.fold_path(node.left), self.fold_path(node.right)
            return f"{left}/{right}" if left and right else None
        if isinstance(node, ast.Subscript) and self.qual(node.value) == "os.environ":
            key = self.fold_str(node.slice)
            return "~" if key in ("HOME", "USERPROFILE") else None
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


def _norm(q: str) -> str:
    for prefix in ("builtins.", "__builtins__.", "__builtin__."):
        if q.startswith(prefix):
            return q[len(prefix) :]
    if q.startswith("posix."):
        return "os." + q[6:]
    return q


# A printf-style width or precision too large to build (or taken from the arguments).
_WIDE_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d{7,})|%[^%]*\.(?:\*|\d{7,})")


def _wide_format(template: str) -> bool:
    """Whether a str.format template asks for a field wider than the fold cap (or one
    whose width is itself a field): folding it would build a string that large."""
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError:
        return True
    for _, _, spec, _ in fields:
        if spec and ("{" in spec or any(int(n) > _MAX_FOLD for n in re.findall(r"\d+", spec))):
            return True
    return False


def _check_growth(target: str, method: str, vals: list[Any]) -> None:
    """Unfoldable when replace/zfill would build more than the fold cap."""
    if method == "zfill" and vals and isinstance(vals[0], int) and vals[0] > _MAX_FOLD:
        raise Unfoldable
    if method == "replace" and len(vals) >= 2:
        old, new = vals[0], vals[1]
        if isinstance(old, str) and isinstance(new, str) and len(new) > len(old):
            hits = target.count(old) if old else len(target) + 1
            if len(target) + hits * (len(new) - len(old)) > _MAX_FOLD:
                raise Unfoldable


def _capped(value: Any) -> Any:
    if isinstance(value, str | bytes | list) and len(value) > _MAX_FOLD:
        raise Unfoldable
    return value


def _decode(fq: str | None, vals: list[Any]) -> Any:
    """Apply a decoder to folded data, as the program would at run time."""
    if not vals:
        raise Unfoldable
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
        raise Unfoldable from exc
    raise Unfoldable
