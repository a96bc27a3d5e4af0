"""How the screenshots in docs/dashboards.md were taken: headless Chromium, driven
through its DevTools protocol (aiohttp, which Ray's dashboard installs), one PNG per page.

    python docs/figures/dashboards/screenshots.py OUT.png URL [WAIT_S] [COOKIE=VALUE] [JS]

``COOKIE=VALUE`` (or ``-``) is set for the page's host first: the Ray dashboard's
``ray-authentication-token`` (the token in ``~/.ray/auth_token``) spares its token dialog.
``JS`` runs in the page once it has loaded (e.g. a click that expands a row), and the
picture is taken a few seconds later.
Needs Debian's ``chromium`` (``apt-get install -y chromium``).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.request import urlopen

import aiohttp

DEVTOOLS_PORT = 9339
WINDOW = "1500,950"
SCRIPT_WAIT_S = 4.0


async def capture(
    url: str, out: Path, wait_s: float, cookie: str | None, script: str | None
) -> None:
    """Open ``url`` in the browser listening on DEVTOOLS_PORT and save the page as ``out``."""
    with urlopen(f"http://127.0.0.1:{DEVTOOLS_PORT}/json") as answer:
        page = next(p for p in json.load(answer) if p["type"] == "page")
    ids = itertools.count(1)
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws,
    ):

        async def call(method: str, **params) -> dict:
            number = next(ids)
            await ws.send_json({"id": number, "method": method, "params": params})
            async for message in ws:
                reply = json.loads(message.data)
                if reply.get("id") == number:
                    return reply.get("result", {})
            raise ConnectionError(f"browser closed during {method}")

        if cookie:
            name, value = cookie.split("=", 1)
            await call("Network.enable")
            await call("Network.setCookie", name=name, value=value, url=url)
        await call("Page.navigate", url=url)
        await asyncio.sleep(wait_s)  # the single-page apps fetch their data after load
        if script:
            await call("Runtime.evaluate", expression=script)
            await asyncio.sleep(SCRIPT_WAIT_S)
        shot = await call("Page.captureScreenshot", format="png")
    out.write_bytes(base64.b64decode(shot["data"]))


def main(argv: list[str]) -> int:
    out, url = Path(argv[0]), argv[1]
    wait_s = float(argv[2]) if len(argv) > 2 else 8.0
    cookie = argv[3] if len(argv) > 3 and argv[3] != "-" else None
    script = argv[4] if len(argv) > 4 else None
    with tempfile.TemporaryDirectory() as profile:
        command = [
            "chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--window-size={WINDOW}", f"--user-data-dir={profile}",
            f"--remote-debugging-port={DEVTOOLS_PORT}", "about:blank",
        ]  # fmt: skip
        browser = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            time.sleep(3)  # the DevTools endpoint comes up
            asyncio.run(capture(url, out, wait_s, cookie, script))
        finally:
            browser.terminate()
            browser.wait()
    print(f"{out}: {out.stat().st_size} bytes from {url}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
