"""Key combinations the model writes ("ctrl+l", "Return", "cmd+shift+t"), read once and
spelled for each backend: X keysyms for xdotool, Linux input codes for ydotool, virtual
key codes (or the character) for macOS System Events."""

from __future__ import annotations

from dataclasses import dataclass

MODIFIERS = ("ctrl", "alt", "shift", "super")
_MODIFIER_ALIASES = {
    "ctrl": "ctrl", "control": "ctrl", "ctl": "ctrl",
    "alt": "alt", "option": "alt", "opt": "alt",
    "shift": "shift",
    "super": "super", "cmd": "super", "command": "super", "meta": "super", "win": "super",
    "windows": "super",
}  # fmt: skip

# Named keys, by their X keysym (the canonical spelling), and the other ways to write them.
NAMED_KEYS = (
    "Return", "Tab", "Escape", "BackSpace", "Delete", "space", "Up", "Down", "Left", "Right",
    "Home", "End", "Page_Up", "Page_Down", "Insert",
    *(f"F{n}" for n in range(1, 13)),
)  # fmt: skip
_KEY_ALIASES = {
    "enter": "Return", "return": "Return", "ret": "Return", "kp_enter": "Return",
    "tab": "Tab", "esc": "Escape", "escape": "Escape", "backspace": "BackSpace",
    "back_space": "BackSpace", "bs": "BackSpace", "delete": "Delete", "del": "Delete",
    "space": "space", "spacebar": "space", "up": "Up", "down": "Down", "left": "Left",
    "right": "Right", "arrowup": "Up", "arrowdown": "Down", "arrowleft": "Left",
    "arrowright": "Right", "home": "Home", "end": "End", "pageup": "Page_Up",
    "page_up": "Page_Up", "pgup": "Page_Up", "prior": "Page_Up", "pagedown": "Page_Down",
    "page_down": "Page_Down", "pgdn": "Page_Down", "next": "Page_Down", "insert": "Insert",
    "ins": "Insert", "plus": "+", "minus": "-", "comma": ",", "period": ".", "slash": "/",
}  # fmt: skip
_KEY_ALIASES.update({f"f{n}": f"F{n}" for n in range(1, 13)})

# X keysym names of the punctuation xdotool cannot take as the character itself.
_X_PUNCTUATION = {
    ",": "comma", ".": "period", "/": "slash", ";": "semicolon", "'": "apostrophe",
    "[": "bracketleft", "]": "bracketright", "\\": "backslash", "-": "minus", "=": "equal",
    "`": "grave", "+": "plus", "!": "exclam", "@": "at", "#": "numbersign", "$": "dollar",
    "%": "percent", "^": "asciicircum", "&": "ampersand", "*": "asterisk",
    "(": "parenleft", ")": "parenright", "_": "underscore", ":": "colon", '"': "quotedbl",
    "<": "less", ">": "greater", "?": "question", "{": "braceleft", "}": "braceright",
    "|": "bar", "~": "asciitilde", " ": "space",
}  # fmt: skip


class BadKey(ValueError):
    """A key combination that cannot be read; the message says why."""


@dataclass(frozen=True)
class KeyCombo:
    """Modifiers (from MODIFIERS, in that order) and one key: a NAMED_KEYS name or a
    single character ("" only for keys to hold: modifiers alone, parse_held)."""

    modifiers: tuple[str, ...]
    key: str

    def __str__(self) -> str:
        return "+".join((*self.modifiers, self.key) if self.key else self.modifiers)

    def xdotool(self) -> str:
        """The combination as xdotool's `key` takes it."""
        if not self.key:
            return "+".join(self.modifiers)
        key = _X_PUNCTUATION.get(self.key, self.key)
        return "+".join((*self.modifiers, key))


def parse_combo(text: str) -> KeyCombo:
    """Read "ctrl+shift+t", "Return", "cmd+c", "alt+F4" (BadKey when it is no key)."""
    raw = text.strip()
    if not raw:
        raise BadKey("no key given")
    if raw == "+":
        return KeyCombo((), "+")
    parts = raw.split("+")
    if parts[-1] == "" and len(parts) > 1:  # "ctrl++": the plus key
        parts = [*parts[:-2], "+"]
    *mods, last = [part.strip() for part in parts]
    modifiers: set[str] = set()
    for mod in mods:
        canonical = _MODIFIER_ALIASES.get(mod.lower())
        if canonical is None:
            raise BadKey(f"{mod!r} is not a modifier (use ctrl, alt, shift or super/cmd)")
        modifiers.add(canonical)
    if not mods and last.lower() in _MODIFIER_ALIASES:
        raise BadKey(f"{last!r} alone is a modifier; give the key it goes with")
    key = _key(last)
    return KeyCombo(tuple(m for m in MODIFIERS if m in modifiers), key)


def parse_held(text: str) -> KeyCombo:
    """Keys to hold down while doing something else: a combination as parse_combo reads
    it, or modifiers alone ("shift", "ctrl+shift"), whose key is then ""."""
    parts = [part.strip().lower() for part in text.strip().split("+")]
    if parts and all(part in _MODIFIER_ALIASES for part in parts):
        held = {_MODIFIER_ALIASES[part] for part in parts}
        return KeyCombo(tuple(m for m in MODIFIERS if m in held), "")
    return parse_combo(text)


def _key(word: str) -> str:
    if len(word) == 1 and word.isprintable():
        return word
    alias = _KEY_ALIASES.get(word.lower())
    if alias is not None:
        return alias
    for name in NAMED_KEYS:
        if name.lower() == word.lower():
            return name
    raise BadKey(
        f"unknown key {word!r} (use a character, or one of: {', '.join(NAMED_KEYS[:15])}, F1-F12)"
    )


# Linux input event codes (linux/input-event-codes.h), for ydotool.
LINUX_CODES: dict[str, int] = {
    "ctrl": 29, "shift": 42, "alt": 56, "super": 125,
    "Escape": 1, "BackSpace": 14, "Tab": 15, "Return": 28, "space": 57, "Home": 102,
    "Up": 103, "Page_Up": 104, "Left": 105, "Right": 106, "End": 107, "Down": 108,
    "Page_Down": 109, "Insert": 110, "Delete": 111,
    "F1": 59, "F2": 60, "F3": 61, "F4": 62, "F5": 63, "F6": 64, "F7": 65, "F8": 66,
    "F9": 67, "F10": 68, "F11": 87, "F12": 88,
    "1": 2, "2": 3, "3": 4, "4": 5, "5": 6, "6": 7, "7": 8, "8": 9, "9": 10, "0": 11,
    "-": 12, "=": 13, "q": 16, "w": 17, "e": 18, "r": 19, "t": 20, "y": 21, "u": 22,
    "i": 23, "o": 24, "p": 25, "[": 26, "]": 27, "a": 30, "s": 31, "d": 32, "f": 33,
    "g": 34, "h": 35, "j": 36, "k": 37, "l": 38, ";": 39, "'": 40, "`": 41, "\\": 43,
    "z": 44, "x": 45, "c": 46, "v": 47, "b": 48, "n": 49, "m": 50, ",": 51, ".": 52,
    "/": 53, " ": 57,
}  # fmt: skip
# Characters typed with shift on a US layout, and the key they share.
_SHIFTED = dict(zip('!@#$%^&*()_+{}|:"~<>?', "1234567890-=[]\\;'`,./", strict=True))


def linux_codes(combo: KeyCombo) -> list[int]:
    """The input codes to press in order (modifiers first) for ydotool; BadKey for a key
    with no code on a US layout."""
    key, modifiers = combo.key, list(combo.modifiers)
    if not key:  # modifiers alone (keys to hold)
        return [LINUX_CODES[m] for m in modifiers]
    if len(key) == 1 and (key.isupper() or key in _SHIFTED):
        modifiers = [*modifiers, "shift"] if "shift" not in modifiers else modifiers
        key = _SHIFTED.get(key, key.lower())
    code = LINUX_CODES.get(key)
    if code is None:
        raise BadKey(f"no key code for {combo.key!r} (ydotool)")
    return [LINUX_CODES[m] for m in modifiers] + [code]


# macOS virtual key codes of the named keys (HIToolbox Events.h).
MAC_CODES: dict[str, int] = {
    "Return": 36, "Tab": 48, "space": 49, "BackSpace": 51, "Escape": 53, "Delete": 117,
    "Home": 115, "End": 119, "Page_Up": 116, "Page_Down": 121, "Left": 123, "Right": 124,
    "Down": 125, "Up": 126, "Insert": 114,
    "F1": 122, "F2": 120, "F3": 99, "F4": 118, "F5": 96, "F6": 97, "F7": 98, "F8": 100,
    "F9": 101, "F10": 109, "F11": 103, "F12": 111,
}  # fmt: skip
MAC_MODIFIERS = {"ctrl": "control down", "alt": "option down", "shift": "shift down",
                 "super": "command down"}  # fmt: skip
