"""Voice: the local voice loop (`habakkuk talk`), its energy detector, wake phrases, audio
in and out, and what speaking and hearing need below the surfaces.

Nothing here imports numpy or sounddevice at module level except the modules that do the
signal work (detector.py, audio_io.py), which only `talk` and push-to-talk load.
"""
