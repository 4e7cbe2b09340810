"""The web: egress rules, the reader, Seed sites over TLS."""
