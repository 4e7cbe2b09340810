"""The MCP Apps view (server/apps.py) in a real headless Chromium, with this test playing the host: the view sits in
a sandboxed iframe, speaks postMessage JSON-RPC to the page, and every request it makes is carried to the real
server through an SDK client — as a host's proxy would. A detached delegate tree appears live and settles to
`succeeded` in the view without a reload."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from mcp_harness.harness import Harness
from mcp_harness.server import apps, build_server
from tests.console.browser import Browser

pytestmark = pytest.mark.anyio
RULES: list[dict[str, Any]] = [
    {
        "when": "Coordinate two slowly",
        "turns": [
            {"toolCalls": [{"name": "delegate", "input": {"brief": f"Slow leaf {i}"}} for i in range(2)]},
            {"text": "both came back", "usage": {"input": 40, "output": 10}},
        ],
    },
    {"when": "Slow leaf", "turns": [{"delayMs": 3000, "text": "leaf done", "usage": {"input": 100, "output": 20}}]},
    {"turns": [{"text": "done"}]},
]
HOST = """
window.outbox = [];
const frame = document.createElement("iframe");
frame.id = "view";
frame.setAttribute("sandbox", "allow-scripts");
frame.style.width = "600px";
frame.style.height = "500px";
window.addEventListener("message", (e) => { if (e.source === frame.contentWindow) window.outbox.push(e.data); });
frame.srcdoc = arguments[0];
document.body.append(frame);
"""


@pytest.fixture
def rules() -> list[dict[str, Any]]:
    return RULES


class Host:
    """The page's side of the bridge: what the view sent, answered through the real server."""

    def __init__(self, browser: Browser, client: Client, tool: str, proxies: dict[str, Any]) -> None:
        self.browser, self.client, self.tool, self.proxies = browser, client, tool, proxies
        self.seen: list[str] = []

    async def open(self) -> None:
        """The page with the view in a sandboxed frame, through the view's handshake."""
        view = (await self.client.read_resource(apps.VIEW_URI)).contents[0]
        assert isinstance(view, types.TextResourceContents)
        await self.browser.get("about:blank")
        await self.browser.js(HOST, view.text)
        await self.until(lambda _: "ui/notifications/initialized" in self.seen, "the handshake")

    async def call(self, arguments: dict[str, Any]) -> types.CallToolResult:
        """The model's tool call as a host runs it: input to the view, the call, its result to the view."""
        await self.post({"jsonrpc": "2.0", "method": "ui/notifications/tool-input", "params": {"arguments": arguments}})
        result = await self.client.call_tool(self.tool, arguments)
        notice = result.model_dump(by_alias=True, exclude_none=True)
        await self.post({"jsonrpc": "2.0", "method": "ui/notifications/tool-result", "params": notice})
        return result

    async def post(self, message: dict[str, Any]) -> None:
        await self.browser.js("document.getElementById('view').contentWindow.postMessage(arguments[0], '*')", message)

    async def serve(self) -> None:
        """Answer everything the view has sent since the last call."""
        for message in await self.browser.js("return window.outbox.splice(0);"):
            method = message.get("method")
            self.seen.append(method)
            if "id" not in message:
                continue
            if method == "ui/initialize":
                result: dict[str, Any] = {
                    "protocolVersion": "2026-01-26",
                    "hostInfo": {"name": "test-host", "version": "1"},
                    "hostCapabilities": self.proxies,
                    "hostContext": {"toolInfo": {"tool": {"name": self.tool, "inputSchema": {"type": "object"}}}},
                }
            elif method == "resources/read" and "serverResources" in self.proxies:
                read = await self.client.read_resource(message["params"]["uri"])
                result = read.model_dump(by_alias=True, exclude_none=True)
            elif method == "tools/call" and "serverTools" in self.proxies:
                params = message["params"]
                called = await self.client.call_tool(params["name"], params.get("arguments"))
                result = called.model_dump(by_alias=True, exclude_none=True)
            else:
                await self.post({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": method}})
                continue
            await self.post({"jsonrpc": "2.0", "id": message["id"], "result": result})

    def _inside(self) -> str:
        """The view's text: the frame is sandboxed (an opaque origin), so the page cannot look in; the driver can."""
        driver = self.browser.driver
        driver.switch_to.frame("view")
        try:
            return str(driver.execute_script("return document.body.innerText;") or "")
        finally:
            driver.switch_to.default_content()

    async def until(self, test: Any, what: str) -> str:
        text = ""
        with anyio.move_on_after(30):
            while True:
                await self.serve()
                text = await anyio.to_thread.run_sync(self._inside)
                if test(text):
                    return text
                await anyio.sleep(0.1)
        raise AssertionError(f"waited for {what}; the view shows {text!r} after {self.seen}")


async def test_the_view_follows_a_detached_tree_live_until_it_settles(
    scripted: Harness, browser: Browser, tmp_path: Path
) -> None:
    async with Client(build_server(scripted), mode="legacy") as client:
        host = Host(browser, client, "delegate", {"serverResources": {}, "serverTools": {}})
        await host.open()
        result = await host.call({"brief": "Coordinate two slowly", "await": False})
        assert not result.is_error and result.content[0].text.startswith("Started detached child")  # pyright: ignore[reportAttributeAccessIssue]
        live = await host.until(lambda t: "Live" in t and "Slow leaf 1" in t, "the tree while it runs")
        assert "Delegated run" in live and "running" in live
        done = await host.until(lambda t: "Settled" in t, "the tree settled, without a reload")
        assert done.count("succeeded") == 3 and "290 tokens across the tree" in done
        await browser.screenshot(tmp_path / "apps-view.png")


async def test_a_host_that_proxies_only_tools_gets_the_plan_through_read(scripted: Harness, browser: Browser) -> None:
    async with Client(build_server(scripted), mode="legacy") as client:
        host = Host(browser, client, "plan", {"serverTools": {}})
        await host.open()
        steps = [
            {"id": "a", "label": "Look <b>around</b>", "status": "done"},
            {"id": "b", "label": "Fix", "status": "pending"},
        ]
        await host.call({"title": "Repairs", "steps": steps})
        shown = await host.until(lambda t: "1 of 2 steps settled" in t, "the plan read back through tools/call")
        assert "Repairs" in shown and "Look <b>around</b>" in shown, "labels are text, never markup"
        assert "tools/call" in host.seen and "resources/read" not in host.seen
