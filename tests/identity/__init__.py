"""Keys, the master key, sealed secrets and signing identities."""
