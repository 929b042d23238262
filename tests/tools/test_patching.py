"""Tests for the apply_patch engine (habakkuk.tools.patching)."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from habakkuk.tools.patching import PatchError, apply_patch, parse_patch, patch_paths


def resolver(root: Path) -> Callable[[str], Path]:
    """A resolve callback that maps patch paths under root, like the workspace layer would."""

    def resolve(path: str) -> Path:
        return root / path

    return resolve


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())


def read(path: Path) -> str:
    return path.read_bytes().decode()


# --- the *** Begin Patch format -------------------------------------------------------


def test_begin_patch_adds_updates_deletes_and_moves(tmp_path: Path) -> None:
    write(tmp_path / "keep.py", "def f():\n    return 1\n")
    write(tmp_path / "gone.txt", "bye\n")
    write(tmp_path / "old/name.py", "x = 1\ny = 2\n")
    patch = """*** Begin Patch
*** Add File: pkg/new.py
+print('hi')
+
+done = True
*** Update File: keep.py
@@ def f():
-    return 1
+    return 2
*** Delete File: gone.txt
*** Update File: old/name.py
*** Move to: new/place.py
@@
 x = 1
-y = 2
+y = 3
*** End Patch
"""
    result = apply_patch(patch, resolver(tmp_path))

    assert read(tmp_path / "pkg/new.py") == "print('hi')\n\ndone = True\n"
    assert read(tmp_path / "keep.py") == "def f():\n    return 2\n"
    assert not (tmp_path / "gone.txt").exists()
    assert not (tmp_path / "old/name.py").exists()
    assert read(tmp_path / "new/place.py") == "x = 1\ny = 3\n"
    assert result.added == ["pkg/new.py"]
    assert result.updated == ["keep.py"]
    assert result.deleted == ["gone.txt"]
    assert result.moved == [("old/name.py", "new/place.py")]
    assert result.summary.splitlines() == [
        "A pkg/new.py",
        "M keep.py",
        "D gone.txt",
        "R old/name.py -> new/place.py",
    ]


def test_begin_patch_tolerates_text_around_the_block(tmp_path: Path) -> None:
    write(tmp_path / "a.txt", "one\n")
    patch = (
        "Here you go:\n```\n*** Begin Patch\n*** Update File: a.txt\n"
        "-one\n+two\n*** End Patch\n```\n"
    )
    apply_patch(patch, resolver(tmp_path))
    assert read(tmp_path / "a.txt") == "two\n"


def test_begin_patch_context_header_picks_the_occurrence_after_it(tmp_path: Path) -> None:
    write(
        tmp_path / "m.py",
        "class A:\n    def run(self):\n        return 0\n"
        "class B:\n    def run(self):\n        return 0\n",
    )
    patch = """*** Begin Patch
*** Update File: m.py
@@ class B:
     def run(self):
-        return 0
+        return 1
*** End Patch"""
    apply_patch(patch, resolver(tmp_path))
    assert read(tmp_path / "m.py") == (
        "class A:\n    def run(self):\n        return 0\n"
        "class B:\n    def run(self):\n        return 1\n"
    )


def test_begin_patch_stacked_context_headers_narrow_step_by_step(tmp_path: Path) -> None:
    write(
        tmp_path / "m.py",
        "class A:\n    def a(self):\n        pass\n    def b(self):\n        pass\n"
        "class B:\n    def a(self):\n        pass\n    def b(self):\n        pass\n",
    )
    patch = """*** Begin Patch
*** Update File: m.py
@@ class B:
@@     def b(self):
-        pass
+        return 'B.b'
*** End Patch"""
    apply_patch(patch, resolver(tmp_path))
    assert read(tmp_path / "m.py").splitlines()[-1] == "        return 'B.b'"
    assert read(tmp_path / "m.py").count("pass") == 3


def test_begin_patch_missing_context_line_is_named(tmp_path: Path) -> None:
    write(tmp_path / "m.py", "a\nb\n")
    patch = "*** Begin Patch\n*** Update File: m.py\n@@ class Nope:\n-a\n+A\n*** End Patch"
    with pytest.raises(PatchError, match=r"m\.py: hunk 1 of 1.*'class Nope:' was not found"):
        apply_patch(patch, resolver(tmp_path))


def test_begin_patch_end_of_file_marker_prefers_the_last_occurrence(tmp_path: Path) -> None:
    write(tmp_path / "f.txt", "end\nmiddle\nend\n")
    patch = "*** Begin Patch\n*** Update File: f.txt\n-end\n+END\n*** End of File\n*** End Patch"
    apply_patch(patch, resolver(tmp_path))
    assert read(tmp_path / "f.txt") == "end\nmiddle\nEND\n"


def test_begin_patch_requires_end_patch_so_a_cut_off_patch_does_nothing(tmp_path: Path) -> None:
    write(tmp_path / "f.txt", "a\n")
    patch = "*** Begin Patch\n*** Update File: f.txt\n-a\n+b\n"
    with pytest.raises(PatchError, match=r"no '\*\*\* End Patch' line"):
        apply_patch(patch, resolver(tmp_path))
    assert read(tmp_path / "f.txt") == "a\n"


def test_begin_patch_rejects_a_stray_line_with_its_line_number() -> None:
    patch = "*** Begin Patch\n*** Update File: f.txt\n-a\n+b\nstray\n*** End Patch"
    with pytest.raises(PatchError, match=r"line 5: unexpected line .*'stray'"):
        parse_patch(patch)


def test_update_file_without_hunks_is_an_error() -> None:
    with pytest.raises(PatchError, match="has no hunks"):
        parse_patch("*** Begin Patch\n*** Update File: f.txt\n*** End Patch")


def test_file_lines_without_begin_patch_are_an_error() -> None:
    with pytest.raises(PatchError, match="no '\\*\\*\\* Begin Patch' line"):
        parse_patch("*** Update File: f.txt\n-a\n+b\n*** End Patch")


def test_empty_patch_is_an_error() -> None:
    with pytest.raises(PatchError, match="no file changes"):
        parse_patch("just some prose\n")


# --- unified diffs -----------------------------------------------------------------------


def test_git_unified_diff_updates_adds_deletes_and_renames(tmp_path: Path) -> None:
    write(tmp_path / "src/a.py", "import os\n\n\ndef main():\n    print('a')\n")
    write(tmp_path / "old.txt", "remove me\n")
    write(tmp_path / "before.txt", "same\n")
    patch = """diff --git a/src/a.py b/src/a.py
index 83db48f..bf269f4 100644
--- a/src/a.py
+++ b/src/a.py
@@ -3,3 +3,4 @@ import os
\x20
 def main():
-    print('a')
+    print('b')
+    return 0
diff --git a/new.txt b/new.txt
new file mode 100644
index 0000000..e69de29
--- /dev/null
+++ b/new.txt
@@ -0,0 +1,2 @@
+first
+second
diff --git a/old.txt b/old.txt
deleted file mode 100644
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-remove me
diff --git a/before.txt b/after.txt
similarity index 100%
rename from before.txt
rename to after.txt
"""
    assert patch_paths(patch) == ["src/a.py", "new.txt", "old.txt", "before.txt", "after.txt"]
    result = apply_patch(patch, resolver(tmp_path))

    assert read(tmp_path / "src/a.py") == (
        "import os\n\n\ndef main():\n    print('b')\n    return 0\n"
    )
    assert read(tmp_path / "new.txt") == "first\nsecond\n"
    assert not (tmp_path / "old.txt").exists()
    assert read(tmp_path / "after.txt") == "same\n"
    assert not (tmp_path / "before.txt").exists()
    assert result.summary.splitlines() == [
        "M src/a.py",
        "A new.txt",
        "D old.txt",
        "R before.txt -> after.txt",
    ]


def test_plain_unified_diff_without_prefixes(tmp_path: Path) -> None:
    write(tmp_path / "notes.md", "# Title\ntext\n")
    patch = (
        "--- notes.md\t2024-01-01 10:00:00\n+++ notes.md\t2024-01-02 10:00:00\n"
        "@@ -1,2 +1,2 @@\n # Title\n-text\n+better text\n"
    )
    apply_patch(patch, resolver(tmp_path))
    assert read(tmp_path / "notes.md") == "# Title\nbetter text\n"


def test_unified_diff_with_wrong_counts_still_applies_all_lines(tmp_path: Path) -> None:
    # Models often miscount; the hunk must not be cut short (which would apply half of it).
    write(tmp_path / "f.txt", "a\nb\nc\nd\n")
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n c\n-d\n+D\n"
    apply_patch(patch, resolver(tmp_path))
    assert read(tmp_path / "f.txt") == "a\nB\nc\nD\n"


def test_unified_diff_blank_context_line_without_its_space(tmp_path: Path) -> None:
    write(tmp_path / "f.py", "x = 1\n\ny = 2\n")
    patch = "--- a/f.py\n+++ b/f.py\n@@ -1,3 +1,3 @@\n x = 1\n\n-y = 2\n+y = 3\n"
    apply_patch(patch, resolver(tmp_path))
    assert read(tmp_path / "f.py") == "x = 1\n\ny = 3\n"


def test_unified_diff_prefers_the_match_nearest_the_stated_line(tmp_path: Path) -> None:
    block = "    if x:\n        return None\n"
    text = "def a(x):\n" + block + "\n" * 20 + "def b(x):\n" + block + "\n" * 20
    text += "def c(x):\n" + block
    write(tmp_path / "f.py", text)
    start = text.splitlines().index("def b(x):") + 2  # 1-based line of b's "if x:"
    patch = (
        f"--- a/f.py\n+++ b/f.py\n@@ -{start},2 +{start},2 @@\n"
        "     if x:\n-        return None\n+        return 'b'\n"
    )
    apply_patch(patch, resolver(tmp_path))
    lines = read(tmp_path / "f.py").splitlines()
    assert lines[start] == "        return 'b'"
    assert read(tmp_path / "f.py").count("return None") == 2


def test_unified_diff_line_numbers_only_guide_not_decide(tmp_path: Path) -> None:
    write(tmp_path / "f.txt", "zero\none\ntwo\nthree\n")
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -40,2 +40,2 @@\n two\n-three\n+THREE\n"
    apply_patch(patch, resolver(tmp_path))
    assert read(tmp_path / "f.txt") == "zero\none\ntwo\nTHREE\n"


def test_unified_pure_insertion_goes_after_the_stated_line(tmp_path: Path) -> None:
    write(tmp_path / "f.txt", "a\nb\nc\n")
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -2,0 +3 @@\n+inserted\n"
    apply_patch(patch, resolver(tmp_path))
    assert read(tmp_path / "f.txt") == "a\nb\ninserted\nc\n"


def test_binary_git_patch_is_refused() -> None:
    patch = (
        "diff --git a/img.png b/img.png\nindex 1..2 100644\n"
        "Binary files a/img.png and b/img.png differ\n"
    )
    with pytest.raises(PatchError, match=re.escape("img.png: binary patches are not supported")):
        parse_patch(patch)


def test_git_quoted_paths_are_unquoted(tmp_path: Path) -> None:
    write(tmp_path / "with space é.txt", "a\n")
    patch = (
        'diff --git "a/with space \\303\\251.txt" "b/with space \\303\\251.txt"\n'
        '--- "a/with space \\303\\251.txt"\n+++ "b/with space \\303\\251.txt"\n'
        "@@ -1 +1 @@\n-a\n+b\n"
    )
    apply_patch(patch, resolver(tmp_path))
    assert read(tmp_path / "with space é.txt") == "b\n"


# --- fuzzy matching ----------------------------------------------------------------------


def test_hunk_matches_ignoring_trailing_whitespace(tmp_path: Path) -> None:
    write(tmp_path / "f.py", "x = 1   \ny = 2\t\n")
    patch = "*** Begin Patch\n*** Update File: f.py\n x = 1\n-y = 2\n+y = 20\n*** End Patch"
    apply_patch(patch, resolver(tmp_path))
    # Untouched context keeps its own whitespace.
    assert read(tmp_path / "f.py") == "x = 1   \ny = 20\n"


def test_hunk_matches_ignoring_surrounding_whitespace(tmp_path: Path) -> None:
    write(tmp_path / "f.py", "def f():\n\tif x:\n\t\treturn 1\n")
    patch = (
        "*** Begin Patch\n*** Update File: f.py\n"
        "     if x:\n-        return 1\n+\t\treturn 2\n*** End Patch"
    )
    apply_patch(patch, resolver(tmp_path))
    assert read(tmp_path / "f.py") == "def f():\n\tif x:\n\t\treturn 2\n"


def test_exact_match_wins_over_a_whitespace_insensitive_one(tmp_path: Path) -> None:
    write(tmp_path / "f.txt", "  item\nother\nitem\n")
    patch = "*** Begin Patch\n*** Update File: f.txt\n-item\n+ITEM\n*** End Patch"
    apply_patch(patch, resolver(tmp_path))
    assert read(tmp_path / "f.txt") == "  item\nother\nITEM\n"


# --- line endings and final newlines ---------------------------------------------------


def test_crlf_file_stays_crlf(tmp_path: Path) -> None:
    (tmp_path / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    patch = "*** Begin Patch\n*** Update File: win.txt\n one\n-two\n+TWO\n+extra\n*** End Patch"
    apply_patch(patch, resolver(tmp_path))
    assert (tmp_path / "win.txt").read_bytes() == b"one\r\nTWO\r\nextra\r\nthree\r\n"


def test_crlf_patch_text_applies_to_lf_file(tmp_path: Path) -> None:
    write(tmp_path / "f.txt", "a\nb\n")
    patch = "--- a/f.txt\r\n+++ b/f.txt\r\n@@ -1,2 +1,2 @@\r\n a\r\n-b\r\n+c\r\n"
    apply_patch(patch, resolver(tmp_path))
    assert (tmp_path / "f.txt").read_bytes() == b"a\nc\n"


def test_missing_final_newline_is_preserved_when_untouched_by_markers(tmp_path: Path) -> None:
    write(tmp_path / "f.txt", "a\nb")
    patch = "*** Begin Patch\n*** Update File: f.txt\n-a\n+A\n b\n*** End Patch"
    apply_patch(patch, resolver(tmp_path))
    assert read(tmp_path / "f.txt") == "A\nb"


def test_no_newline_marker_removes_the_final_newline(tmp_path: Path) -> None:
    write(tmp_path / "f.txt", "a\nb\n")
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n\\ No newline at end of file\n"
    apply_patch(patch, resolver(tmp_path))
    assert read(tmp_path / "f.txt") == "a\nc"


def test_no_newline_marker_on_old_side_adds_the_final_newline(tmp_path: Path) -> None:
    write(tmp_path / "f.txt", "a\nb")
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n"
    apply_patch(patch, resolver(tmp_path))
    assert read(tmp_path / "f.txt") == "a\nb\n"


def test_added_file_without_final_newline(tmp_path: Path) -> None:
    patch = (
        "*** Begin Patch\n*** Add File: n.txt\n+one\n+two\n"
        "\\ No newline at end of file\n*** End Patch"
    )
    apply_patch(patch, resolver(tmp_path))
    assert read(tmp_path / "n.txt") == "one\ntwo"


# --- all or nothing ----------------------------------------------------------------------


def test_failing_second_hunk_writes_nothing_and_names_hunk_and_line(tmp_path: Path) -> None:
    write(tmp_path / "first.txt", "alpha\nbeta\n")
    second = "def f():\n    a = 1\n    b = 2\n    return a + b\n"
    write(tmp_path / "second.py", second)
    patch = """*** Begin Patch
*** Add File: created.txt
+new
*** Update File: first.txt
-alpha
+ALPHA
*** Update File: second.py
@@
 def f():
-    a = 1
+    a = 10
@@
     b = 3
-    return a + b
+    return a * b
*** End Patch"""
    with pytest.raises(PatchError) as info:
        apply_patch(patch, resolver(tmp_path))

    message = str(info.value)
    assert "second.py" in message
    assert "hunk 2 of 2" in message
    assert "'     b = 3' | '-    return a + b'" in message  # its first lines identify it
    assert "expected '    b = 3', found '    b = 2'" in message
    assert "\n" not in message
    assert read(tmp_path / "first.txt") == "alpha\nbeta\n"
    assert read(tmp_path / "second.py") == second
    assert not (tmp_path / "created.txt").exists()


def test_overlapping_hunks_are_explained(tmp_path: Path) -> None:
    write(tmp_path / "f.txt", "a\nb\nc\n")
    patch = "*** Begin Patch\n*** Update File: f.txt\n a\n-b\n+B\n@@\n-b\n+X\n c\n*** End Patch"
    with pytest.raises(PatchError, match=r"hunk 2 of 2 .*overlaps the previous hunk"):
        apply_patch(patch, resolver(tmp_path))
    assert read(tmp_path / "f.txt") == "a\nb\nc\n"


def test_hunk_found_nowhere_says_so(tmp_path: Path) -> None:
    write(tmp_path / "f.txt", "a\nb\n")
    patch = "*** Begin Patch\n*** Update File: f.txt\n-zzz\n+y\n*** End Patch"
    with pytest.raises(PatchError, match=r"f\.txt: hunk 1 of 1.*none of its lines were found"):
        apply_patch(patch, resolver(tmp_path))


def test_adding_an_existing_file_is_an_error(tmp_path: Path) -> None:
    write(tmp_path / "f.txt", "a\n")
    with pytest.raises(PatchError, match=re.escape("cannot add f.txt: it already exists")):
        apply_patch("*** Begin Patch\n*** Add File: f.txt\n+b\n*** End Patch", resolver(tmp_path))
    assert read(tmp_path / "f.txt") == "a\n"


def test_updating_a_missing_file_is_an_error(tmp_path: Path) -> None:
    patch = "*** Begin Patch\n*** Update File: nope.txt\n-a\n+b\n*** End Patch"
    with pytest.raises(PatchError, match=re.escape("cannot update nope.txt: it does not exist")):
        apply_patch(patch, resolver(tmp_path))


def test_deleting_a_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(PatchError, match=re.escape("cannot delete nope.txt: it does not exist")):
        apply_patch("*** Begin Patch\n*** Delete File: nope.txt\n*** End Patch", resolver(tmp_path))


def test_moving_onto_an_existing_file_is_an_error(tmp_path: Path) -> None:
    write(tmp_path / "a.txt", "a\n")
    write(tmp_path / "b.txt", "b\n")
    patch = "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n*** End Patch"
    with pytest.raises(
        PatchError, match=re.escape("cannot move a.txt to b.txt: b.txt already exists")
    ):
        apply_patch(patch, resolver(tmp_path))
    assert read(tmp_path / "a.txt") == "a\n"


def test_later_sections_see_earlier_changes_in_memory(tmp_path: Path) -> None:
    patch = """*** Begin Patch
*** Add File: f.txt
+one
*** Update File: f.txt
-one
+two
*** End Patch"""
    apply_patch(patch, resolver(tmp_path))
    assert read(tmp_path / "f.txt") == "two\n"


def test_resolve_sees_every_path_before_anything_happens(tmp_path: Path) -> None:
    write(tmp_path / "a.txt", "a\n")
    seen: list[str] = []

    class Outside(Exception):
        pass

    def resolve(path: str) -> Path:
        seen.append(path)
        if path.startswith("../"):
            raise Outside(path)
        return tmp_path / path

    patch = (
        "*** Begin Patch\n*** Update File: a.txt\n*** Move to: ../escape.txt\n-a\n+b\n*** End Patch"
    )
    with pytest.raises(Outside):
        apply_patch(patch, resolve)
    assert seen == ["a.txt", "../escape.txt"]
    assert read(tmp_path / "a.txt") == "a\n"


def test_patch_paths_lists_move_targets_once() -> None:
    patch = """*** Begin Patch
*** Update File: a.py
*** Move to: b.py
-x
+y
*** Update File: a.py
-y
+z
*** Delete File: c.py
*** End Patch"""
    # The second update of a.py is odd but parses; paths are listed once, in order.
    assert patch_paths(patch) == ["a.py", "b.py", "c.py"]


def test_update_keeps_the_file_mode(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    write(script, "#!/bin/sh\necho a\n")
    os.chmod(script, 0o755)
    patch = "*** Begin Patch\n*** Update File: run.sh\n-echo a\n+echo b\n*** End Patch"
    apply_patch(patch, resolver(tmp_path))
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    assert read(script) == "#!/bin/sh\necho b\n"
    assert [p.name for p in tmp_path.iterdir()] == ["run.sh"]  # no temp files left behind


def test_non_utf8_bytes_elsewhere_in_the_file_survive(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_bytes(b"caf\xe9\nline\n")
    patch = "*** Begin Patch\n*** Update File: f.txt\n-line\n+LINE\n*** End Patch"
    apply_patch(patch, resolver(tmp_path))
    assert (tmp_path / "f.txt").read_bytes() == b"caf\xe9\nLINE\n"
