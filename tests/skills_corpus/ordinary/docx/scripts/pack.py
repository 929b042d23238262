"""Pack a folder unpacked by unpack.py back into a .docx."""

import sys
import zipfile
from pathlib import Path


def pack(folder: Path, docx: Path) -> None:
    with zipfile.ZipFile(docx, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder).as_posix())


if __name__ == "__main__":
    pack(Path(sys.argv[1]), Path(sys.argv[2]))
