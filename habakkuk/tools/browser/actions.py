"""What the browser tools do on a tab, over CDP (spec 000 "Browser": Actions, Files).

Clicks scroll the element into view and press a real mouse at the middle of its first
visible box; typing focuses (and selects, unless appending) the field by script, then
Input.insertText, so frameworks see ordinary input events; select sets an option by value
or label and fires input and change. An action that starts a navigation within half a
second waits for the load, giving up a second before the call's deadline.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Any
from urllib.parse import urljoin

from habakkuk.engine.timeouts import wait_within

from .cdp import CdpError
from .session import Browser, Tab
from .snapshot import Frame, cut, render

NAVIGATION_GRACE = 0.5

# Key name -> (code, Windows virtual key code, text it types).
KEYS: dict[str, tuple[str, int, str]] = {
    "Enter": ("Enter", 13, "\r"),
    "Tab": ("Tab", 9, ""),
    "Escape": ("Escape", 27, ""),
    "Backspace": ("Backspace", 8, ""),
    "Delete": ("Delete", 46, ""),
    "Space": ("Space", 32, " "),
    "ArrowUp": ("ArrowUp", 38, ""),
    "ArrowDown": ("ArrowDown", 40, ""),
    "ArrowLeft": ("ArrowLeft", 37, ""),
    "ArrowRight": ("ArrowRight", 39, ""),
    "PageUp": ("PageUp", 33, ""),
    "PageDown": ("PageDown", 34, ""),
    "Home": ("Home", 36, ""),
    "End": ("End", 35, ""),
}
MODIFIERS = {"Alt": 1, "Control": 2, "Meta": 4, "Shift": 8}


class ActionError(Exception):
    """An action that cannot be done as asked (a stale ref, no such option)."""


class Deadline:
    """The end of one call: waits stop a second before it."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self, margin: float = 1.0) -> float:
        """Seconds left before the margin (at least 0)."""
        return max(0.0, self.end - time.monotonic() - margin)


async def wait_load(tab: Tab, deadline: Deadline) -> bool:
    """Wait for the tab's load event; False when it was still loading at the deadline."""
    try:
        await wait_within(tab.loaded.wait(), deadline.left())
    except TimeoutError:
        return False
    return True


async def settle(tab: Tab, deadline: Deadline) -> str:
    """After an action: wait for a navigation it started within half a second."""
    try:
        await wait_within(tab.navigating.wait(), min(NAVIGATION_GRACE, deadline.left()))
    except TimeoutError:
        return ""
    if await wait_load(tab, deadline):
        return ""
    return "\n[the page is still loading]"


async def navigate(browser: Browser, tab: Tab, url: str, deadline: Deadline) -> str:
    """Load `url` in the tab; its title and address, or why it did not load."""
    tab.loaded.clear()
    tab.navigating.clear()
    result = await browser.conn.send("Page.navigate", {"url": url}, tab.session)
    error = result.get("errorText")
    if error:
        return f"did not load {url}: {error}"
    if not result.get("loaderId"):  # a same-document navigation (a #fragment)
        return await describe(browser, tab)
    loaded = await wait_load(tab, deadline)
    text = await describe(browser, tab)
    return text if loaded else text + "\n[the page is still loading]"


async def describe(browser: Browser, tab: Tab) -> str:
    """The tab's title and address, read from the page."""
    info = await evaluate_value(browser, tab, "[document.title, location.href]")
    if isinstance(info, list) and len(info) == 2:
        tab.title, tab.url = str(info[0]), str(info[1])
    url = tab.url if len(tab.url) <= 300 else tab.url[:300] + "…"
    return f"{tab.title or '(no title)'} — {url}"


async def evaluate_value(browser: Browser, tab: Tab, expression: str) -> Any:
    """The JSON value of a script in the page (exceptions are ActionErrors)."""
    result = await browser.conn.send(
        "Runtime.evaluate",
        {"expression": expression, "returnByValue": True, "awaitPromise": True},
        tab.session,
    )
    if "exceptionDetails" in result:
        details = result["exceptionDetails"]
        message = details.get("exception", {}).get("description") or details.get("text")
        raise ActionError(f"the script threw: {str(message)[:500]}")
    return result.get("result", {}).get("value")


async def snapshot(browser: Browser, tab: Tab, offset: int) -> str:
    """The tab's accessibility tree as lines, from `offset`, with the note to continue."""
    head = await describe(browser, tab)
    text = await snapshot_text(browser, tab)
    part, following = cut(text, offset)
    if following is not None:
        part += (
            f"\n[cut at {following:,} of {len(text):,} characters: call browser_snapshot "
            f"with offset={following} for the rest]"
        )
    return f"{head}\n{part}" if part else f"{head}\n(nothing to show from offset {offset})"


async def snapshot_text(browser: Browser, tab: Tab) -> str:
    """The whole rendering of the tab (main frame, same-process frames inlined)."""
    tree = await browser.conn.send("Accessibility.getFullAXTree", session=tab.session)
    nodes = tree.get("nodes", [])
    frames = await _child_frames(browser, tab)
    for node in nodes:  # frames of another process are not in this session's tree
        backend = node.get("backendDOMNodeId")
        role = (node.get("role") or {}).get("value")
        if role == "Iframe" and isinstance(backend, int) and backend not in frames:
            frames[backend] = Frame(await _frame_source(browser, tab, backend), None)
    return render(
        nodes,
        ref_of=lambda backend: browser.refs.ref(tab.target, backend),
        url=tab.url,
        frames=frames,
    )


async def _child_frames(browser: Browser, tab: Tab) -> dict[int, Frame]:
    found: dict[int, Frame] = {}
    try:
        tree = await browser.conn.send("Page.getFrameTree", session=tab.session)
    except CdpError:
        return found
    todo = list(tree.get("frameTree", {}).get("childFrames", []))
    while todo:
        child = todo.pop()
        frame = child.get("frame", {})
        frame_id = frame.get("id")
        try:
            owner = await browser.conn.send("DOM.getFrameOwner", {"frameId": frame_id}, tab.session)
            nodes = await browser.conn.send(
                "Accessibility.getFullAXTree", {"frameId": frame_id}, tab.session
            )
        except CdpError:
            # A cross-process frame lives in another session: one line with its URL.
            with_owner = await _frame_owner(browser, tab, frame_id)
            if with_owner is not None:
                found[with_owner] = Frame(str(frame.get("url", "")), None)
            continue
        found[int(owner["backendNodeId"])] = Frame(
            str(frame.get("url", "")), nodes.get("nodes", [])
        )
        todo.extend(child.get("childFrames", []))
    return found


async def _frame_source(browser: Browser, tab: Tab, backend: int) -> str:
    try:
        found = await browser.conn.send("DOM.describeNode", {"backendNodeId": backend}, tab.session)
    except CdpError:
        return "(unknown address)"
    attributes = found.get("node", {}).get("attributes", [])
    pairs = dict(zip(attributes[0::2], attributes[1::2], strict=False))
    source = str(pairs.get("src", "(no address)"))
    return source if "://" in source or not tab.url else urljoin(tab.url, source)


async def _frame_owner(browser: Browser, tab: Tab, frame_id: str) -> int | None:
    try:
        owner = await browser.conn.send("DOM.getFrameOwner", {"frameId": frame_id}, tab.session)
    except CdpError:
        return None
    return int(owner["backendNodeId"])


async def element(browser: Browser, ref: int) -> tuple[Tab, int]:
    """The tab and backend node of a ref; ActionError when the ref is not live. A ref on
    another tab makes that tab the current one, brought to the front as browser_tabs
    select does (Chromium holds input to a background tab about five seconds)."""
    found = browser.refs.lookup(ref)
    if found is None or found[0] not in browser.tabs:
        raise ActionError(
            f"ref {ref} is not on the page any more (it navigated or changed): take a new "
            "browser_snapshot"
        )
    tab = browser.tabs[found[0]]
    if browser.current != found[0]:
        await browser.select(tab)
    return tab, found[1]


async def _object(browser: Browser, tab: Tab, backend: int) -> str:
    try:
        result = await browser.conn.send("DOM.resolveNode", {"backendNodeId": backend}, tab.session)
    except CdpError:
        raise ActionError(
            "that element is gone from the page: take a new browser_snapshot"
        ) from None
    return str(result["object"]["objectId"])


async def call_on(browser: Browser, tab: Tab, backend: int, function: str, *args: Any) -> Any:
    """Run `function` with `this` the element and `args`; its JSON value."""
    object_id = await _object(browser, tab, backend)
    result = await browser.conn.send(
        "Runtime.callFunctionOn",
        {
            "objectId": object_id,
            "functionDeclaration": function,
            "arguments": [{"value": a} for a in args],
            "returnByValue": True,
            "awaitPromise": True,
        },
        tab.session,
    )
    if "exceptionDetails" in result:
        raise ActionError(str(result["exceptionDetails"].get("text", "script error"))[:300])
    return result.get("result", {}).get("value")


async def click(browser: Browser, ref: int, deadline: Deadline, double: bool = False) -> str:
    """A real mouse click at the middle of the element's first visible box."""
    tab, backend = await element(browser, ref)
    conn = browser.conn
    try:
        await conn.send("DOM.scrollIntoViewIfNeeded", {"backendNodeId": backend}, tab.session)
        quads = await conn.send("DOM.getContentQuads", {"backendNodeId": backend}, tab.session)
    except CdpError:
        raise ActionError(f"ref {ref} cannot be clicked: it has no visible box") from None
    box = next((q for q in quads.get("quads", []) if _area(q) > 1), None)
    if box is None:
        raise ActionError(f"ref {ref} cannot be clicked: it has no visible box")
    x = sum(box[0::2]) / 4
    y = sum(box[1::2]) / 4
    tab.navigating.clear()
    count = 2 if double else 1
    await conn.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y}, tab.session)
    for clicks in range(1, count + 1):
        for kind in ("mousePressed", "mouseReleased"):
            await conn.send(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": x, "y": y, "button": "left", "clickCount": clicks},
                tab.session,
            )
    return f"clicked ref {ref}" + await settle(tab, deadline)


def _area(quad: list[float]) -> float:
    xs, ys = quad[0::2], quad[1::2]
    return abs(sum(xs[i] * ys[(i + 1) % 4] - xs[(i + 1) % 4] * ys[i] for i in range(4)) / 2)


_FOCUS = """function(append) {
  this.scrollIntoView({block: 'center'});
  this.focus();
  if (!append) {
    if (typeof this.select === 'function') this.select();
    else if (this.isContentEditable) document.getSelection().selectAllChildren(this);
  } else if (typeof this.setSelectionRange === 'function' && typeof this.value === 'string') {
    try { this.setSelectionRange(this.value.length, this.value.length); } catch (e) {}
  }
  return document.activeElement === this || this.contains(document.activeElement);
}"""


async def type_text(
    browser: Browser, ref: int, text: str, append: bool, submit: bool, deadline: Deadline
) -> str:
    """Focus the field, select its text unless appending, insert `text` (and Enter)."""
    tab, backend = await element(browser, ref)
    focused = await call_on(browser, tab, backend, _FOCUS, append)
    if not focused:
        raise ActionError(f"ref {ref} cannot take text (it does not take the focus)")
    tab.navigating.clear()
    if text:
        await browser.conn.send("Input.insertText", {"text": text}, tab.session)
    else:
        for kind in ("keyDown", "keyUp"):  # empty text: delete the selection
            key = {"type": kind, "key": "Delete", "code": "Delete", "windowsVirtualKeyCode": 46}
            await browser.conn.send("Input.dispatchKeyEvent", key, tab.session)
    done = f"typed {len(text)} character(s) into ref {ref}"
    if submit:
        await press_keys(browser, tab, "Enter")
        done += " and pressed Enter"
    return done + await settle(tab, deadline)


_SELECT = """function(wanted) {
  if (this.tagName !== 'SELECT') return 'not a select';
  const options = Array.from(this.options);
  const picked = [];
  for (const want of wanted) {
    const option = options.find(o => o.value === want) ||
      options.find(o => o.label.trim() === want.trim()) ||
      options.find(o => o.label.trim().toLowerCase() === want.trim().toLowerCase());
    if (!option) return 'no option ' + JSON.stringify(want);
    picked.push(option);
  }
  if (!this.multiple && picked.length > 1) return 'this select takes one option';
  for (const o of options) o.selected = picked.includes(o);
  this.dispatchEvent(new Event('input', {bubbles: true}));
  this.dispatchEvent(new Event('change', {bubbles: true}));
  return 'ok:' + picked.map(o => o.label).join(', ');
}"""


async def select(browser: Browser, ref: int, values: list[str], deadline: Deadline) -> str:
    """Choose options of a <select> by value or label, firing input and change."""
    tab, backend = await element(browser, ref)
    tab.navigating.clear()
    outcome = str(await call_on(browser, tab, backend, _SELECT, values))
    if not outcome.startswith("ok:"):
        raise ActionError(f"ref {ref}: {outcome}")
    return f"selected {outcome[3:]} in ref {ref}" + await settle(tab, deadline)


async def press_keys(browser: Browser, tab: Tab, combo: str) -> None:
    """Press a key or a combination (Control+a, Shift+Tab, Enter, a)."""
    *mods, key = combo.split("+") if combo != "+" else ["+"]
    bits = 0
    for mod in mods:
        if mod not in MODIFIERS:
            raise ActionError(f"unknown modifier {mod!r} (known: {', '.join(MODIFIERS)})")
        bits |= MODIFIERS[mod]
    if key in KEYS:
        code, vk, text = KEYS[key]
    elif len(key) == 1:
        code = f"Key{key.upper()}" if key.isalpha() else ""
        vk, text = ord(key.upper()), key
    else:
        raise ActionError(f"unknown key {key!r} (a character, or one of {', '.join(KEYS)})")
    if bits & ~MODIFIERS["Shift"]:
        text = ""  # a shortcut types nothing
    down: dict[str, Any] = {
        "type": "keyDown" if text else "rawKeyDown",
        "key": key,
        "code": code,
        "windowsVirtualKeyCode": vk,
        "modifiers": bits,
    }
    if text:
        down["text"] = text
    await browser.conn.send("Input.dispatchKeyEvent", down, tab.session)
    up = {"type": "keyUp", "key": key, "code": code, "windowsVirtualKeyCode": vk, "modifiers": bits}
    await browser.conn.send("Input.dispatchKeyEvent", up, tab.session)


async def press(browser: Browser, combo: str, deadline: Deadline) -> str:
    """A key press on the current tab."""
    tab = await browser.current_tab()
    tab.navigating.clear()
    await press_keys(browser, tab, combo)
    return f"pressed {combo}" + await settle(tab, deadline)


async def scroll(browser: Browser, ref: int | None, dy: int, deadline: Deadline) -> str:
    """Scroll an element into view, or the page by `dy` pixels (a mouse wheel)."""
    if ref is not None:
        tab, backend = await element(browser, ref)
        await browser.conn.send(
            "DOM.scrollIntoViewIfNeeded", {"backendNodeId": backend}, tab.session
        )
        return f"scrolled ref {ref} into view"
    tab = await browser.current_tab()
    script = (
        f"window.scrollBy({{top: {int(dy)}, behavior: 'instant'}});"
        "[Math.round(scrollY), document.documentElement.scrollHeight]"
    )
    position = await evaluate_value(browser, tab, script)
    return f"scrolled by {dy}px; now at {position[0]} of {position[1]}px"


async def back(browser: Browser, deadline: Deadline) -> str:
    """The previous page of the tab's history."""
    tab = await browser.current_tab()
    history = await browser.conn.send("Page.getNavigationHistory", session=tab.session)
    index = int(history.get("currentIndex", 0))
    if index <= 0:
        raise ActionError("there is no earlier page in this tab")
    entry = history["entries"][index - 1]
    tab.loaded.clear()
    tab.navigating.clear()
    await browser.conn.send("Page.navigateToHistoryEntry", {"entryId": entry["id"]}, tab.session)
    note = await settle(tab, deadline)
    return "went back to " + await describe(browser, tab) + note


async def wait_for(browser: Browser, text: str | None, seconds: float, deadline: Deadline) -> str:
    """Wait until `text` shows in the page (or `seconds` pass, without text)."""
    tab = await browser.current_tab()
    if not text:
        await asyncio.sleep(min(seconds, deadline.left()))
        return f"waited {seconds:g}s"
    expression = f"document.body ? document.body.innerText.includes({json.dumps(text)}) : false"
    limit = min(seconds, deadline.left())
    end = time.monotonic() + limit
    while True:
        if await evaluate_value(browser, tab, expression):
            return f"{text!r} is on the page"
        if time.monotonic() >= end:
            return f"{text!r} did not appear within {limit:g}s"
        await asyncio.sleep(0.2)


async def screenshot(browser: Browser, full_page: bool, jpeg: bool) -> bytes:
    """A PNG (or JPEG) of the current tab's viewport, or of the page up to 8,000 px."""
    tab = await browser.current_tab()
    params: dict[str, Any] = {"format": "jpeg" if jpeg else "png"}
    if jpeg:
        params["quality"] = 80
    if full_page:
        metrics = await browser.conn.send("Page.getLayoutMetrics", session=tab.session)
        size = metrics.get("cssContentSize", {})
        width = float(size.get("width", 1280))
        height = min(float(size.get("height", 900)), 8000.0)
        params["clip"] = {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}
        params["captureBeyondViewport"] = True
    result = await browser.conn.send("Page.captureScreenshot", params, tab.session)
    return base64.b64decode(result["data"])


async def pdf(browser: Browser) -> bytes:
    """The current tab printed to PDF (headless browsers only)."""
    tab = await browser.current_tab()
    try:
        result = await browser.conn.send("Page.printToPDF", {"printBackground": True}, tab.session)
    except CdpError as exc:
        raise ActionError(f"cannot print this page to PDF: {exc.message}") from None
    return base64.b64decode(result["data"])
