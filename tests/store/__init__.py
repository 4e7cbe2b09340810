"""The SQLite store: open calls and their holders."""
