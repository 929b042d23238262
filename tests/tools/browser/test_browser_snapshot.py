"""The snapshot renderer and refs, on accessibility trees shaped as Chrome returns them."""

from __future__ import annotations

from typing import Any

from habakkuk.tools.browser.snapshot import Frame, RefTable, cut, render


def node(
    ident: int,
    role: str,
    name: str = "",
    children: tuple[int, ...] = (),
    backend: int | None = None,
    parent: int | None = None,
    **props: Any,
) -> dict[str, Any]:
    found: dict[str, Any] = {
        "nodeId": str(ident),
        "ignored": False,
        "role": {"type": "role", "value": role},
        "name": {"type": "computedString", "value": name},
        "childIds": [str(c) for c in children],
        "properties": [{"name": k, "value": {"value": v}} for k, v in props.items()],
    }
    if backend is not None:
        found["backendDOMNodeId"] = backend
    if parent is not None:
        found["parentId"] = str(parent)
    return found


def page() -> list[dict[str, Any]]:
    return [
        node(1, "RootWebArea", "Shop", (2, 3, 4, 9, 10)),
        node(2, "heading", "Tables", (11,), backend=20, parent=1, level=2),
        node(11, "StaticText", "Tables", parent=2),
        node(3, "generic", "", (5, 6), parent=1),
        node(5, "link", "Menu", (), backend=21, parent=3, url="https://shop.example/menu"),
        node(6, "link", "Elsewhere", (), backend=22, parent=3, url="https://other.example/"),
        node(4, "StaticText", "• — •", parent=1),
        node(9, "checkbox", "Terrace", (), backend=23, parent=1, checked="true"),
        node(10, "Iframe", "", (), backend=24, parent=1),
    ]


def test_lines_show_roles_names_states_and_refs_and_drop_noise() -> None:
    refs = RefTable()
    text = render(page(), ref_of=lambda b: refs.ref("t", b), url="https://shop.example/x")
    assert text.splitlines() == [
        '- heading "Tables" [level=2]',
        '- link "Menu" (/menu) [ref=1]',
        '- link "Elsewhere" (https://other.example/) [ref=2]',
        '- checkbox "Terrace" [checked] [ref=3]',
        "- Iframe",
    ]


def test_same_process_frames_are_inlined_and_cross_process_ones_are_one_line() -> None:
    refs = RefTable()
    inner = [node(100, "RootWebArea", "", (101,)), node(101, "button", "Pay", (), 300, 100)]
    inlined = render(
        page(),
        ref_of=lambda b: refs.ref("t", b),
        url="https://shop.example/",
        frames={24: Frame("https://shop.example/pay", inner)},
    )
    assert inlined.splitlines()[-2:] == ["- Iframe", '  - button "Pay" [ref=4]']
    remote = render(
        page(),
        ref_of=lambda b: refs.ref("t", b),
        url="https://shop.example/",
        frames={24: Frame("https://pay.example/widget", None)},
    )
    assert (
        remote.splitlines()[-1]
        == '  - frame "https://pay.example/widget" (another site: open it to see it)'
    )


def test_a_ref_keeps_its_number_and_a_forgotten_one_is_never_reused() -> None:
    refs = RefTable()
    first = refs.ref("tab", 7)
    assert refs.ref("tab", 7) == first
    refs.forget("tab")
    assert refs.lookup(first) is None
    again = refs.ref("tab", 7)
    assert again != first
    assert refs.lookup(again) == ("tab", 7)


def test_long_output_is_cut_at_a_line_with_the_offset_that_continues_it() -> None:
    text = "\n".join(f"- text: line {i}" for i in range(5000))
    part, following = cut(text, 0, 1000)
    assert following is not None and len(part) <= 1000 and part.endswith("\n")
    rest, _ = cut(text, following, 1000)
    assert rest.startswith("- text: line ")
    assert (part + rest) == text[: len(part) + len(rest)]
    assert cut(text, len(text)) == ("", None)
