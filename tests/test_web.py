"""`kerneltui serve-web`: the real server as a subprocess, spoken to over HTTP and its websocket, and drawn by a
real headless Chromium."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import queue
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kerneltui.web import QUIT_WAIT_S, is_local
from tests import dashboard_fixtures
from tests.conftest import REPO

START_S = 120.0  # a loaded 2-core box: the server, then each browser's dashboard, take seconds to start
DRAW_S = 180.0
ANSI = re.compile(r"\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][0-9A-Za-z]|[=>78])")
INTRO_COLOURS = {(12, 24, 31), (18, 35, 45)}  # textual-serve's loading card and its backdrop, before the app draws


def pump(stream: Any, lines: queue.Queue[str]) -> None:
    """Reads a child's output to its end (so it never blocks on a full pipe), line by line into a queue."""
    for line in stream:
        lines.put(line)


def read_until(lines: queue.Queue[str], pattern: str, seconds: float) -> re.Match[str]:
    deadline, seen = time.monotonic() + seconds, []
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        seen.append(line)
        if found := re.search(pattern, line):
            return found
    raise AssertionError(f"no line matching {pattern!r} within {seconds:.0f} s; got:\n{''.join(seen)}")


def started(argv: list[str], stderr: int | None = subprocess.STDOUT) -> tuple[subprocess.Popen[str], queue.Queue[str]]:
    """A child in its own process group (so stop() ends it and everything it started), its output pumped."""
    proc = subprocess.Popen(
        argv, cwd=REPO, stdout=subprocess.PIPE, stderr=stderr, stdin=subprocess.DEVNULL, text=True,
        start_new_session=True,
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    stream = proc.stdout if stderr == subprocess.STDOUT else proc.stderr
    threading.Thread(target=pump, args=(stream, lines), daemon=True).start()
    return proc, lines


def stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM to the whole group, a bounded wait, then SIGKILL to whatever of the group is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass


@dataclass
class Served:
    url: str  # as printed: http://127.0.0.1:PORT/?token=...
    base: str  # http://127.0.0.1:PORT
    token: str
    pid: int  # the server's, and its process group's

    def ws(self, query: str) -> str:
        return self.base.replace("http://", "ws://") + "/ws" + query


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """serve-web over a workspace with a fixed history (v001-v004 of vadd), judging off."""
    workspace = dashboard_fixtures.build(tmp_path_factory.mktemp("web") / "ws")
    proc, lines = started([sys.executable, "-m", "kerneltui", "serve-web", str(workspace.root), "--no-judge"])
    try:
        found = read_until(lines, r"(http://127\.0\.0\.1:(\d+))/\?token=([\w-]+)", START_S)
        yield Served(found.group(0), found.group(1), found.group(3), proc.pid)
    finally:
        stop(proc)


async def status(session: aiohttp.ClientSession, url: str, **kwargs: Any) -> int:
    async with session.get(url, allow_redirects=False, **kwargs) as response:
        return response.status


async def test_the_page_and_its_files_need_the_token(served: Served) -> None:
    assert served.url.startswith("http://127.0.0.1:")  # localhost by default, a real port for --port 0
    static = served.base + "/static/js/textual.js"
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:  # unsafe: an IP host
        async with session.get(served.url) as page:
            assert page.status == 200
            assert "data-session-websocket-url" in await page.text()
            name, morsel = next(iter(page.cookies.items()))
        assert await status(session, static) == 200  # with the cookie the page set
        assert await status(session, static, headers={"Origin": "http://evil.example"}) == 403  # another site's page
    async with aiohttp.ClientSession() as session:  # no cookie
        assert await status(session, served.base + "/") == 403
        wrong = served.token[:-1] + ("y" if served.token.endswith("x") else "x")  # never the token itself
        assert await status(session, served.base + "/?token=" + wrong) == 403
        assert await status(session, static) == 403
        forged = ("y" if morsel.value.startswith("x") else "x") + morsel.value[1:]  # never the cookie itself
        assert await status(session, static, cookies={name: forged}) == 403
        assert await status(session, static + "?token=" + served.token) == 200


async def test_the_websocket_without_the_token_is_refused(served: Served) -> None:
    async with aiohttp.ClientSession() as session:
        for query in ("?width=80&height=24", "?token=wrong&width=80&height=24"):
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await session.ws_connect(served.ws(query))
            assert refused.value.status == 403


async def test_the_websocket_runs_the_dashboard(served: Served) -> None:
    """The browser's protocol: the size in the query, then a resize message; the app's screen comes back as
    terminal output, which draws the versions table."""
    output, text = b"", ""
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(served.ws(f"?token={served.token}&width=160&height=48")) as ws,
    ):
        await ws.send_str(json.dumps(["resize", {"width": 160, "height": 48}]))
        deadline = time.monotonic() + START_S + DRAW_S
        while not all(word in text for word in ("vadd", "v001", "v002", "v004", "judging off")):
            message = await ws.receive(timeout=max(1.0, deadline - time.monotonic()))
            assert message.type == aiohttp.WSMsgType.BINARY, f"{message!r}; drawn so far: {text[-2000:]!r}"
            output += message.data  # decoded whole: a character or an escape sequence may span two messages
            text = ANSI.sub("", output.decode("utf-8", "replace"))
        assert "pass" in text and "fail" in text


def png_rgb(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and RGB rows of an 8-bit RGB or RGBA PNG (no image library: the stdlib's zlib)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    chunks, pos = {}, 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        chunks[kind] = chunks.get(kind, b"") + data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert depth == 8 and colour in (2, 6), f"bit depth {depth}, colour type {colour}"
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(chunks[b"IDAT"]), width * bpp
    rows, prior = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        prior = unfilter(raw[start], bytearray(raw[start + 1 : start + 1 + stride]), prior, bpp)
        rows.append(b"".join(prior[i : i + 3] for i in range(0, stride, bpp)))
    return width, height, rows


def unfilter(kind: int, line: bytearray, prior: bytearray, bpp: int) -> bytearray:
    """PNG's per-line filters undone: 0 none, 1 sub, 2 up, 3 average, 4 Paeth."""
    if kind == 0:
        return line
    for i in range(len(line)):
        left = line[i - bpp] if i >= bpp else 0
        up, corner = prior[i], (prior[i - bpp] if i >= bpp else 0)
        if kind == 1:
            line[i] = (line[i] + left) & 255
        elif kind == 2:
            line[i] = (line[i] + up) & 255
        elif kind == 3:
            line[i] = (line[i] + (left + up) // 2) & 255
        elif kind == 4:
            p = left + up - corner
            near = min((abs(p - left), 0, left), (abs(p - up), 1, up), (abs(p - corner), 2, corner))[2]
            line[i] = (line[i] + near) & 255
    return line


def drawn(png: bytes) -> str | None:
    """None when the screenshot shows the app; else what it shows instead."""
    width, height, rows = png_rgb(png)
    colours = Counter(row[i : i + 3] for row in rows for i in range(0, len(row), 3))
    intro = sum(n for colour, n in colours.items() if tuple(colour) in INTRO_COLOURS)
    if intro > width * height // 2:
        return f"textual-serve's loading card or its closed-session card ({intro} of {width * height} pixels)"
    if len(colours) < 300:
        return f"only {len(colours)} colours"
    return None


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow
@pytest.mark.skipif(chromium() is None, reason="no chromium binary on PATH (apt-get install chromium)")
async def test_chromium_draws_the_dashboard(served: Served, tmp_path: Path) -> None:
    """Headless Chromium driven through its DevTools protocol: --screenshot with --virtual-time-budget does not
    wait for the dashboard (virtual time runs out while the app process starts, and the shot shows the loading
    card), so the page is opened and screenshotted again until the dashboard covers it."""
    argv = [chromium() or "", "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1200,800"]
    argv += ["--disable-dev-shm-usage", "--remote-debugging-port=0", f"--user-data-dir={tmp_path / 'profile'}"]
    argv += ["about:blank"]
    proc, lines = started(argv, stderr=subprocess.PIPE)
    try:
        devtools = read_until(lines, r"DevTools listening on ws://([\d.]+:\d+)/", START_S).group(1)
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://{devtools}/json/list") as listed:
                page = next(t for t in await listed.json() if t["type"] == "page")
            async with session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as cdp:
                navigated = await call(cdp, "Page.navigate", url=served.url)
                assert "error" not in navigated and "errorText" not in navigated["result"], navigated
                shot, why = await screenshot_when_drawn(cdp, time.monotonic() + START_S + DRAW_S)
        (tmp_path / "dashboard.png").write_bytes(shot)
        assert why is None, f"{why}; see {tmp_path / 'dashboard.png'}"
        width, height, _ = png_rgb(shot)
        assert width >= 1000 and height >= 500, (width, height)
    finally:
        stop(proc)


async def screenshot_when_drawn(cdp: aiohttp.ClientWebSocketResponse, deadline: float) -> tuple[bytes, str | None]:
    shot, why = b"", "no screenshot"
    while True:
        reply = await call(cdp, "Page.captureScreenshot", format="png")
        if "error" in reply:  # while the navigation swaps the page's renderer
            why = f"no screenshot: {reply['error']}"
        else:
            shot = base64.b64decode(reply["result"]["data"])
            why = drawn(shot)
        if why is None or time.monotonic() > deadline:
            return shot, why
        await asyncio.sleep(0.5)  # the polling step; the deadline bounds the wait


CDP_IDS = iter(range(1, 1_000_000))


async def call(cdp: aiohttp.ClientWebSocketResponse, method: str, **params: Any) -> dict[str, Any]:
    """One DevTools request and its reply, {"result": ...} or {"error": ...} (events meanwhile are passed over)."""
    ident = next(CDP_IDS)
    await cdp.send_json({"id": ident, "method": method, "params": params})
    while True:
        message = await cdp.receive_json(timeout=START_S)
        if message.get("id") == ident:
            return dict(message)


def dashboards(group: int) -> set[int]:
    """The `kerneltui dashboard` processes of a process group (Linux's /proc)."""
    found = set()
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:  # ended meanwhile
            continue
        if int(stat.rsplit(")", 1)[1].split()[2]) == group and b"dashboard" in argv:
            found.add(int(entry))
    return found


def ended_within(pid: int, seconds: float) -> bool:
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([handle], [], [], seconds)[0])
    finally:
        os.close(handle)


async def test_a_browser_that_leaves_at_once_leaves_no_dashboard_running(served: Served) -> None:
    """A dashboard told to quit before its first screen is drawn may never end by itself (Textual 8.2): the server
    asks it to quit and kills it if it has not ended within QUIT_WAIT_S."""
    before = dashboards(served.pid)
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(served.ws(f"?token={served.token}&width=133&height=39")) as ws,
    ):
        await ws.send_str(json.dumps(["resize", {"width": 133, "height": 44}]))
        deadline = time.monotonic() + START_S
        while not (started_now := dashboards(served.pid) - before):
            assert time.monotonic() < deadline, "no dashboard started for the websocket"
            await asyncio.sleep(0.05)  # the polling step; the deadline bounds the wait
    # left: the websocket closed before the dashboard (seconds to import) could draw
    for pid in started_now:
        ended = await asyncio.to_thread(ended_within, pid, QUIT_WAIT_S + START_S)
        assert ended, f"dashboard pid {pid} still runs after its browser left"


def test_only_loopback_addresses_count_as_local() -> None:
    assert all(map(is_local, ("127.0.0.1", "localhost", "::1", "127.0.0.2")))
    assert not any(map(is_local, ("0.0.0.0", "::", "", "192.168.1.4", "example.com")))


def test_a_dashboard_told_to_quit_before_its_first_screen_ends_by_itself(tmp_path: Path) -> None:
    """What a browser that leaves at once does to its dashboard: a resize, then quit, before the first screen.
    Textual 8.2 quitting while the TabbedContent is still being laid out never ended (its screen laid out again
    and again at full CPU) until serve-web killed it; the dashboard now waits for its first screen to quit."""
    workspace = tmp_path / "ws"
    shutil.copytree(REPO / "tests" / "fixtures" / "vadd", workspace / "vadd")
    env = {**os.environ, "TEXTUAL_DRIVER": "textual.drivers.web_driver:WebDriver", "COLUMNS": "80", "ROWS": "24"}

    def packet(meta: dict[str, Any]) -> bytes:
        payload = json.dumps(meta).encode()
        return b"M" + len(payload).to_bytes(4, "big") + payload

    command = [sys.executable, "-m", "kerneltui", "dashboard", str(workspace), "--no-judge"]
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=REPO
    ) as dashboard:
        assert dashboard.stdin is not None
        dashboard.stdin.write(packet({"type": "resize", "width": 133, "height": 44}) + packet({"type": "quit"}))
        dashboard.stdin.flush()
        try:
            code = dashboard.wait(timeout=START_S)
        except subprocess.TimeoutExpired:
            dashboard.kill()
            raise AssertionError("the dashboard told to quit still runs") from None
    assert code == 0
