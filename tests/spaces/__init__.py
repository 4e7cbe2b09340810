"""Address spaces behind read and write: `hm://` on the embedded node."""
