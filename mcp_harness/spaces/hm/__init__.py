"""The `hm://` space: signed documents on the embedded hypermedia node."""
