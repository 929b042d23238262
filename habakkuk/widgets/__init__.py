"""The terminal app's widgets: one per module."""
