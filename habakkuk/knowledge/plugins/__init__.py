"""Plugins: what an enabled plugin runs (describe), its script commands, and its
install, enable, disable, remove and update (engine/plugin_config.py has the format)."""
