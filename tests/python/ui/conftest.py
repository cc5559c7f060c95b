"""Fixtures for the web page's tests (docs/ui.md): Debian's chromium and
chromium-driver driven through Selenium, headless. Missing pieces fail the
test with what to install (scripts/setup.sh installs all of them); they
never skip it."""

from __future__ import annotations

import os
import shutil

import pytest

from harness.server import server_bin

INSTALL = "install them with scripts/setup.sh (apt-get install chromium chromium-driver; .venv/bin/pip install selenium==4.51.0)"


def _tool(env: str, *names: str) -> str:
    path = os.environ.get(env) or next((p for p in map(shutil.which, names) if p), None)
    if not path or not os.access(path, os.X_OK):
        pytest.fail(f"{names[0]} not found (or set {env}): {INSTALL}", pytrace=False)
    return path


@pytest.fixture
def server_binary():
    """The kcache-server the tests start: never skipped when it is missing."""
    path = server_bin()
    if not path.exists():
        pytest.fail(f"kcache-server not built at {path} (scripts/build.sh, or set KCACHE_SERVER_BIN)", pytrace=False)
    return path


@pytest.fixture
def browser():
    """A headless chromium with its console log captured, 1400x1800."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail(f"selenium is not installed: {INSTALL}", pytrace=False)
    chromium = _tool("KCACHE_CHROMIUM", "chromium", "chromium-browser")
    driver_path = _tool("KCACHE_CHROMEDRIVER", "chromedriver")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1800", "--hide-scrollbars", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--metrics-recording-only", "--disable-features=Translate,MediaRouter"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # The Debian driver, given by path: Selenium Manager is never asked to
    # download one.
    driver = webdriver.Chrome(options=opts, service=Service(executable_path=driver_path))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
