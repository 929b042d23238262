"""The terminal app's screens: one per module, each a client of the runtime facade."""
