"""The browser tests' shared Chromium (docs/architecture.md#tests-and-benchmarks): a row of browser tests gets one
browser, each test none of the contexts the one before opened, and the test after the row runs with the browser
stopped and no event loop in its thread (the ORM refuses to run beside one). The three tests are a row: they run
in this order, as pytest runs a module's tests."""
from __future__ import annotations

import asyncio
import os

import pytest

SEEN = {}
ASYNC_UNSAFE_BEFORE = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")


def test_a_browser_test_gets_a_running_chromium_and_opens_contexts(chromium):
    assert chromium.is_connected()
    context = chromium.new_context()
    context.new_page().set_content("<p id=mine>first test</p>")
    chromium.new_page()  # a page with a context of its own
    assert len(chromium.contexts) == 2
    SEEN["browser"] = chromium


def test_the_next_browser_test_gets_the_same_browser_without_the_last_tests_contexts(chromium):
    if "browser" not in SEEN:
        pytest.skip("runs after the first test of the row (the module run whole)")
    assert chromium is SEEN["browser"] and chromium.is_connected()
    assert chromium.contexts == []


def test_a_test_after_the_row_runs_with_the_browser_stopped_and_no_event_loop():
    if "browser" not in SEEN:
        pytest.skip("runs after the row of browser tests (the module run whole)")
    assert not SEEN["browser"].is_connected()
    with pytest.raises(RuntimeError, match="no running event loop"):
        asyncio.get_running_loop()
    assert os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE") == ASYNC_UNSAFE_BEFORE
