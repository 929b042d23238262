"""The chat command layer: every /command declared once (`commands`), the yes/no words
of approval answers (`answers`); used by the terminal app, every channel, the web chat
and `habakkuk run`."""
