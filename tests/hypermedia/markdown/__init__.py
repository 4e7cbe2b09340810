"""Markdown ↔ Seed block trees, checked against the official Seed client (`@seed-hypermedia/client`).

Every conversion runs through tests/js/markdown_oracle.mjs once for this folder (conftest.py's `oracle`), with every
case in one batch. The oracle makes the client's block ids deterministic (a counter behind Math.random) and we pass
the same counter as `new_id`, so parsed trees compare exactly, ids included; that also shows we draw fresh ids in the
client's order. The oracle needs Node.js and `tests/js/node_modules`, which `make test` installs; without them these
tests fail rather than skip, because passing without the reference would prove nothing about compatibility.

The one representation difference we normalize: the client's annotation offsets count UTF-16 units, ours code
points (HYPERMEDIA §3), so client offsets are converted before comparing (cases.py). Offsets are equal outright for
BMP text.
"""
