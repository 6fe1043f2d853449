"""Fixtures for the browser checks: the built site served on 127.0.0.1 and a headless
Chromium (Debian's, driven by playwright; never `playwright install`).

These tests need `make book` to have built _build/html; `make test` does that first.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import threading
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

SITE = Path(__file__).resolve().parents[2] / "_build" / "html"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def pytest_collection_modifyitems(items):
    for item in items:
        if Path(str(item.fspath)).parent == Path(__file__).parent:
            item.add_marker(pytest.mark.browser)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output readable
        pass


@pytest.fixture(scope="session")
def site() -> Path:
    """The built site's folder; fails (not skips) when it has not been built."""
    if not (SITE / "index.html").exists():
        pytest.fail(f"no built site at {SITE}: run `make book` first")
    return SITE


@pytest.fixture(scope="session")
def base_url(site):
    """A static file server for the built site on 127.0.0.1 (an ephemeral port)."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def browser():
    executable = shutil.which("chromium")
    if executable is None:
        pytest.fail(
            "Debian's chromium is not installed: `make test` installs it (apt-get install chromium)"
        )
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


class PageRecorder:
    """Collects what a page did: every request, failed responses and JavaScript errors."""

    def __init__(self, page):
        self.requests: list[str] = []
        self.bad_responses: list[str] = []
        self.failed: list[str] = []
        self.errors: list[str] = []
        page.on("request", lambda r: self.requests.append(r.url))
        page.on(
            "response",
            lambda r: r.status >= 400 and self.bad_responses.append(f"{r.status} {r.url}"),
        )
        page.on("requestfailed", lambda r: self.failed.append(f"{r.url} ({r.failure})"))
        page.on("pageerror", lambda e: self.errors.append(str(e)))


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.recorder = PageRecorder(page)
    yield page
    context.close()
