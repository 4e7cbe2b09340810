"""The verbs: their contracts (one registry) and their domain implementations."""
