"""What `habakkuk skills install SOURCE` understands SOURCE to be."""

from __future__ import annotations

from pathlib import Path

import pytest

from habakkuk.engine.errors import HabakkukError
from habakkuk.knowledge.hub.sources import parse_source

REGISTRIES = {"acme": "https://skills.example/index.json"}


@pytest.mark.parametrize(
    ("text", "kind", "canonical", "fields"),
    [
        ("github:acme/skills", "github", "github:acme/skills", {"path": "", "ref": ""}),
        (
            "github:acme/skills/tools/weekly@v1.2",
            "github",
            "github:acme/skills/tools/weekly@v1.2",
            {"owner": "acme", "repo": "skills", "path": "tools/weekly", "ref": "v1.2"},
        ),
        (
            "https://github.com/acme/skills/tree/main/weekly",
            "github",
            "github:acme/skills/weekly@main",
            {"path": "weekly", "ref": "main"},
        ),
        (
            "https://github.com/acme/skills/blob/dev/weekly/SKILL.md",
            "github",
            "github:acme/skills/weekly@dev",
            {"path": "weekly", "ref": "dev"},
        ),
        ("https://github.com/acme/skills.git", "github", "github:acme/skills", {}),
        ("octo/tools/report@feature/x", "github", "github:octo/tools/report@feature/x", {}),
        (
            "https://example.com/skills/weekly/SKILL.md",
            "url",
            "https://example.com/skills/weekly/SKILL.md",
            {},
        ),
        ("registry:weekly-report", "registry", "registry:weekly-report", {"registry": ""}),
        ("acme/weekly-report", "registry", "registry:acme/weekly-report", {"registry": "acme"}),
        ("weekly-report", "registry", "registry:weekly-report", {"name": "weekly-report"}),
    ],
)
def test_sources_parse_to_their_kind_and_canonical_spelling(
    text: str, kind: str, canonical: str, fields: dict[str, str]
) -> None:
    source = parse_source(text, REGISTRIES)
    assert (source.kind, source.text) == (kind, canonical)
    for key, value in fields.items():
        assert getattr(source, key) == value


def test_a_local_folder_wins_over_every_other_reading(tmp_path: Path) -> None:
    (tmp_path / "acme" / "weekly").mkdir(parents=True)
    source = parse_source("acme/weekly", REGISTRIES, cwd=tmp_path)
    assert source.kind == "path" and source.local == (tmp_path / "acme" / "weekly").resolve()


def test_the_default_name_comes_from_the_folder_repository_or_file() -> None:
    assert parse_source("github:acme/skills/tools/weekly", {}).default_name() == "weekly"
    assert parse_source("github:acme/pdf-tools", {}).default_name() == "pdf-tools"
    url = "https://example.com/weekly/SKILL.md"
    assert parse_source(url, {}).default_name() == "weekly"
    assert parse_source("https://example.com/x/pdf.tar.gz", {}).default_name() == "pdf"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("", "give a source"),
        ("ftp://example.com/x.zip", "only http, https and file URLs"),
        ("./missing-folder", "no such file or folder"),
        ("github:acme", "not OWNER/REPO"),
        ("Not A Name!", "not a GitHub repository, URL, path or registry name"),
        ("https://github.com/acme/skills/issues/3", "expected /tree/REF/PATH"),
    ],
)
def test_what_names_no_source_is_one_clear_error(tmp_path: Path, text: str, said: str) -> None:
    with pytest.raises(HabakkukError, match=said):
        parse_source(text, REGISTRIES, cwd=tmp_path)
