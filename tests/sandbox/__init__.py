"""The bubblewrap sandbox: behaviour, limits and escape attempts."""
