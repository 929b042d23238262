"""Loaded at the start of a `habakkuk --serve` subprocess whose PYTHONPATH names this
folder (tests/channels/test_whatsapp_crash.py): its WhatsApp clients become the
file-backed fake of tests/channels/fake_whatsapp_files.py, in the folder
$HABAKKUK_TEST_WHATSAPP_DIR. Production code has no switch for this; the test's process
environment does it, as a sitecustomize module does for any Python program."""

import os

if os.environ.get("HABAKKUK_TEST_WHATSAPP_DIR"):
    from tests.channels.fake_whatsapp_files import install

    install(os.environ["HABAKKUK_TEST_WHATSAPP_DIR"])
