"""Callables as documents: builtin and authored tools, their listings, contracts and CIDs."""
