"""Callables: what `call` can run — builtins (execute, web_search) and authored lambdas."""
