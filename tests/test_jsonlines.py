"""`LineBuffer`: lines come out whole however the stream is cut into chunks, and the unterminated tail is kept."""

from __future__ import annotations

from mcp_harness.jsonlines import LineBuffer


def test_lines_come_out_whole_whatever_the_chunking() -> None:
    stream = b'{"a":1}\n\n{"b":"' + b"x" * 70_000 + b'"}\n{"c":3}'
    for size in (1, 7, 4096, 65_536, len(stream)):
        lines = LineBuffer()
        out: list[bytes] = []
        for start in range(0, len(stream), size):
            out += lines.feed(stream[start : start + size])
        assert out == stream.split(b"\n")[:-1], size
        assert lines.rest() == b'{"c":3}' and lines.rest() == b""
