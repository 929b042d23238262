"""Voice (spec 000 "Media": Speech, Voice replies, Local voice).

Speech out: text to audio with the `tts:` provider (speech.py), the audio's format, length
and conversion (audio.py), and the text a reply is read aloud as (spoken_text.py). The
channels speak replies with it, the speak tool saves and sends voice notes with it.

Speech in and the local loop: the one transcription client (transcription.py), the energy
detector (detector.py), wake phrases (wake.py), the microphone and the speakers through
sounddevice (audio_io.py) and the loop of `habakkuk talk` (talk.py). numpy and
sounddevice are imported only by the modules that do the signal work, which only `talk`
and the terminal's push-to-talk key load.
"""
