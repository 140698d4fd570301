"""One webhook request: a POST with the standard library, bounded in time and in what it reads.

Redirects are never followed (a 3xx is the answer: urllib would turn the POST
into a GET and send ``Authorization`` to wherever it points); ``https://``
uses ``webhook.tls``.  A request has one deadline, ``webhook.timeout_s``, for
all of it (connecting, the TLS handshake, sending, the answer): a socket
timeout bounds each read only, and a receiver dripping a byte every second
would otherwise hold the one worker, and every later alert, for ever.  Of
the answer's body at most :data:`MAX_RESPONSE_BYTES` are read (a 400 MB
body costs nothing).  :func:`_attempt` turns what a request gives (a status,
or an exception) into a :class:`WebhookError` with a metric label.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from ..core.errors import AgentError
from ..settings.sections import WebhookSettings

#: what a post returns: the HTTP status; raising means no answer (timeout, connection)
Post = Callable[[str, bytes, Mapping[str, str], float], int]

#: the most of an answer's body that is read (an error message fits); the rest is never read
MAX_RESPONSE_BYTES = 64 * 1024


class WebhookError(AgentError):
    """One failed attempt; ``reason`` is the metric label, ``retry`` whether trying again can help."""

    def __init__(self, reason: str, detail: str, retry: bool) -> None:
        super().__init__(detail)
        self.reason = reason
        self.retry = retry


class _Deadline:
    """A request's whole time limit: once it passes, the request's TCP connection is shut down, so no
    read or write of it blocks any longer (whatever the layer above: plain, TLS, a proxy's tunnel).

    It keeps its own duplicate of each socket's descriptor: a shutdown reaches the connection even
    after the TLS layer took the socket over, and never a descriptor the request has closed since."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._done = False
        self._lock = threading.Lock()
        self._watched: list[socket.socket] = []
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, sock: socket.socket) -> socket.socket:
        with self._lock:
            if not self._done:
                self._watched.append(socket.fromfd(sock.fileno(), sock.family, sock.type))
                if self.expired:
                    self._shut_all()
        return sock

    def _expire(self) -> None:
        with self._lock:
            if not self._done:
                self.expired = True
                self._shut_all()

    def _shut_all(self) -> None:
        for s in self._watched:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def check(self, cause: BaseException | None = None) -> None:
        """:class:`TimeoutError` when the deadline has passed (what the request got since is cut short)."""
        if self.expired:
            raise TimeoutError("the whole request took longer") from cause

    def cancel(self) -> None:
        """The request is over: stop the timer, let go of the duplicates."""
        with self._lock:
            self._done = True
            self._timer.cancel()
            for s in self._watched:
                s.close()
            self._watched.clear()


def _timed(http_class: Any, deadline: _Deadline) -> Any:
    """``http_class`` (urllib's HTTP or HTTPS connection) with each new socket watched by ``deadline``."""

    class Timed(http_class):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            create = self.__dict__.get("_create_connection", socket.create_connection)
            # http.client opens its socket with this attribute: watched from before the TLS handshake
            self.__dict__["_create_connection"] = lambda *a, **k: deadline.watch(create(*a, **k))

    return Timed


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Alerts never follow a redirect: urllib would turn the POST into a GET, drop the body and
    send our headers (Authorization) to wherever the answer points.  The 3xx is the answer."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class _TimedHTTP(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def do_open(self, http_class: Any, req: Any, **kw: Any) -> Any:
        return super().do_open(_timed(http_class, self._deadline), req, **kw)


class _TimedHTTPS(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline, context: Any) -> None:
        super().__init__(context=context)
        self._deadline = deadline

    def do_open(self, http_class: Any, req: Any, **kw: Any) -> Any:
        return super().do_open(_timed(http_class, self._deadline), req, **kw)


def urllib_poster(settings: WebhookSettings) -> Post:
    """POST with the standard library: no redirects, the TLS settings' CA and client certificate, one
    deadline (``timeout_s``) for the whole request, at most :data:`MAX_RESPONSE_BYTES` of the answer read."""
    https = settings.url is not None and settings.url.lower().startswith("https:")
    context = settings.tls.context() if https else None

    def post(url: str, body: bytes, headers: Mapping[str, str], timeout_s: float) -> int:
        deadline = _Deadline(timeout_s)
        handlers: list[urllib.request.BaseHandler] = [_NoRedirect(), _TimedHTTP(deadline)]
        handlers.append(_TimedHTTPS(deadline, context))
        req = urllib.request.Request(url, data=body, method="POST", headers=dict(headers))
        try:
            with urllib.request.build_opener(*handlers).open(req, timeout=timeout_s) as resp:
                deadline.check()  # headers cut short by the deadline are no answer
                status = int(resp.status)
                # The status is the answer; the body only drained, bounded in size and in time.
                with contextlib.suppress(OSError, http.client.HTTPException):
                    resp.read(MAX_RESPONSE_BYTES)
                return status
        except urllib.error.HTTPError as e:
            e.close()
            deadline.check()
            return int(e.code)
        except (OSError, http.client.HTTPException) as e:
            deadline.check(e)
            raise
        finally:
            deadline.cancel()

    return post


def urllib_post(url: str, body: bytes, headers: Mapping[str, str], timeout_s: float) -> int:
    """POST with the standard library and the system's CAs (no redirects); the status of any answer."""
    return urllib_poster(WebhookSettings(url=url))(url, body, headers, timeout_s)


def split_credentials(url: str) -> tuple[str, str | None]:
    """``http://user:pass@host/x`` -> (``http://host/x``, the Basic ``Authorization`` value).

    urllib would take ``user:pass@host`` for the host name; the credentials
    (percent-decoded) go in a header instead, as every HTTP client does.
    """
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    token = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}".encode()
    return urllib.parse.urlunsplit(parts._replace(netloc=host)), "Basic " + base64.b64encode(token).decode()


def _attempt(post: Post, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float) -> None:
    try:
        status = post(url, body, headers, timeout_s)
    except TimeoutError as e:
        raise WebhookError("timeout", f"no answer within {timeout_s}s: {e}", retry=True) from e
    except urllib.error.URLError as e:
        if isinstance(e.reason, TimeoutError):
            raise WebhookError("timeout", f"no answer within {timeout_s}s", retry=True) from e
        raise WebhookError("connection", str(e.reason), retry=True) from e
    except OSError as e:
        raise WebhookError("connection", str(e), retry=True) from e
    except http.client.InvalidURL as e:  # its message quotes the URL: it may hold a token
        raise WebhookError("invalid_request", f"{type(e).__name__} (not retried)", retry=False) from e
    except http.client.HTTPException as e:  # a receiver that does not speak HTTP (BadStatusLine, ...)
        raise WebhookError("bad_response", type(e).__name__, retry=True) from e
    except ValueError as e:
        # What http.client refuses to send (a header value, a URL); its message quotes the value, a secret.
        raise WebhookError("invalid_request", f"{type(e).__name__} (not retried)", retry=False) from e
    if 200 <= status < 300:
        return
    if 300 <= status < 400:
        raise WebhookError(
            "http_3xx", f"HTTP {status}: redirects are not followed (not retried)", retry=False
        )
    if status >= 500 or status in (408, 429):
        raise WebhookError(f"http_{status // 100}xx", f"HTTP {status}", retry=True)
    raise WebhookError(f"http_{status // 100}xx", f"HTTP {status} (not retried)", retry=False)
