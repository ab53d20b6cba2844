"""`kerneltui serve-web`: the dashboard in a browser, through textual-serve.

Each browser connection runs `python -m kerneltui dashboard WORKSPACE` as a subprocess, drawn by xterm.js.
Every request must carry the server's random token: `?token=` in the URL printed at start, or the cookie the
page sets when it is opened with that URL (the page's scripts and its websocket then send it). A cookie is taken
only from a request of the page's own origin, so another site the browser has open cannot drive the dashboard.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
import secrets
import shlex
import socket
import sys
from asyncio.subprocess import Process
from pathlib import Path

from aiohttp import WSCloseCode, web
from aiohttp.typedefs import Handler, Middleware
from textual_serve.app_service import AppService
from textual_serve.server import Server

WILDCARD_HOSTS = ("", "0.0.0.0", "::")
QUIT_WAIT_S = 20.0  # a dashboard that quits cleanly ends within this (its scheduler's stop waits up to 15 s)


def dashboard_command(workspace: Path, extra: list[str]) -> str:
    """The shell command textual-serve runs for each browser: this Python, this workspace, quoted."""
    return "exec " + shlex.join([sys.executable, "-m", "kerneltui", "dashboard", str(workspace), *extra])


def is_local(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def listening_socket(host: str, port: int) -> socket.socket:
    """Bound before the server starts, so port 0 becomes a real port that can be printed."""
    family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    return socket.create_server((host, port), family=family)


def page_url(host: str, port: int, token: str) -> str:
    shown = socket.gethostname() if host in WILDCARD_HOSTS else host
    shown = f"[{shown}]" if ":" in shown else shown
    return f"http://{shown}:{port}/?token={token}"


def token_matches(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def same_origin(request: web.Request) -> bool:
    origin = request.headers.get("Origin")
    return origin is None or origin == f"{request.scheme}://{request.host}"


def token_middleware(token: str, cookie: str) -> Middleware:
    """403 for any request without the token; the page opened with it sets it as a cookie for the rest."""

    @web.middleware
    async def check_token(request: web.Request, handler: Handler) -> web.StreamResponse:
        in_query = token_matches(request.query.get("token"), token)
        in_cookie = token_matches(request.cookies.get(cookie), token) and same_origin(request)
        if not (in_query or in_cookie):
            raise web.HTTPForbidden(text="kerneltui: this URL needs the token printed by `kerneltui serve-web`\n")
        response = await handler(request)
        if in_query and not response.prepared:
            response.set_cookie(cookie, token, httponly=True, samesite="Strict", path="/")
        return response

    return check_token


async def end_app(app_service: AppService) -> None:
    """Asks a browser's dashboard to quit, and kills it if it has not ended within QUIT_WAIT_S: textual-serve
    would wait for ever on a dashboard that does not end (one told to quit before its first screen once did, and
    SIGTERM only asks it to quit again)."""
    process: Process | None = getattr(app_service, "_process", None)
    if process is None or process.returncode is not None:
        return
    await app_service.send_meta({"type": "quit"})
    try:
        await asyncio.wait_for(process.wait(), QUIT_WAIT_S)
    except TimeoutError:
        process.kill()
        await process.wait()


class DashboardServer(Server):
    """textual-serve's Server on a socket bound beforehand, every request checked for the token."""

    def __init__(self, command: str, sock: socket.socket, token: str) -> None:
        host, port = sock.getsockname()[:2]
        super().__init__(command, host=host, port=port, title="kerneltui")
        self.sock, self.token = sock, token
        self.browsers: set[web.WebSocketResponse] = set()

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(token_middleware(self.token, f"kerneltui_token_{self.port}"))
        return app

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        # The page's script and websocket URLs are absolute: make them name the host the browser asked for
        self.public_url = f"{request.scheme}://{request.host}"
        return await super().handle_index(request)

    async def _process_messages(self, websocket: web.WebSocketResponse, app_service: AppService) -> None:
        self.browsers.add(websocket)
        try:
            await super()._process_messages(websocket, app_service)
        finally:  # the browser went away, or the server stops
            self.browsers.discard(websocket)
            await end_app(app_service)

    async def on_startup(self, app: web.Application) -> None:
        """textual-serve prints a banner with the URL here; serve-web prints its own, with the token, once."""

    async def on_shutdown(self, app: web.Application) -> None:
        """Ctrl-C or SIGTERM: each browser's connection closed, so its dashboard is asked to quit at once."""
        for websocket in list(self.browsers):
            await websocket.close(code=WSCloseCode.GOING_AWAY, message=b"kerneltui serve-web stopped")

    def initialize_logging(self) -> None:
        logging.basicConfig(level=logging.INFO, format="%(message)s")

    def serve(self, debug: bool = False) -> None:
        self.debug = debug
        self.initialize_logging()
        # No access log: request lines carry the token
        web.run_app(self._make_app(), sock=self.sock, print=None, access_log=None, shutdown_timeout=5)


def serve(workspace: Path, host: str, port: int, extra: list[str]) -> int:
    """Serves the dashboard for `workspace` until Ctrl-C; `extra` are more arguments for `kerneltui dashboard`."""
    token = secrets.token_urlsafe(24)
    try:
        sock = listening_socket(host, port)
    except OSError as exc:  # a port in use, an address not of this box, a name that does not resolve
        print(f"error: cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if not is_local(host):
        print(
            f"warning: listening on {host or 'every interface'}: anyone who has the URL can steer agents, "
            "approve and reject versions; the connection is not encrypted",
            file=sys.stderr,
        )
    print(f"kerneltui web view of {workspace}: open {page_url(host, sock.getsockname()[1], token)}", flush=True)
    print("Ctrl-C stops it", flush=True)
    DashboardServer(dashboard_command(workspace, extra), sock, token).serve()
    return 0
