"""Recalculate a workbook with LibreOffice and report formula errors as JSON."""

import json
import subprocess
import sys
from pathlib import Path

import openpyxl

ERRORS = ("#REF!", "#DIV/0!", "#VALUE!", "#NAME?", "#N/A", "#NUM!", "#NULL!")


def recalc(path: Path, timeout: int = 60) -> dict:
    subprocess.run(
        ["soffice", "--headless", "--calc", "--convert-to", "xlsx", "--outdir",
         str(path.parent), str(path)],
        check=True,
        timeout=timeout,
        capture_output=True,
    )
    wb = openpyxl.load_workbook(path, data_only=True)
    found = []
    for ws in wb.worksheets:
        for row in ws.iter_rows():
            for cell in row:
                if isinstance(cell.value, str) and cell.value in ERRORS:
                    found.append({"sheet": ws.title, "cell": cell.coordinate, "error": cell.value})
    return {"status": "errors" if found else "ok", "errors": found}


if __name__ == "__main__":
    print(json.dumps(recalc(Path(sys.argv[1])), indent=2))
