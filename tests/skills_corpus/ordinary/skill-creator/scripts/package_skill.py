"""Zip a skill folder into dist/<name>.zip after validating it."""

import sys
import zipfile
from pathlib import Path

from quick_validate import validate


def package(folder: Path, dist: Path) -> Path:
    problems = validate(folder)
    if problems:
        raise SystemExit("; ".join(problems))
    dist.mkdir(parents=True, exist_ok=True)
    target = dist / f"{folder.name}.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                archive.write(path, path.relative_to(folder.parent))
    return target


if __name__ == "__main__":
    print(package(Path(sys.argv[1]), Path(sys.argv[2])))
