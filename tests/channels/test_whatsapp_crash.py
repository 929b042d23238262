"""Exactly-once replies on WhatsApp across a real SIGKILL of `habakkuk --serve`.

The subprocess's WhatsApp is the file-backed fake at the library's event boundary
(fake_whatsapp_files.py), put in place by tests/channels/whatsapp_site/sitecustomize.py
through the child's PYTHONPATH: production code has no test switch.
"""

from __future__ import annotations

import json
import os
import sqlite3
import textwrap
from pathlib import Path

import pytest
from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import Message as WAMessage

from tests.channels.fake_whatsapp import PERSON, FakeWhatsApp
from tests.channels.fake_whatsapp_files import sent_texts, write_message
from tests.helpers import eventually
from tests.processes import StartServe, jobs, kill, stop

BOUND = 60.0
NOT_YET = (sqlite3.OperationalError, KeyError)
CHUNK = "\n\n".join(["alpha " * 400, "bravo " * 400, "charlie " * 400])  # a chunk each
SITE = Path(__file__).parent / "whatsapp_site"
ROOT = Path(__file__).parents[2]


def config(reply: str) -> str:
    return textwrap.dedent(
        f"""
        providers:
          mock:
            type: mock
            script:
              - {json.dumps(reply)}
        agents:
          main:
            model: mock/script
            mode: full
        channels:
          wa:
            type: whatsapp
            allow_from: ["+{PERSON}"]
        """
    )


@pytest.mark.timeout(180)
async def test_a_crash_mid_delivery_resumes_at_the_first_unsent_chunk(
    tmp_path: Path, serve_process: StartServe
) -> None:
    home, wa_dir = tmp_path / "home", tmp_path / "whatsapp"
    home.mkdir()
    (wa_dir / "inbox").mkdir(parents=True)
    (home / "config.yaml").write_text(config(CHUNK))
    env = {
        "HABAKKUK_TEST_WHATSAPP_DIR": str(wa_dir),
        "PYTHONPATH": os.pathsep.join([str(SITE), str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    (wa_dir / "hold_after").write_text("1")  # chunk 1 goes out; chunk 2 hangs
    first = await serve_process(home, **env)
    event = FakeWhatsApp().event(WAMessage(conversation="the long answer please"))
    write_message(wa_dir, event, 1)
    await eventually(lambda: (wa_dir / "held").exists(), what="a send hanging", timeout=BOUND)
    await kill(first)
    assert [t.split()[0] for t in sent_texts(wa_dir)] == ["alpha"]
    (wa_dir / "hold_after").unlink()

    second = await serve_process(home, **env)
    turn = f"turn:wa:{PERSON}@s.whatsapp.net:{event.Info.ID}"
    await eventually(
        lambda: jobs(home)[f"reply:{turn}"]["status"] == "done",
        what="the delivery",
        timeout=BOUND,
        ignore=NOT_YET,
    )
    await stop(second)
    texts = sent_texts(wa_dir)
    assert [t.split()[0] for t in texts] == ["alpha", "bravo", "charlie"]
    assert " ".join(texts).split() == CHUNK.split()
    rows = jobs(home)
    assert rows[turn]["attempts"] == 1  # the turn ran once
    assert rows[f"reply:{turn}"]["attempts"] == 2  # the delivery resumed once
