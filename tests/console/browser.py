"""A real headless Chromium (Debian's `chromium` + `chromium-driver`) driven with Selenium, for the console's
browser tests. Selenium blocks, and the server under test runs on the test's own event loop, so every call goes
through a worker thread. Chromium starts offline-clean: a fresh profile, no background networking, no QUIC."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,1000",
)
WAIT_S = 30.0


def start_chromium() -> tuple[WebDriver, Path]:
    profile = Path(tempfile.mkdtemp(prefix="console-chromium-"))
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options), profile


class Browser:
    """Async wrappers over one Chromium tab."""

    def __init__(self, driver: WebDriver) -> None:
        self.driver = driver

    async def _run(self, fn: Callable[[], Any]) -> Any:
        return await anyio.to_thread.run_sync(fn)

    async def get(self, url: str) -> None:
        await self._run(lambda: self.driver.get(url))

    async def js(self, script: str, *args: Any) -> Any:
        return await self._run(lambda: self.driver.execute_script(script, *args))

    async def until(self, script: str, *args: Any, what: str) -> Any:
        """Wait until `script` (a JS expression body, `return …`) is truthy; return its value."""

        def check(driver: WebDriver) -> Any:
            return driver.execute_script(script, *args)

        return await self._run(lambda: WebDriverWait(self.driver, WAIT_S, poll_frequency=0.1).until(check, what))

    async def click(self, selector: str) -> None:
        await self.js("document.querySelector(arguments[0]).click()", selector)

    async def screenshot(self, path: Path, *, height: int | None = None) -> None:
        def shoot() -> None:
            if height is not None:
                self.driver.set_window_size(1280, height)
            path.parent.mkdir(parents=True, exist_ok=True)
            self.driver.save_screenshot(str(path))
            if height is not None:
                self.driver.set_window_size(1280, 1000)

        await self._run(shoot)


def stop_chromium(driver: WebDriver, profile: Path) -> None:
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)
