"""Registry indexes: names that `habakkuk skills install NAME` (and `plugins install`) know.

`skills.registries` in config.yaml maps a registry's name to the URL of its index (http
or https, or a local path / file:// URL). An index is one JSON object:

    {
      "version": 1,
      "skills": {
        "weekly-report": {
          "source": "github:acme/skills/weekly-report@v1.2.0",
          "hash": "sha256:3f5a...",
          "description": "Write the weekly report from the board.",
          "version": "1.2.0"
        }
      },
      "plugins": {"NAME": {"source": "...", "hash": "...", "description": "..."}}
    }

`source` is any source but another registry name (a GitHub repository or folder, a URL
to a SKILL.md or an archive; in a local index also a path relative to the index's
folder). `hash`, when given, pins the tree hash (hub/treehash.py) of what the source
unpacks to: a download that does not match is refused, always, even with --yes.
`version` is recorded in the lock (else the commit or content hash the source resolved
to). `description` is informative. Unknown keys are ignored.

`NAME` is looked up in every registry and must be found in exactly one of them (a
second registry cannot shadow the first silently); `REGISTRY/NAME` picks one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from habakkuk.engine.errors import HabakkukError, NotFound
from habakkuk.knowledge.hub.download import JSON_CAP, Http

Section = Literal["skills", "plugins"]


@dataclass(frozen=True)
class RegistryEntry:
    """One name in one registry's index."""

    registry: str
    name: str
    source: str
    hash: str = ""
    description: str = ""
    version: str = ""
    base: Path | None = None  # a local index's folder (relative sources resolve here)


def _local_index(url: str) -> Path | None:
    if url.startswith("file://"):
        return Path(unquote(urlsplit(url).path))
    if "://" in url:
        return None
    return Path(url).expanduser()


async def read_index(http: Http, registry: str, url: str) -> dict[str, Any]:
    """The parsed index of one registry; HabakkukError naming the registry when it cannot
    be read or is not an index."""
    local = _local_index(url)
    try:
        if local is not None:
            if local.stat().st_size > JSON_CAP:
                raise HabakkukError(f"registry {registry} ({url}): larger than {JSON_CAP} bytes")
            data = json.loads(local.read_text(encoding="utf-8"))
        else:
            data = await http.get_json(url)
    except OSError as exc:
        raise HabakkukError(f"registry {registry} ({url}): cannot read: {exc.strerror}") from None
    except ValueError:
        raise HabakkukError(f"registry {registry} ({url}): not JSON") from None
    except HabakkukError as exc:
        raise HabakkukError(f"registry {registry}: {exc}") from None
    if not isinstance(data, dict):
        raise HabakkukError(f"registry {registry} ({url}): the index is not a JSON object")
    return data


def _entry(registry: str, url: str, name: str, value: object, section: Section) -> RegistryEntry:
    where = f"registry {registry} ({url}): {section}.{name}"
    if not isinstance(value, dict) or not isinstance(value.get("source"), str):
        raise HabakkukError(f'{where}: needs a "source" string')
    source = str(value["source"]).strip()
    if source.startswith("registry:"):
        raise HabakkukError(f"{where}: a source cannot be another registry name")
    local = _local_index(url)
    strings = {k: value.get(k, "") for k in ("hash", "description", "version")}
    for key, text in strings.items():
        if not isinstance(text, str):
            raise HabakkukError(f"{where}: {key} must be a string")
    return RegistryEntry(
        registry,
        name,
        source,
        hash=str(strings["hash"]).strip(),
        description=str(strings["description"]),
        version=str(strings["version"]).strip(),
        base=local.parent if local is not None else None,
    )


def split_name(spec: str) -> tuple[str, str]:
    """`NAME` -> ("", NAME); `REGISTRY/NAME` -> (REGISTRY, NAME)."""
    registry, sep, name = spec.partition("/")
    return (registry, name) if sep else ("", spec)


async def lookup(
    http: Http, registries: Mapping[str, str], spec: str, section: Section = "skills"
) -> RegistryEntry:
    """The entry `spec` (NAME or REGISTRY/NAME) names; NotFound when no registry has it,
    HabakkukError when several do or a registry cannot be read."""
    registry, name = split_name(spec)
    if not registries:
        raise NotFound(
            f"{spec!r}: not a path or URL, and no registries are configured "
            "(skills.registries in config.yaml)"
        )
    if registry:
        if registry not in registries:
            known = ", ".join(sorted(registries))
            raise NotFound(f"registry {registry!r} is not configured (registries: {known})")
        chosen = {registry: registries[registry]}
    else:
        chosen = dict(registries)
    found: list[RegistryEntry] = []
    for reg, url in chosen.items():
        index = await read_index(http, reg, url)
        names = index.get(section, {})
        if not isinstance(names, dict):
            raise HabakkukError(f"registry {reg} ({url}): {section} is not an object")
        if name in names:
            found.append(_entry(reg, url, name, names[name], section))
    if not found:
        where = ", ".join(sorted(chosen))
        raise NotFound(f"{spec!r}: no such {section[:-1]} in the registries ({where})")
    if len(found) > 1:
        regs = ", ".join(e.registry for e in found)
        raise HabakkukError(
            f"{name!r} is in several registries ({regs}); name one: REGISTRY/{name}"
        )
    return found[0]
