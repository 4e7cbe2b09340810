"""Address spaces: what `read` and `write` can reach, one module per space.

Each module declares its `SPACE` (space.py says what a declaration holds); registry.py lists them in order.
"""
