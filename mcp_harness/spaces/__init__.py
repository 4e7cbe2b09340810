"""Address spaces: what `read` and `write` can reach, one module per space."""
