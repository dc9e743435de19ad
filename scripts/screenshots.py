"""Take the documentation's screenshots of a score in Arize Phoenix and in Jaeger, from a real run,
of the HTML reports of ``tracescore eval`` and ``tracescore calibrate``, and of ``tracescore view``
of the demo's local file.

Starts each backend on loopback (``tests/backends/servers.py``), feeds it the HaluEval demo,
drives headless Chromium through the DevTools protocol (navigate, click a tab, check the page
shows the score, capture), and writes ``docs/img/phoenix-score.png`` and
``docs/img/jaeger-score.png``, (from ``tracescore eval``/``calibrate`` runs on the example
data) ``docs/img/eval-report.png`` and ``docs/img/calibrate-report.png``, and (from the demo run
with the file default, then ``tracescore view``) ``docs/img/view.png``. A page that does not
show the score (or, for a report, what its JSON report says) fails the script, so a
screenshot in the docs is always one of a score that was really there.

Usage (from the repository root, in the project's virtualenv with the ``backends`` extra,
after ``scripts/backends.sh``)::

    python scripts/screenshots.py                # all
    python scripts/screenshots.py --only jaeger  # one (phoenix, jaeger, reports or view)

Jaeger's binary built from its Go module has no UI (its web assets are not in the module): the
Jaeger screenshot needs the built Jaeger UI in ``$TRACESCORE_BACKENDS_DIR/jaeger-ui`` (see
``scripts/backends.sh``); without it that screenshot is skipped, and the script says so.
"""

from __future__ import annotations

import argparse
import base64
import io
import itertools
import json
import os
import subprocess
import sys
import tempfile
import urllib.parse
from pathlib import Path
from typing import Any

import websocket  # websocket-client
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.backends import servers  # noqa: E402

OUT = REPO / "docs" / "img"
DEMO = REPO / "examples" / "halueval_rag.py"
PROJECT = "halueval-rag-demo"
ROWS = 20
WIDTH, HEIGHT = 1600, 1000
MAX_WIDTH = 1200  # pixels of a committed PNG


class Page:
    """One headless Chromium tab, driven through the DevTools protocol over a websocket."""

    def __init__(self, chromium: str, workdir: Path) -> None:
        port = servers.free_port()
        self.process = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--hide-scrollbars", f"--user-data-dir={workdir / 'chromium'}",
             f"--window-size={WIDTH},{HEIGHT}", f"--remote-debugging-port={port}",
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )

        def page_target() -> dict[str, Any] | None:
            try:
                targets = servers.http_json(f"http://127.0.0.1:{port}/json/list")
            except OSError:
                return None
            return next((t for t in targets if t.get("type") == "page"), None)

        target = servers.wait_for(page_target, timeout=60, what="Chromium's DevTools",
                                  process=self.process)
        # No Origin header: Chromium refuses DevTools websockets from unlisted origins.
        self.ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=60,
                                              suppress_origin=True)
        self._ids = itertools.count(1)
        self.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=HEIGHT,
                  deviceScaleFactor=1, mobile=False)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one DevTools command and return its result (events in between are ignored)."""
        message_id = next(self._ids)
        self.ws.send(json.dumps({"id": message_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == message_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str, shows: str) -> None:
        """Navigate to ``url`` and wait until the page has loaded whole (a large page is parsed
        in parts: its first text shows before its last element exists) and its text contains
        ``shows``."""
        self.evaluate("window.tracescoreLeft = true")  # marks the page being left
        self.call("Page.navigate", url=url)
        servers.wait_for(
            lambda: True if self.evaluate(
                "!window.tracescoreLeft && document.readyState === 'complete'") else None,
            timeout=60, what=f"{url} loaded")
        self.wait_text(shows)

    def wait_text(self, text: str, timeout: float = 60) -> None:
        """Wait until the page's visible text contains ``text``."""
        servers.wait_for(
            lambda: True if self.evaluate(
                f"!!document.body && document.body.innerText.includes({json.dumps(text)})")
            else None,
            timeout=timeout, what=f"page text {text!r}",
        )

    def click(self, selector: str, text: str, row: str | None = None) -> None:
        """Click the element matching ``selector`` whose text starts with ``text``, the last one
        in document order (the innermost when several nest); with ``row``, only inside a table
        row whose text contains ``row``."""
        clicked = self.evaluate(
            f"""(() => {{
                const row = {json.dumps(row)};
                const el = [...document.querySelectorAll({json.dumps(selector)})]
                    .filter(e => e.innerText && e.innerText.trim().startsWith({json.dumps(text)}))
                    .filter(e => !row || (e.closest('tr')?.innerText || '').includes(row))
                    .pop();
                if (!el) return false;
                el.scrollIntoView({{block: 'center'}});
                el.click();
                return true;
            }})()"""
        )
        if not clicked:
            raise RuntimeError(f"nothing to click: {selector} with text {text!r}")

    def screenshot(self, path: Path, clip: tuple[int, int, int, int] | None = None) -> None:
        """Capture the viewport (or ``clip``: x, y, width, height), shrink, write a PNG."""
        params: dict[str, Any] = {"format": "png"}
        if clip:
            x, y, w, h = clip
            params["clip"] = {"x": x, "y": y, "width": w, "height": h, "scale": 1}
            params["captureBeyondViewport"] = True
        png = base64.b64decode(self.call("Page.captureScreenshot", **params)["data"])
        image = Image.open(io.BytesIO(png)).convert("RGB")
        if image.width > MAX_WIDTH:
            image = image.resize((MAX_WIDTH, round(image.height * MAX_WIDTH / image.width)),
                                 Image.Resampling.LANCZOS)
        path.parent.mkdir(parents=True, exist_ok=True)
        # A palette of 256 colours: a UI screenshot stays sharp at a fraction of the size.
        image.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
        print(f"wrote {path} ({path.stat().st_size // 1024} KiB)")

    def close(self) -> None:
        self.ws.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=20)


def run_demo(workdir: Path, env: dict[str, str]) -> dict[str, Any]:
    """Run the demo on the first ``ROWS`` questions with ``env``; its --json summary."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_"))}
    clean.update(LITELLM_OFFLINE_MODE="true", PYTHONPATH=str(REPO), **env)
    proc = subprocess.run([sys.executable, str(DEMO), "--json", "--limit", str(ROWS)],
                          cwd=workdir, env=clean, capture_output=True, text=True, timeout=300,
                          check=True)
    return dict(json.loads(proc.stdout))


def phoenix_screenshot(page: Page, workdir: Path) -> None:
    with servers.phoenix(workdir / "phoenix") as backend:
        base = backend.urls["base"]
        run_demo(workdir, {"OTEL_EXPORTER_OTLP_ENDPOINT": base, "TRACESCORE_PHOENIX_URL": base,
                           "TRACESCORE_LOG_RECORDS": "false", "TRACESCORE_METRICS": "false"})
        from tests.backends.test_phoenix import read_annotations, read_spans

        spans = servers.wait_for(lambda: read_spans(base, 3 * ROWS), timeout=120,
                                 what="spans in Phoenix")
        agent_ids = [s["context"]["span_id"] for s in spans if s["name"].startswith("invoke_")]
        servers.wait_for(lambda: read_annotations(base, agent_ids, ROWS), timeout=120,
                         what="annotations in Phoenix")
        projects = servers.http_json(f"{base}/v1/projects")["data"]
        (project_id,) = [p["id"] for p in projects if p["name"] == PROJECT]
        # The lowest score (a hallucinated answer): open its trace from the spans table.
        low = min((s for s in spans if s["context"]["span_id"] in agent_ids),
                  key=lambda s: s["attributes"]["tracescore.score.content_similarity"])
        answer = json.loads(low["attributes"]["output.value"])
        page.open(f"{base}/projects/{project_id}", shows=answer)
        page.click("a", "invoke_agent halueval-rag", row=answer)
        page.wait_text("Annotations")
        page.click("*", "Annotations")
        page.wait_text("View annotation details")
        page.click("button", "Table")
        page.wait_text("fail")  # the label, with the explanation beside it
        page.screenshot(OUT / "phoenix-score.png", clip=(400, 48, 1200, 600))


def jaeger_screenshot(page: Page, workdir: Path, ui: Path) -> None:
    with servers.jaeger(workdir / "jaeger", ui_assets=ui) as backend:
        base = backend.urls["base"]
        summary = run_demo(workdir, {"OTEL_EXPORTER_OTLP_ENDPOINT": backend.urls["otlp"],
                                     "TRACESCORE_LOG_RECORDS": "false",
                                     "TRACESCORE_METRICS": "false"})
        assert summary["scorers"]["content-similarity"]["failed"] > 0, summary
        tags = json.dumps({"tracescore.label.content_similarity": "fail"})
        query = urllib.parse.urlencode({"service": PROJECT, "tags": tags, "limit": "20"})

        def failing() -> list[dict[str, Any]] | None:
            return servers.http_json(f"{base}/api/traces?{query}")["data"] or None

        trace_id = servers.wait_for(failing, timeout=60, what="a failing trace")[0]["traceID"]
        page.open(f"{base}/trace/{trace_id}", shows="invoke_agent halueval-rag")
        page.click("small", "invoke_agent halueval-rag")  # the agent span's row
        page.wait_text("Tags")
        # The span's events ("Logs"). The score event is stamped after the span's end, which
        # the UI hides until "show all"; that button sits in the header and toggles it too.
        page.click("button.AccordianLogs--toggle", "show all")
        page.wait_text("show in range")
        if not page.evaluate("!!document.querySelector('.AccordianLogs--content')"):
            page.click(".AccordianLogs--header", "Logs")
        page.wait_text("Log timestamps")
        page.click(".AccordianLogs .AccordianKeyValues--header", "")  # open the score event
        page.wait_text("gen_ai.evaluation.score.value")
        page.click(".AccordianKeyValues--header", "Tags")  # the span's attributes
        page.wait_text("tracescore.label.content_similarity")
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(OUT / "jaeger-score.png", clip=(400, 280, 1200, 900))


def reports_screenshots(page: Page, workdir: Path) -> None:
    """``tracescore eval --html`` and ``tracescore calibrate --html``: each page is checked
    against its JSON report (tests/backends/test_reports.py) before it is captured."""
    from tests.backends.test_reports import (
        check_calibration_page,
        check_eval_page,
        make_calibration_report,
        make_eval_report,
    )

    width = 1200 + 2 * 24  # the pages: 1200 px of content and 24 px of padding, centred
    left = (WIDTH - width) // 2
    html, data = make_eval_report(workdir)
    check_eval_page(page, html.as_uri(), data)
    page.screenshot(OUT / "eval-report.png", clip=(left, 0, width, 1000))
    html, data = make_calibration_report(workdir)
    check_calibration_page(page, html.as_uri(), data)
    page.screenshot(OUT / "calibrate-report.png", clip=(left, 0, width, 1100))


def view_screenshot(page: Page, workdir: Path) -> None:
    """``tracescore view`` of the demo's local file, filtered to the failing scores, the
    first trace's agent span unfolded: checked against the file (tests/backends/test_view_page.py)
    before it is captured."""
    from tests.backends.test_view_page import check_view_page, make_view_page, open_first_span

    folder = workdir / "view"
    folder.mkdir()
    spans_file, html = make_view_page(folder)
    check_view_page(page, html.as_uri(), spans_file)
    open_first_span(page)
    width = 1400 + 2 * 24  # the page: 1400 px of content and 24 px of padding, centred
    page.screenshot(OUT / "view.png", clip=((WIDTH - width) // 2, 0, width, 1000))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("phoenix", "jaeger", "reports", "view"))
    args = parser.parse_args(argv)
    chromium = servers.find_binary("chromium")
    if not chromium:
        print("chromium is not installed: run scripts/backends.sh", file=sys.stderr)
        return 1
    # Chromium's helper processes may still write to its profile while the directory is
    # removed: a leftover file there is no failure of the screenshots.
    with tempfile.TemporaryDirectory(prefix="tracescore-screenshots-",
                                     ignore_cleanup_errors=True) as tmp:
        workdir = Path(tmp)
        page = Page(chromium, workdir)
        try:
            if args.only in (None, "view"):
                view_screenshot(page, workdir)
            if args.only in (None, "reports"):
                reports_screenshots(page, workdir)
            if args.only in (None, "phoenix"):
                phoenix_screenshot(page, workdir)
            if args.only in (None, "jaeger"):
                ui = servers.backends_dir() / "jaeger-ui"
                if (ui / "index.html").is_file():
                    jaeger_screenshot(page, workdir, ui)
                else:
                    print(f"jaeger screenshot SKIPPED: no built Jaeger UI in {ui}",
                          file=sys.stderr)
        finally:
            page.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
