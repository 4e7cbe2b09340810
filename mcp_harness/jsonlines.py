"""Newline-delimited framing over a byte stream read in chunks: the stdio wire on both sides (our server's, and each
stdio upstream's).

Only what arrived is scanned for line ends, so a message of many reads is split once, in time linear in its size;
re-splitting the whole buffer on every read made a 32 MiB request take 18 s with the event loop blocked.
"""

from __future__ import annotations


class LineBuffer:
    """Chunks in, complete lines out (without their `\\n`); `rest` is the unterminated tail at end of input."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        scan_from = len(self._buffer)
        self._buffer += chunk
        lines: list[bytes] = []
        start = 0
        while (end := self._buffer.find(b"\n", scan_from)) >= 0:
            lines.append(bytes(self._buffer[start:end]))
            start = scan_from = end + 1
        del self._buffer[:start]
        return lines

    def rest(self) -> bytes:
        tail = bytes(self._buffer)
        self._buffer.clear()
        return tail
