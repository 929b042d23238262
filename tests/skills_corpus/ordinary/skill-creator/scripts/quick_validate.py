"""Check a skill's SKILL.md: frontmatter, name, description length."""

import re
import sys
from pathlib import Path

import yaml


def validate(folder: Path) -> list[str]:
    text = (folder / "SKILL.md").read_text()
    match = re.match(r"^---\n(.*?)\n---\n", text, re.S)
    if not match:
        return ["SKILL.md has no frontmatter"]
    meta = yaml.safe_load(match.group(1)) or {}
    problems = []
    if meta.get("name") != folder.name:
        problems.append("the name differs from the folder's")
    description = str(meta.get("description", ""))
    if not description or len(description) > 1024:
        problems.append("the description must be 1 to 1024 characters")
    return problems


if __name__ == "__main__":
    found = validate(Path(sys.argv[1]))
    print("\n".join(found) or "valid")
    sys.exit(1 if found else 0)
