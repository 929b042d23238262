"""The frozen system prompt: soul, identity, standing instructions, memory, profile, welcome."""

from __future__ import annotations

import textwrap
from pathlib import Path

from habakkuk.engine.agent.prompt import (
    MEMORY_LIST_BYTES,
    PROFILE_BYTES,
    PromptNote,
    PromptSections,
    build_system_prompt,
)
from habakkuk.engine.config import AgentConfig, parse_config
from habakkuk.engine.home import Home


def agent(tmp_path: Path, extra: str = "") -> AgentConfig:
    text = "providers:\n  d: {type: mock}\nagents:\n  main:\n    model: d/x\n" + extra
    return parse_config(textwrap.dedent(text), tmp_path / "config.yaml", Home(tmp_path)).agents[
        "main"
    ]


def test_soul_replaces_the_persona_and_the_identity_follows_it_and_wins(tmp_path: Path) -> None:
    prompt = build_system_prompt(
        agent(tmp_path),
        PromptSections(soul="You are Marvin, a gloomy robot.", identity="name: Ada\nemoji: 🦉"),
    )
    assert prompt.startswith("You are Marvin, a gloomy robot.")
    assert "helpful AI agent running inside Habakkuk" not in prompt
    assert "Permission mode: workspace." in prompt  # the working rules stay
    assert prompt.index("Marvin") < prompt.index("# Identity") < prompt.index("name: Ada")
    assert "it wins" in prompt


def test_standing_instructions_join_the_config_instructions(tmp_path: Path) -> None:
    prompt = build_system_prompt(
        agent(tmp_path, "    instructions: Answer in French.\n"),
        PromptSections(standing="Always cite sources."),
    )
    section = prompt[prompt.index("# Instructions") :]
    assert section.index("Answer in French.") < section.index("Always cite sources.")


def test_memory_lists_notes_marks_untrusted_and_counts_the_rest(tmp_path: Path) -> None:
    notes = (
        PromptNote("coffee", "Coffee preference"),
        PromptNote("web-tip", "A tip from a page", untrusted=True),
    )
    prompt = build_system_prompt(agent(tmp_path), PromptSections(notes=notes, more_notes=7))
    assert "- Coffee preference (coffee)\n" in prompt
    assert "- A tip from a page (web-tip) [untrusted]" in prompt
    assert "7 more notes: memory_search finds them." in prompt
    assert "memory_save" in prompt and "memory_search" in prompt


def test_memory_listing_is_capped_at_4_kb_and_what_is_cut_is_counted(tmp_path: Path) -> None:
    notes = tuple(PromptNote(f"note-{i:02d}", f"{'long title ' * 8}{i}") for i in range(50))
    prompt = build_system_prompt(agent(tmp_path), PromptSections(notes=notes, more_notes=3))
    listed = [line for line in prompt.splitlines() if line.startswith("- ") and "(note-" in line]
    assert 0 < len(listed) < 50
    assert sum(len(line.encode()) + 1 for line in listed) <= MEMORY_LIST_BYTES
    assert f"{50 - len(listed) + 3} more notes: memory_search finds them." in prompt


def test_no_memory_toolset_no_memory_section_and_no_welcome(tmp_path: Path) -> None:
    sections = PromptSections(notes=(PromptNote("a", "A"),), welcome=True, profile="## Name\nAda")
    prompt = build_system_prompt(agent(tmp_path, "    toolsets: [core]\n"), sections)
    assert "# Memory" not in prompt and "memory_search" not in prompt
    assert "# Welcome" not in prompt
    assert "# About the user\n## Name\nAda" in prompt  # the user's own file still reaches it


def test_profile_longer_than_6000_bytes_is_cut_visibly(tmp_path: Path) -> None:
    profile = "## Notes\n" + "é" * 5000  # 10,000 bytes of two-byte characters
    prompt = build_system_prompt(agent(tmp_path), PromptSections(profile=profile))
    section = prompt[prompt.index("# About the user") :]
    body = section.split("\n", 1)[1].rsplit("\n[cut:", 1)[0]
    assert len(body.encode()) <= PROFILE_BYTES
    assert "[cut: the profile is longer than 6,000 bytes" in section


def test_welcome_goes_in_only_when_handed_in(tmp_path: Path) -> None:
    assert "# Welcome" not in build_system_prompt(agent(tmp_path), PromptSections())
    prompt = build_system_prompt(agent(tmp_path), PromptSections(welcome=True))
    assert "set_identity" in prompt[prompt.index("# Welcome") :]


def test_the_model_answers_in_the_users_language_and_is_told_the_configured_one(
    tmp_path: Path,
) -> None:
    plain = build_system_prompt(agent(tmp_path))
    assert "# Language\nAnswer in the language the user writes in." in plain
    assert "When you cannot tell" not in plain  # nothing configured: nothing to fall back on
    configured = build_system_prompt(agent(tmp_path), PromptSections(language="pt-BR"))
    assert "use Portuguese (pt-BR)" in configured
    assert "use tlh" in build_system_prompt(agent(tmp_path), PromptSections(language="tlh"))


def test_a_channels_language_wins_over_config_yamls(tmp_path: Path) -> None:
    text = """\
        language: fr_CA.UTF-8
        providers:
          d: {type: mock}
        agents:
          main: {model: d/x}
        channels:
          tg: {type: telegram, token_env: TG, language: ja}
          mail: {type: telegram, token_env: TG2}
        """
    config = parse_config(textwrap.dedent(text), tmp_path / "config.yaml", Home(tmp_path))
    assert config.language_of("tg") == "ja"
    assert config.language_of("mail") == "fr_CA.UTF-8"
    assert config.language_of("") == "fr_CA.UTF-8"  # the terminal, schedules, `habakkuk run`
