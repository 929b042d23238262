"""Installing and updating plugins through the hub (knowledge/hub/install.py).

The hub does the fetching (a GitHub folder at a resolved commit, a URL to an archive, a
local folder or archive, or a registry name from the indexes' "plugins" entries), the
staging, the tree hash, the registry pin (a mismatch is always refused), the scan, the
lock file (HOME/plugins/.lock.json) and the backups (HOME/plugins/.backups). What is a
plugin's own is here:

- `PLUGINS`, the hub's Kind for plugins: a folder is one when it has
  `habakkuk-plugin.yaml`, and that manifest must load (engine/plugin_config.load_manifest,
  the same checks the config merge makes) in the staging folder, before anything is
  moved into HOME/plugins. A missing or broken manifest is one line, and the staging
  folder is removed.
- A plugin installs under the name its manifest gives (the config merge requires the
  folder's name to be the manifest's): `--name` only picks one of several plugins of a
  source, and a `--name` the manifest does not give is refused.
- A plugin is installed disabled and unapproved; nothing in it runs until
  `habakkuk plugins enable NAME` has shown what it runs.
- An update whose files changed leaves the plugin disabled and unapproved
  (manage.Plugins.mark_changed): what was approved is no longer what is there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import yaml

from habakkuk.engine.errors import ConfigError, HabakkukError
from habakkuk.engine.plugin_config import PLUGIN_FILE, PLUGINS_DIR, load_manifest
from habakkuk.knowledge.hub.download import Http
from habakkuk.knowledge.hub.install import Hub, Kind, Outcome, Scan
from habakkuk.knowledge.hub.unpack import Limits
from habakkuk.knowledge.skills.types import InstallPlan

from .manage import Plugins


def _declared_name(folder: Path) -> str | None:
    """The `name:` of the manifest, read leniently (a broken manifest is reported by
    `_manifest_problem`, which the hub asks next)."""
    try:
        data = yaml.safe_load((folder / PLUGIN_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    name = data.get("name") if isinstance(data, dict) else None
    return name.strip() if isinstance(name, str) and name.strip() else None


def _manifest_problem(folder: Path) -> str | None:
    """Why the staged plugin in `folder` cannot be installed (None when its manifest loads).
    The staging folder's path is left out: the user knows the file by its name."""
    from habakkuk.engine.config import plugin_parts

    try:
        load_manifest(folder, plugin_parts())
    except ConfigError as exc:
        return str(exc).replace(f"{folder}/", "")
    return None


PLUGINS = Kind(PLUGINS_DIR, PLUGIN_FILE, "plugins", "plugin", _declared_name, _manifest_problem)


def plugin_hub(
    home: Path,
    *,
    registries: Mapping[str, str] | None = None,
    scan: Scan | None = None,
    limits: Limits | None = None,
) -> Hub:
    """The hub that installs into HOME/plugins (`registries`: config's skills.registries)."""
    return Hub(home, registries=registries, kind=PLUGINS, scan=scan, limits=limits)


async def install(
    hub: Hub,
    text: str,
    *,
    name: str | None = None,
    yes: bool = False,
    on_plan: Callable[[InstallPlan], None] | None = None,
) -> list[Outcome]:
    """Install the plugin(s) `text` names, disabled (see the module docstring); `on_plan`
    sees each plan (its scan verdict and reasons) before anything is placed."""
    async with Http() as http:
        staged = await hub.stage(http, text, name=name)
    try:
        for cand in staged.candidates:
            declared = _declared_name(cand.folder)
            if declared != cand.name:
                raise HabakkukError(
                    f"{staged.source.text}: its {PLUGIN_FILE} names the plugin {declared!r}; "
                    f"a plugin installs under that name, not {cand.name!r} (drop --name)"
                )
        for cand in staged.candidates:
            if on_plan:
                on_plan(cand.plan)
        return hub.place(staged, yes=yes)
    finally:
        staged.cleanup()


async def update(
    hub: Hub,
    name: str | None = None,
    *,
    yes: bool = False,
    on_plan: Callable[[InstallPlan], None] | None = None,
    on_error: Callable[[str, HabakkukError], None] | None = None,
) -> list[Outcome]:
    """Fetch the source of one installed plugin (or of each) again; a changed one is
    backed up, replaced, and left disabled and unapproved until enabled again."""
    outcomes = await hub.update(name, yes=yes, on_plan=on_plan, on_error=on_error)
    plugins = Plugins(hub.home)
    for outcome in outcomes:
        if outcome.status == "updated":
            plugins.mark_changed(outcome.name)
    return outcomes
