"""Habakkuk: a personal and team AI agent with a terminal control room."""

__version__ = "0.1.0"
