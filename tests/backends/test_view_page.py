"""``tracescore view`` of the HaluEval demo's local file, opened in headless Chromium: the page
shows every trace of the file with its scores on the agent spans (the values, labels and
reasons the file holds), and its filter by outcome shows exactly the failing traces.

The same check runs in ``scripts/screenshots.py --only view`` before it captures
docs/img/view.png, so the screenshot in the docs is one of scores that were really there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.backends.test_reports import page  # noqa: F401 - the fixture

REPO = Path(__file__).resolve().parents[2]
ROWS = 20


def make_view_page(workdir: Path, rows: int = ROWS) -> tuple[Path, Path]:
    """Run the demo on ``rows`` questions in ``workdir`` with the file default (no OTLP
    endpoint), then ``tracescore view``; the span file and the page."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_"))}
    env.update(LITELLM_OFFLINE_MODE="true", PYTHONPATH=str(REPO))
    subprocess.run([sys.executable, str(REPO / "examples" / "halueval_rag.py"), "--limit",
                    str(rows)], cwd=workdir, env=env, check=True, capture_output=True,
                   timeout=300)
    view = subprocess.run([sys.executable, "-m", "tracescore", "view"], cwd=workdir, env=env,
                          check=True, capture_output=True, text=True, timeout=300)
    assert view.stdout.startswith("tracescore view: wrote tracescore-view.html: "), \
        view.stdout
    return workdir / "tracescore-traces.jsonl", workdir / "tracescore-view.html"


def file_scores(spans_file: Path) -> dict[str, list[dict[str, Any]]]:
    """Per trace id, the score events of the file: scorer, value, label, reason, span name."""
    out: dict[str, list[dict[str, Any]]] = {}
    for line in spans_file.read_text(encoding="utf-8").splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    scores = out.setdefault(span["traceId"], [])
                    for event in span.get("events", []):
                        if event["name"] != "gen_ai.evaluation.result":
                            continue
                        a = {x["key"]: next(iter(x["value"].values()))
                             for x in event["attributes"]}
                        scores.append({"scorer": a["gen_ai.evaluation.name"],
                                       "score": a.get("gen_ai.evaluation.score.value"),
                                       "label": a.get("gen_ai.evaluation.score.label"),
                                       "reason": a.get("gen_ai.evaluation.explanation"),
                                       "span": span["name"]})
    return out


_READ = """(() => {
  const visible = e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const traces = [...document.querySelectorAll('section.trace')].map(t => ({
    id: t.dataset.traceId, hidden: t.hidden,
    spans: [...t.querySelectorAll('.span')].map(s => s.dataset.name),
    scores: [...t.querySelectorAll('.score')].map(s => ({
      scorer: s.dataset.scorer, outcome: s.dataset.outcome, score: s.dataset.score,
      span: s.closest('.span').dataset.name,
      shown: s.querySelector('.chip .value').innerText.trim(),
      reason: s.querySelector('.reason').innerText.trim(), visible: visible(s)}))}));
  return {traces, shown: document.getElementById('shown').innerText.trim(),
          inView: [...document.querySelectorAll('.score')].some(s => {
            const r = s.getBoundingClientRect();
            return r.height > 0 && r.top >= 0 && r.bottom <= innerHeight; })};
})()"""


def check_view_page(page: Any, url: str, spans_file: Path) -> None:  # noqa: F811
    """Open the page and assert it shows the file's traces and scores, and that the outcome
    filter shows the failing traces only."""
    expected = file_scores(spans_file)
    page.open(url, shows="content-similarity")
    shown = page.evaluate(_READ)
    assert {t["id"] for t in shown["traces"]} == set(expected)
    assert shown["inView"], "no score is visible in the first screen"
    for trace in shown["traces"]:
        assert trace["spans"][0] == "invoke_agent halueval-rag"  # the root first
        want = expected[trace["id"]]
        assert len(trace["scores"]) == len(want) == 1
        got, file = trace["scores"][0], want[0]
        assert (got["scorer"], got["outcome"], got["span"]) == \
            (file["scorer"], file["label"], file["span"])
        assert float(got["score"]) == file["score"]
        assert got["reason"] == file["reason"]
        assert got["visible"]
    failing = {t for t, scores in expected.items() if any(s["label"] == "fail" for s in scores)}
    assert failing, "the demo's file has no failing score to filter on"
    page.click("button.pick", "fail")
    shown = page.evaluate(_READ)
    assert {t["id"] for t in shown["traces"] if not t["hidden"]} == failing
    assert shown["shown"] == f"showing {len(failing)} of {len(expected)} traces"


def open_first_span(page: Any) -> None:  # noqa: F811 - a page, not the fixture
    """Unfold the first visible trace's root span, so its GenAI attributes show."""
    page.evaluate("""(() => {
      const t = [...document.querySelectorAll('section.trace')].find(t => !t.hidden);
      t.querySelector('.span > .row').click();
      window.scrollTo(0, 0);
    })()""")
    page.wait_text("GenAI attributes")


def test_the_view_of_the_demo_file_shows_its_scores(page: Any, tmp_path: Path) -> None:  # noqa: F811
    spans_file, html = make_view_page(tmp_path)
    check_view_page(page, html.as_uri(), spans_file)
    open_first_span(page)
    page.screenshot(tmp_path / "view.png")
    assert (tmp_path / "view.png").stat().st_size > 10_000
