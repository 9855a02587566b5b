"""The dashboard in a real browser (Debian's chromium, headless, driven by Playwright) against
`blackbox serve` with data: the chart, the spike alert, the crash groups, a report's detail with
its screenshot, and a leaderboard. Saves a screenshot to test-artifacts/."""

from __future__ import annotations

import base64
import struct
import time
import zlib
from pathlib import Path

import httpx
from playwright.sync_api import Browser, Page, expect

from local_runtime.process import Serve

SKU = "dash:pc"
BOARD = "dash-board"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A solid-colour PNG, built by hand: enough for the browser to decode and lay out."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def trace(function: str, n: int) -> str:
    return f"#0 0x{0x7FF000 + n:x} in CrashHandler::Report()\n#1 0x{0x401000 + n * 16:x} in {function} at game.cpp:{n}"


def wait_for_reports(client: httpx.Client, count: int) -> None:
    deadline = time.monotonic() + 60
    while len(client.get("/v1/crashes", params={"sku": SKU, "limit": 1000}).json()["reports"]) < count:
        assert time.monotonic() < deadline, f"{count} reports did not become visible in 60 s"
        time.sleep(0.1)


def seed(serve: Serve) -> int:
    """25 crashes of one function and 5 of another (a burst: an alert on a quiet sku), the last
    with a screenshot; sessions; scores. Returns the screenshot report's id once all are visible."""
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        for n in range(30):
            report = {"sku": SKU, "crashType": "ACCESS_VIOLATION", "platform": "windows-x64", "buildVersion": "2.0.1",
                      "stackTrace": trace("World::Tick()" if n < 25 else "Audio::Mix(float*)", n)}
            if n == 29:
                # the newest report: ids follow persistence, and with several partitions that is not
                # the order of posting, so the others go first
                wait_for_reports(client, 29)
                report["attachments"] = {"screenshot.png": base64.b64encode(png(64, 36, (200, 40, 40))).decode()}
            assert client.post("/v1/crashes", json=report).status_code == 202
        sessions = [{"sku": SKU, "kind": "client", "playerId": f"p{n}"} for n in range(120)]
        assert client.post("/v1/sessions", json=sessions).status_code == 202
        scores = [{"board": BOARD, "playerId": f"p{n}", "score": n * 10} for n in range(40)]
        assert client.post("/v1/scores", json=scores).status_code == 202
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            reports = client.get("/v1/crashes", params={"sku": SKU, "limit": 1000}).json()["reports"]
            board = client.get(f"/v1/leaderboards/{BOARD}")
            series = client.get("/v1/stats", params={"sku": SKU}).json()["series"]
            if len(reports) == 30 and board.status_code == 200 and board.json()["players"] == 40 and \
                    sum(b["sessions"] for b in series) == 120:
                return int(next(r["reportId"] for r in reports if r["attachments"]))
            time.sleep(0.2)
    raise AssertionError("the seeded data did not become visible in 60 s")


def test_dashboard_shows_chart_groups_detail_and_leaderboard(serve: Serve, browser: Browser):
    screenshot_id = seed(serve)
    page: Page = browser.new_page(viewport={"width": 1400, "height": 1800})
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{serve.url}/?sku={SKU}&board={BOARD}")
    expect(page.locator("body[data-loaded]")).to_have_count(1)

    bars = page.locator("#chart svg rect.bar")
    expect(bars).to_have_count(60)  # the last hour, a bar a minute
    assert sum(int(v) for v in bars.evaluate_all("rs => rs.map(r => r.dataset.crashes)")) == 30
    assert sum(int(v) for v in bars.evaluate_all("rs => rs.map(r => r.dataset.sessions)")) == 120
    assert page.locator("#chart polyline.sessions").get_attribute("points")

    expect(page.locator("#alerts li").first).to_contain_text("crashes in a minute")

    groups = page.locator("#groups tbody tr")
    expect(groups).to_have_count(2)
    expect(groups.nth(0).locator("td").nth(0)).to_have_text("25")
    expect(groups.nth(0)).to_contain_text("World::Tick()")
    expect(groups.nth(1)).to_contain_text("Audio::Mix(float*)")

    reports = page.locator("#reports tbody tr")
    expect(reports).to_have_count(20)
    expect(reports.first).to_have_attribute("data-report-id", str(screenshot_id))  # newest first
    reports.first.click()
    expect(page.locator("#detail")).to_be_visible()
    expect(page.locator("#detail-trace")).to_contain_text("Audio::Mix(float*)")
    image = page.locator("#detail-attachments img")
    expect(image).to_have_attribute("alt", "screenshot.png")
    page.wait_for_function("() => document.querySelector('#detail-attachments img').complete")
    assert image.evaluate("img => [img.naturalWidth, img.naturalHeight]") == [64, 36]

    groups.nth(1).click()  # a group filters the latest reports by its signature
    expect(reports).to_have_count(5)

    entries = page.locator("#leaderboard tbody tr")
    expect(entries).to_have_count(20)
    expect(entries.first).to_contain_text("p39")
    expect(page.locator("#board-info")).to_have_text("40 players, desc, best")

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / f"dashboard-{serve.profile}.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes().startswith(b"\x89PNG")
    assert errors == []
    page.close()


def test_dashboard_assets_cannot_reach_outside_their_folder(serve: Serve):
    with httpx.Client(base_url=serve.url) as client:
        assert client.get("/dashboard/app.js").headers["content-type"] in ("text/javascript", "application/javascript")
        for path in ("/dashboard/../pyproject.toml", "/dashboard/%2e%2e%2fpyproject.toml", "/dashboard/.hidden",
                     "/dashboard/__init__.py"):
            response = client.get(path)
            assert response.status_code == 404 and response.json()["error"] == "not_found", path
