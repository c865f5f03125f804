"""Headless Chromium driven over the DevTools protocol, for the tests of planc's HTML page.

Chromium speaks the protocol over two pipes (`--remote-debugging-pipe`: it reads
commands from fd 3 and writes answers and events to fd 4, each message JSON ended by a
NUL byte), so the tests need no websocket client and no port. `Chromium()` starts one
browser; `open(path)` loads a page in a new tab and collects every script error, console
error and log error the page causes (`Tab.errors`).
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import zlib

# Hang guards only (a wedged browser fails the test instead of hanging it): never a
# measure of speed.
_WAIT = 120.0

NAMES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


class ChromiumError(RuntimeError):
    pass


def _high(fd: int) -> int:
    """`fd` moved to a number of 10 or more (not inherited)."""
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


class Chromium:
    """One headless browser; use as a context manager."""

    def __init__(self, executable: str | None = None):
        self.executable = executable or find_chromium()
        if self.executable is None:
            raise ChromiumError("no chromium on PATH")
        self._profile = tempfile.mkdtemp(prefix="planc-chromium-")
        to_browser, self._to_browser = os.pipe()
        self._from_browser, from_browser = os.pipe()
        # The browser's ends above 9, so that `3<&N 4>&M` cannot overwrite one with the other
        # (bash, not sh: dash takes one-digit descriptors only).
        to_browser, from_browser = (_high(to_browser), _high(from_browser))
        # fd 3 and 4 in the browser, whatever numbers the pipes have here.
        cmd = ["bash", "-c", f'exec "$0" "$@" 3<&{to_browser} 4>&{from_browser}',
               self.executable, "--headless", "--no-sandbox", "--disable-gpu",
               "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
               "--disable-extensions", "--disable-background-networking", "--mute-audio",
               "--hide-scrollbars", "--remote-debugging-pipe",
               f"--user-data-dir={self._profile}", "about:blank"]
        self._process = subprocess.Popen(cmd, pass_fds=(to_browser, from_browser),
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
        os.close(to_browser)
        os.close(from_browser)
        self._next = 0
        self._answers: dict[int, queue.Queue] = {}
        self._events: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except Exception:  # noqa: BLE001 -- closing anyway
            pass
        try:
            self._process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._to_browser)
        shutil.rmtree(self._profile, ignore_errors=True)

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_browser, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                self._events.put(None)
                for q in list(self._answers.values()):
                    q.put({"error": {"message": "the browser went away"}})
                os.close(self._from_browser)
                return
            buf += chunk
            *messages, buf = buf.split(b"\0")
            for raw in messages:
                message = json.loads(raw)
                if "id" in message:
                    with self._lock:
                        q = self._answers.get(message["id"])
                    if q is not None:
                        q.put(message)
                else:
                    self._events.put(message)

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = _WAIT) -> dict:
        with self._lock:
            self._next += 1
            ident = self._next
            q = self._answers[ident] = queue.Queue()
        message = {"id": ident, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        try:
            answer = q.get(timeout=timeout)
        except queue.Empty:
            raise ChromiumError(f"{method}: no answer in {timeout:.0f} s") from None
        finally:
            with self._lock:
                self._answers.pop(ident, None)
        if "error" in answer:
            raise ChromiumError(f"{method}: {answer['error'].get('message')}")
        return answer["result"]

    def event(self, timeout: float = _WAIT) -> dict:
        try:
            message = self._events.get(timeout=timeout)
        except queue.Empty:
            raise ChromiumError(f"no event from the browser in {timeout:.0f} s") from None
        if message is None:
            raise ChromiumError("the browser went away")
        return message

    def open(self, path: str, width: int = 1280, height: int = 900) -> "Tab":
        """A new tab showing the file `path`, loaded (its load event fired)."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target,
                                                      "flatten": True})["sessionId"]
        tab = Tab(self, session)
        for domain in ("Page", "Runtime", "Log"):
            tab.send(f"{domain}.enable")
        tab.send("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        tab.send("Page.navigate", {"url": "file://" + os.path.abspath(path)})
        tab.wait_for("Page.loadEventFired")
        return tab


class Tab:
    """One page: `evaluate` runs script in it, `errors` holds what went wrong there."""

    def __init__(self, browser: Chromium, session: str):
        self.browser = browser
        self.session = session
        self.errors: list[str] = []

    def send(self, method: str, params: dict | None = None) -> dict:
        result = self.browser.send(method, params, self.session)
        self._drain()
        return result

    def _note(self, message: dict) -> None:
        if message.get("sessionId") != self.session:
            return
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.exceptionThrown":
            d = params["exceptionDetails"]
            text = d.get("exception", {}).get("description") or d.get("text")
            self.errors.append(f"exception: {text}")
        elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert",
                                                                           "warning"):
            args = [a.get("value", a.get("description")) for a in params.get("args", [])]
            self.errors.append(f"console.{params['type']}: {args}")
        elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
            self.errors.append(f"log {params['entry']['level']}: {params['entry']['text']}")

    def _drain(self) -> None:
        while True:
            try:
                message = self.browser._events.get_nowait()
            except queue.Empty:
                return
            if message is None:
                raise ChromiumError("the browser went away")
            self._note(message)

    def wait_for(self, method: str) -> dict:
        while True:
            message = self.browser.event()
            self._note(message)
            if message.get("method") == method and message.get("sessionId") == self.session:
                return message.get("params", {})

    def evaluate(self, expression: str):
        """The value of `expression` in the page (awaited when it is a promise);
        ChromiumError when it throws."""
        result = self.send("Runtime.evaluate", {"expression": expression,
                                                "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            d = result["exceptionDetails"]
            raise ChromiumError(d.get("exception", {}).get("description") or d.get("text"))
        return result["result"].get("value")

    def screenshot(self) -> bytes:
        """The viewport as PNG bytes."""
        return base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"})["data"])


# -- PNG, read back for its facts ------------------------------------------------------------

def png_size(png: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's header."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def png_pixels(png: bytes) -> tuple[int, int, int, list[bytes]]:
    """(width, height, bytes per pixel, rows): an 8-bit RGB or RGBA PNG, unfiltered."""
    width, height = png_size(png)
    depth, color, interlace = png[24], png[25], png[28]
    assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
    bpp = 3 if color == 2 else 4
    data, at = b"", 8
    while at < len(png):
        n = int.from_bytes(png[at:at + 4], "big")
        kind = png[at + 4:at + 8]
        if kind == b"IDAT":
            data += png[at + 8:at + 8 + n]
        at += 12 + n
    raw = zlib.decompress(data)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def png_colours(png: bytes, step: int = 4) -> int:
    """How many distinct colours a grid of every `step`-th pixel holds."""
    width, height, bpp, rows = png_pixels(png)
    seen = set()
    for y in range(0, height, step):
        row = rows[y]
        for x in range(0, width, step):
            seen.add(row[x * bpp:x * bpp + 3])
    return len(seen)
