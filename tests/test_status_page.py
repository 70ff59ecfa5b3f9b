"""The status page: one HTML page of the /status document for people, behind the same token
as /status, refreshed by the browser; rendered in a real headless browser (Debian's chromium,
driven by selenium through its chromedriver)."""

from __future__ import annotations

import http.cookiejar
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from demo import demo_controller
from test_cli_service import REPO

from nodemanager.status.metrics import Metrics
from nodemanager.status.page import REFRESH, render_page
from nodemanager.status.server import SESSION_COOKIE, StatusServer

TOKEN = "page-token-0123456789"
ARTIFACTS = REPO / "build" / "artifacts"


@pytest.fixture(scope="module")
def served():
    """The demo configuration after 40 s, served with a token."""
    controller = demo_controller(40, start=1_800_000_000.0)
    server = StatusServer("127.0.0.1:0", controller.status, lambda: True, Metrics(), TOKEN)
    server.start()
    yield controller, f"http://127.0.0.1:{server.address[1]}"
    server.stop()


def test_the_page_escapes_what_the_cluster_names():
    doc = {
        "controller": {"id": "<b>x</b>", "version": "1", "now": 100.0, "ready": True},
        "pods": {"waiting": [{"pod": "ns/<script>alert(1)</script>", "reason": "pool a: <img src=x>", "since": 40.0}]},
        "pools": [
            {"name": "a", "packing": "binpack", "usage": {"nodes": 9, "cpu": "36", "memory": "72Gi"}, "limits": {"nodes": 10, "cpu": None, "memory": "80Gi"}}
        ],
    }
    page = render_page(doc)
    assert "<script>" not in page
    assert "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert f'<meta http-equiv="refresh" content="{REFRESH}">' in page
    assert '9 of 10 <meter min="0" max="1" high="0.9" value="0.900">' in page
    assert '72Gi of 80Gi <meter min="0" max="1" high="0.9" value="0.900">' in page
    assert "<td>1</td><td>1m</td><td>pool a: &lt;img src=x&gt;</td>" in page  # one pod, waiting a minute


def test_the_token_is_asked_once_and_kept_in_an_httponly_cookie(served):
    _, url = served
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(url + "/", timeout=5)
    assert refused.value.code == 401
    assert 'name="token"' in refused.value.read().decode()  # the form, not a bare 401
    jar = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with pytest.raises(urllib.error.HTTPError) as wrong:
        browser.open(url + "/login", data=b"token=nope", timeout=5)
    assert wrong.value.code == 401
    assert "not the one" in wrong.value.read().decode()
    with browser.open(url + "/login", data=urllib.parse.urlencode({"token": TOKEN}).encode(), timeout=5) as page:  # 303, followed
        assert page.url == url + "/"
        assert "<h2>Pools</h2>" in page.read().decode()
    (cookie,) = list(jar)
    assert cookie.name == SESSION_COOKIE
    assert TOKEN not in cookie.value  # derived from the token, not the token
    assert cookie.has_nonstandard_attr("HttpOnly")
    with browser.open(url + "/status", timeout=5) as reply:  # the same session reads the document
        assert reply.status == 200


def chrome():
    webdriver = pytest.importorskip("selenium.webdriver")
    for binary in ("/usr/bin/chromium", "/usr/bin/chromedriver"):
        assert Path(binary).exists(), f"{binary} missing: make test installs Debian's chromium and chromium-driver (make browser)"
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1400"):
        options.add_argument(flag)
    from selenium.webdriver.chrome.service import Service

    return webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))


@pytest.mark.heavy
def test_in_a_real_browser_the_page_renders_logs_in_and_refreshes(served):
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    controller, url = served
    browser = chrome()

    def text(css: str, index: int = 0) -> str:
        """An element's text once the page holding it has loaded (it reloads itself)."""
        wait = WebDriverWait(browser, 10, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException, IndexError))
        return wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, css)[index].text or None)

    try:
        browser.get(url + "/")
        browser.find_element(By.NAME, "token").send_keys(TOKEN)
        browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        WebDriverWait(browser, 10).until(lambda b: b.title == "nodemanager demo")  # the page, after the form
        assert text("h1") == "nodemanager 0.1.0: controller demo"
        assert "against a bound of $" in text("p")  # the fleet's price beside what no fleet could undercut
        pools = text("table")
        assert "general binpack" in pools
        assert "of 20" in pools
        nodes = len(controller.status()["nodes"])
        assert text("h2", 4) == f"Nodes ({nodes})"
        assert browser.get_cookie(SESSION_COOKIE)["httpOnly"] is True
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(ARTIFACTS / "status-page.png"))
        browser.execute_script("window.notReloaded = true")  # gone once the page has reloaded itself
        deadline = time.monotonic() + REFRESH + 10
        while browser.execute_script("return window.notReloaded === true") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert browser.execute_script("return window.notReloaded === true") is False
        assert text("h1") == "nodemanager 0.1.0: controller demo"  # reloaded with the cookie: still the page, not the form
    finally:
        browser.quit()
    assert (ARTIFACTS / "status-page.png").stat().st_size > 10_000  # (docs/images/status-page.png is one such)
