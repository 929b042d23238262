"""Create a new skill folder from the template."""

import argparse
import re
from pathlib import Path

TEMPLATE = """---
name: {name}
description: TODO - what this skill does and when to use it.
---

# {title}

## Steps

1. TODO
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("--path", default=".")
    args = parser.parse_args()
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,63}", args.name):
        raise SystemExit("the name must be lower-case letters, digits and dashes")
    folder = Path(args.path) / args.name
    for sub in ("scripts", "references", "assets"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    title = args.name.replace("-", " ").title()
    (folder / "SKILL.md").write_text(TEMPLATE.format(name=args.name, title=title))
    print(f"created {folder}")


if __name__ == "__main__":
    main()
