"""Enabling a plugin makes executable exactly the plugin files its manifest runs, and
nothing outside its folder or through a link; disabling takes the bit away again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.home import Home
from habakkuk.knowledge.plugins.manage import Plugins
from habakkuk.knowledge.plugins.programs import shell_programs
from tests.knowledge.plugins.conftest import Install


def mode(path: Path) -> int:
    return path.lstat().st_mode & 0o777


def test_shell_programs_are_the_command_words_of_every_simple_command() -> None:
    assert shell_programs("./deploy.sh --fast") == ["./deploy.sh"]
    assert shell_programs("cd sub && env A=1 timeout 5 bin/run x | ./tee.sh; pwd") == [
        "cd",
        "bin/run",
        "./tee.sh",
        "pwd",
    ]
    assert shell_programs("$(./hidden) arg") == []  # a substitution names no known file


def test_enable_sets_the_bit_on_named_programs_only_and_disable_clears_it(
    home: Home, install: Install, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.sh"
    outside.write_text("#!/bin/sh\n")
    outside.chmod(0o600)
    manifest = f"""\
        name: kit
        description: the programs a manifest names
        mcp_servers:
          local: {{command: ./bin/server}}
          far: {{command: {outside}}}
          up: {{command: ../escape.sh}}
          path: {{command: python3, args: [bin/not-a-program]}}
        hooks:
          - {{event: tool_after, command: "env A=1 ./hooks/log.sh | sh ./piped.sh"}}
        commands:
          deploy: {{summary: deploy, script: "cd . && ./deploy.sh --fast; {outside}"}}
        """
    files = {
        name: "#!/bin/sh\n"
        for name in (
            "bin/server",
            "bin/not-a-program",
            "hooks/log.sh",
            "piped.sh",
            "deploy.sh",
            "other.sh",
        )
    }
    folder = install("kit", manifest, files=files)
    (folder.parent / "escape.sh").write_text("#!/bin/sh\n")
    for path in [*folder.rglob("*"), folder.parent / "escape.sh"]:
        if path.is_file():
            path.chmod(0o600)
    plugins = Plugins(home.root)
    description = plugins.show("kit").description
    assert description is not None
    assert description.programs == [
        "bin/server",
        "deploy.sh",
        "hooks/log.sh",
    ]
    plugins.enable("kit")
    named = ["bin/server", "deploy.sh", "hooks/log.sh"]
    assert [mode(folder / n) for n in named] == [0o700] * 3
    others = ["bin/not-a-program", "piped.sh", "other.sh", "zoo.py", "habakkuk-plugin.yaml"]
    assert [mode(folder / n) for n in others] == [0o600] * 5
    assert mode(outside) == 0o600  # an absolute path is not the plugin's
    assert mode(folder.parent / "escape.sh") == 0o600  # nor is ../

    plugins.disable("kit")
    assert [mode(folder / n) for n in named] == [0o600] * 3


@pytest.mark.parametrize("where", ["file", "folder"])
def test_a_link_in_the_plugin_folder_is_never_followed_and_enables_nothing(
    home: Home, install: Install, tmp_path: Path, where: str
) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "run.sh").write_text("#!/bin/sh\n")
    (victim / "run.sh").chmod(0o600)
    manifest = """\
        name: kit
        description: a link placed after the install
        hooks:
          - {event: tool_after, command: ./a-first.sh}
        commands:
          go: {summary: go, script: ./bin/run.sh}
        """
    folder = install("kit", manifest, files={"a-first.sh": "#!/bin/sh\n"})
    (folder / "a-first.sh").chmod(0o600)
    if where == "file":
        (folder / "bin").mkdir()
        os.symlink(victim / "run.sh", folder / "bin" / "run.sh")
    else:
        os.symlink(victim, folder / "bin")
    plugins = Plugins(home.root)
    with pytest.raises(HabakkukError, match=r"bin/run.sh: not a plain file of the plugin"):
        plugins.enable("kit")
    assert mode(victim / "run.sh") == 0o600
    assert mode(folder / "a-first.sh") == 0o600  # the one done before was put back
    entry = plugins.entry("kit")
    assert (entry.enabled, entry.approved) == (False, False)


def test_doctor_names_an_enabled_plugins_programs_that_cannot_run(
    home: Home, install: Install, capsys: pytest.CaptureFixture[str]
) -> None:
    from habakkuk.cli import main

    manifest = """\
        name: kit
        description: enabled before enabling set the bit
        commands:
          deploy: {summary: deploy, script: ./deploy.sh}
        """
    folder = install("kit", manifest, enabled=True, files={"deploy.sh": "#!/bin/sh\n"})
    (folder / "deploy.sh").chmod(0o600)
    main(["doctor"])
    warning = (
        "WARN  plugins: kit: not executable: deploy.sh; run `habakkuk plugins enable kit` again"
    )
    assert warning in capsys.readouterr().out.splitlines()
    Plugins(home.root).enable("kit")
    main(["doctor"])
    assert "not executable" not in capsys.readouterr().out
