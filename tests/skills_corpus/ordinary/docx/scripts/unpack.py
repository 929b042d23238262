"""Unpack a .docx (a zip of XML parts) into a folder, pretty-printing the XML."""

import sys
import zipfile
from pathlib import Path
from xml.dom import minidom


def unpack(docx: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(docx) as archive:
        for member in archive.namelist():
            target = (out / member).resolve()
            if not target.is_relative_to(out.resolve()):
                raise SystemExit(f"refusing {member}: outside {out}")
            target.parent.mkdir(parents=True, exist_ok=True)
            data = archive.read(member)
            if member.endswith(".xml"):
                data = minidom.parseString(data).toprettyxml(indent="  ").encode()
            target.write_bytes(data)


if __name__ == "__main__":
    unpack(Path(sys.argv[1]), Path(sys.argv[2]))
