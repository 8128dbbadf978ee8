"""One bounded HTTP request for everything that talks to a foreign party (the Hugging Face Hub; `probe serve` has its
own streaming reader built the same way): a wall-clock deadline for the whole exchange, headers and body included
(a socket timeout bounds one recv only, and a server dripping a byte every 2 s outlived every limit), a cap on the
body read (a 1.5 GB config.json was downloaded and loaded whole), and redirects followed only within the same origin.

Only the stdlib: nothing extra installed for it.
"""

from __future__ import annotations

import base64
import http.client
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass, field

MAX_REDIRECTS = 5


class HttpTimeout(TimeoutError):
    """The whole exchange did not end within its time limit."""


class TooBig(ValueError):
    """The body is larger than the caller's cap."""


class BadRedirect(OSError):
    """A redirect off the origin, without a Location, or too many of them."""


@dataclass
class Answer:
    status: int
    body: bytes
    url: str  # after same-origin redirects
    headers: dict = field(default_factory=dict)


def _origin(u: urllib.parse.ParseResult) -> tuple:
    return (u.scheme, u.hostname, u.port)


def request(url: str, *, timeout_s: float, max_bytes: int, headers: dict | None = None, method: str = "GET",
            body: bytes | None = None) -> Answer:
    """The answer to one request, within ``timeout_s`` seconds in all and at most ``max_bytes`` of body (TooBig past
    that). Same-origin redirects (a renamed repository) are followed, MAX_REDIRECTS at most; others raise BadRedirect.
    ``user:password@`` in the URL becomes a Basic Authorization header. Network failures raise OSError."""
    deadline = time.monotonic() + timeout_s
    hdrs = dict(headers or {})
    for _ in range(MAX_REDIRECTS + 1):
        ans = _one(url, deadline, timeout_s, max_bytes, hdrs, method, body)
        if ans.status not in (301, 302, 303, 307, 308):
            return ans
        loc = ans.headers.get("location")
        if not loc:
            raise BadRedirect(f"HTTP {ans.status} redirect without a Location")
        nxt = urllib.parse.urljoin(url, loc)
        if _origin(urllib.parse.urlparse(nxt)) != _origin(urllib.parse.urlparse(url)):
            raise BadRedirect(f"HTTP {ans.status} redirect to another host ({urllib.parse.urlparse(nxt).netloc})")
        url = nxt
    raise BadRedirect(f"more than {MAX_REDIRECTS} redirects")


def _one(url: str, deadline: float, timeout_s: float, max_bytes: int, headers: dict, method: str,
         body: bytes | None) -> Answer:
    u = urllib.parse.urlparse(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise OSError(f"not an http(s) URL: {u.scheme}://{u.hostname or ''}")
    left = deadline - time.monotonic()
    if left <= 0:
        raise HttpTimeout(f"no answer within {timeout_s:g} s")
    host = f"[{u.hostname}]" if ":" in u.hostname else u.hostname
    try:
        port = u.port
    except ValueError:
        raise OSError("a bad port in the URL") from None
    cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
    conn = cls(host, port, timeout=min(left, timeout_s))
    hdrs = dict(headers)
    if u.username is not None:
        cred = f"{urllib.parse.unquote(u.username)}:{urllib.parse.unquote(u.password or '')}"
        hdrs["Authorization"] = "Basic " + base64.b64encode(cred.encode()).decode()
    fired = threading.Event()
    held: list = []  # the socket: http.client drops conn.sock when the answer will close

    def fire() -> None:
        fired.set()
        for sock in (conn.sock, *held):
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    timer = threading.Timer(left, fire)
    timer.daemon = True
    timer.start()
    try:
        conn.request(method, (u.path or "/") + (f"?{u.query}" if u.query else ""), body=body, headers=hdrs)
        held.append(conn.sock)
        if fired.is_set():
            raise HttpTimeout(f"no answer within {timeout_s:g} s")
        resp = conn.getresponse()
        length = resp.getheader("Content-Length")
        if length and length.isdigit() and int(length) > max_bytes and method != "HEAD":
            raise TooBig(f"{int(length):,} bytes (Content-Length), over the {max_bytes:,}-byte limit")
        data = b"" if method == "HEAD" else resp.read(max_bytes + 1)
        if fired.is_set():
            raise HttpTimeout(f"no whole answer within {timeout_s:g} s")
        if len(data) > max_bytes:
            raise TooBig(f"over the {max_bytes:,}-byte limit")
        return Answer(resp.status, data, url, {k.lower(): v for k, v in resp.getheaders()})
    except (OSError, http.client.HTTPException) as e:
        if fired.is_set():
            raise HttpTimeout(f"no whole answer within {timeout_s:g} s") from None
        if isinstance(e, OSError):
            raise
        raise OSError(f"{type(e).__name__}: {e}") from None
    finally:
        timer.cancel()
        conn.close()
