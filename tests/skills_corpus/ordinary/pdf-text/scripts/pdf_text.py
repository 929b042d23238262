import subprocess
import sys
from pathlib import Path

TOOLS = ['pdftotext', 'pdfinfo']


def main(path: str) -> None:
    for tool in TOOLS:
        subprocess.run([tool, path], check=True)
    print(Path(path).with_suffix('.txt').read_text()[:2000])


if __name__ == '__main__':
    main(sys.argv[1])
