"""The turn loop and prompt assembly."""
