"""Latency of `read http://…` against a bare HTTP GET of the same page.

Why: a web read adds the guarded client's checks (resolve, classify, pin, manual redirects), main-content
extraction and html2text conversion, plus the verb's logging. This measures that overhead end to end over the SDK's
in-memory MCP client, next to the floor: one `httpx2.Client.get` of the same page, in the same run.

What: a Starlette page server on loopback (uvicorn, port 0) serves a ~60 KiB article page; a harness in a temporary
data dir allows 127.0.0.1 in `[web] allow_hosts`. In rotating blocks after a warm-up it times `read <page>` through
the client and a bare GET. Prints p50 and p99 of each and the p50 difference (the harness's cost per read).
Run: `.venv/bin/python bench/webread.py [--n 100] [--warmup 5]`.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import anyio
import anyio.to_thread
import httpx2
import uvicorn
from mcp import Client
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from mcp_harness.config import load_settings
from mcp_harness.harness import Harness
from mcp_harness.server import build_server

SECTION = (
    "<h2>Section {i}</h2><p>Paragraph {i} with <a href='/l{i}'>a link</a> and <code>code</code>.</p>"
    "<ul><li>one</li><li>two</li></ul><pre><code>x = {i}</code></pre>"
)
PAGE = (
    "<!doctype html><html><head><title>Bench</title></head><body><nav>" + "<a href='/n'>nav</a>" * 50 + "</nav>"
    "<main><article><h1>Bench article</h1>" + "".join(SECTION.format(i=i) for i in range(300)) + "</article></main>"
    "<footer>footer</footer></body></html>"
)


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


async def main(n: int, warmup: int) -> None:
    app = Starlette(routes=[Route("/page", lambda r: Response(PAGE, media_type="text/html"))])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    samples: dict[str, list[float]] = {"read": [], "bare GET": []}
    with tempfile.TemporaryDirectory() as tmp:
        harness = Harness(load_settings(data_dir=Path(tmp), web={"allow_hosts": ["127.0.0.1"]}))
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve)
            while not server.started:
                await anyio.sleep(0.01)
            url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}/page"
            bare_client = httpx2.Client(trust_env=False)

            async with Client(build_server(harness)) as client:

                async def read() -> None:
                    result = await client.call_tool("read", {"address": url})
                    assert not result.is_error, result.content

                async def bare() -> None:
                    response = await anyio.to_thread.run_sync(bare_client.get, url)
                    assert response.status_code == 200

                calls = {"read": read, "bare GET": bare}
                for call in calls.values():
                    for _ in range(warmup):
                        await call()
                for _ in range(10):
                    for name, call in calls.items():
                        for _ in range(max(1, n // 10)):
                            start = time.perf_counter()
                            await call()
                            samples[name].append((time.perf_counter() - start) * 1000)
            bare_client.close()
            server.should_exit = True
        harness.close()
    print(f"page: {len(PAGE)} bytes of HTML")
    for name, values in samples.items():
        print(f"{name:>9}: p50 {percentile(values, 50):7.2f} ms  p99 {percentile(values, 99):7.2f} ms")
    cost = percentile(samples["read"], 50) - percentile(samples["bare GET"], 50)
    print(f"harness cost per read (p50 difference): {cost:.2f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    anyio.run(main, args.n, args.warmup)
