"""Speech out (spec 000 "Media": Speech, Voice replies): text to audio with the `tts:`
provider (speech.py), the audio's format, length and conversion (audio.py), and the text
a reply is read aloud as (spoken_text.py). The channels speak replies with it, the speak
tool saves and sends voice notes with it, and the local voice loop plays what it makes.
"""
