"""What redaction (``tracescore._core.redact``) costs per span: with it, against the same run
without.

Run: ``python benchmarks/bench_redaction.py [--calls 5000] [--rounds 7]``

Each variant is a decorated call on an SDK ``TracerProvider`` with a no-op exporter behind
tracescore's export processor (``configure(exporter=NoopExporter())``, no scoring rule); the
redacted and unredacted runs alternate in rounds in this one process (the module's internal
``enabled`` switch, which nothing in tracescore sets), and the script prints the median µs per
span of each and their ratio:

- ``typical agent``: ``@tracescore.agent`` with a question and a user id in, a ~300-character
  answer out (the input and output JSON are redacted);
- ``16 KB content``: ``@tracescore.agent`` returning 16 KB of prose with a URL, colons and
  ``key: value`` lines in it (no credential: the common case, every rule scans it all);
- ``16 KB, 5 secrets``: the same text with five credentials planted (they are found and cut);
- ``redact_text 16 KB``: the bare function on the 16 KB text, without a span.

Then the export path's redaction of whole spans (``tracescore._export.scrub.Scrubber``, on the
export thread, so not in the figures above): a typical agent span as the decorators make it
(with its events and resource), and one with 16 KB of content.

Then 1 MiB adversarial texts (issue 22): runs of one character (each character that starts a
rule, and others), ``-----BEGIN ... PRIVATE KEY-----`` headers repeated with no end, the same
with ends, prose, prose with secrets, and dense candidates (``a=``, ``:a``, ``password=x``,
``token abc123x``, every rule's start in one text). For each: the best of ``--adv-rounds`` of
``redact_text`` in wall time and in thread CPU time, and the same text's cost of one
``str.count`` pass (a reference from the same run: the machine is shared and loaded).

Then disguised credentials: every text is searched once as it is and, when it may hold a
disguise (not ASCII, or a ``%``, ``&`` or ``\\`` in it), again as a person reads it (invisible
characters removed, NFKC, look-alike letters, percent escapes, HTML entities and backslash
escapes decoded, matches mapped back). For 1 MiB texts in three groups (typical texts, the
adversarial texts above, and encoded texts made to cost the most), ``redact_text``'s thread CPU
time with that second search and without it (the module's ``undisguise`` switch, which nothing
in tracescore sets), best of ``--adv-rounds``, alternating in this one process, their ratio, and
one ``str.count`` pass as a reference.

Also printed: the ``uptime`` load, since the machine is shared (compare ratios within one run).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult  # noqa: E402

import tracescore  # noqa: E402
from tracescore._core import redact as _redact  # noqa: E402

WORDS = (
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by",
    "on", "not", "this", "are", "or", "from", "at", "which", "but", "have", "an", "they", "you",
    "were", "her", "she", "there", "been", "one", "all", "we", "their", "has", "would", "when",
    "if", "so", "refund", "order", "policy", "delivery", "customer", "account", "days", "credit",
    "store", "shipping",
)


class NoopExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def prose(size: int, seed: int = 7) -> str:
    """``size`` characters of word soup with the punctuation real answers carry: sentences,
    a URL, a few ``Label: value`` lines and a ``name=value`` pair."""
    rng = random.Random(seed)
    parts: list[str] = []
    total = 0
    while total < size:
        sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18))).capitalize()
        extra = rng.random()
        if extra < 0.05:
            sentence += " See https://docs.example.com/help/orders-and-refunds for details"
        elif extra < 0.10:
            sentence = "Note: " + sentence
        elif extra < 0.12:
            sentence += " (order_id=A-1029-XY)"
        parts.append(sentence + ".")
        total += len(sentence) + 2
    return " ".join(parts)[:size]


def with_secrets(text: str) -> str:
    planted = [
        " sk-proj-Tq3RkX8vN2mW7yL4pZ6cB1dF9hJ0gA5s ",
        " Authorization: Bearer abcdefghijklmnop1234 ",
        " postgres://app:Hunter2pw@db:5432/x ",
        " password=Correct-Horse-9 ",
        " ghp_R2d2C3poBb8Yoda7Luke5Leia9Han0Solo1 ",
    ]
    step = len(text) // (len(planted) + 1)
    out = text
    for i, secret in enumerate(planted, 1):
        at = i * step
        out = out[:at] + secret + out[at + len(secret) :]
    return out[: len(text)]


MIB = 1 << 20


def adversarial() -> dict[str, str]:
    """The 1 MiB texts of issue 22's attack and a few more of our own."""
    texts = {f"run of {c!r}": c * MIB for c in "a-=:x_AB J/tk"}
    header = "-----BEGIN RSA PRIVATE KEY-----\n"
    texts["PEM headers, no end"] = (header * (MIB // len(header) + 1))[:MIB]
    block = header + "MIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n" \
        "-----END RSA PRIVATE KEY-----\n"
    texts["PEM blocks"] = (block * (MIB // len(block) + 1))[:MIB]
    texts["prose"] = prose(MIB)
    texts["prose, 5 secrets"] = with_secrets(prose(MIB))
    starts = ("sk- ghp_ xoxb- AKIA token password= key: Bearer Basic :// -----BEGIN eyJ pypi- "
              "npm_ hf_ r8_ ")
    for name, unit in {"a= dense": "a= ", ":a dense": ":a", "password=x dense": "password=x ",
                       "token abc123x dense": "token abc123x ",
                       "every rule's start": starts}.items():
        texts[name] = (unit * (MIB // len(unit) + 1))[:MIB]
    return texts


def bench_adversarial(rounds: int) -> None:
    print(f"\n{'1 MiB text':<24} {'wall ms':>8} {'cpu ms':>8} {'count ms':>9} {'cpu/count':>10}")
    for name, text in adversarial().items():
        wall, cpu, ref = [], [], []
        for _ in range(rounds):
            w, c = time.perf_counter(), time.thread_time()
            _redact.redact_text(text)
            wall.append(time.perf_counter() - w)
            cpu.append(time.thread_time() - c)
            c = time.thread_time()
            text.count("\x00")
            ref.append(time.thread_time() - c)
        print(f"{name:<24} {min(wall) * 1e3:>8.1f} {min(cpu) * 1e3:>8.1f} "
              f"{min(ref) * 1e3:>9.2f} {min(cpu) / max(min(ref), 1e-6):>10.0f}")


def disguised() -> dict[str, dict[str, str]]:
    """1 MiB texts for the second search: typical ones, the adversarial ones (ASCII: they skip
    it), and encoded ones made to cost the most."""
    import html
    import json
    import urllib.parse

    def fill(unit: str) -> str:
        return (unit * (MIB // len(unit) + 1))[:MIB]

    text = prose(MIB)
    key = "sk-proj-Tq3RkX8vN2mW7yL4pZ6cB1dF"
    secrets = [key[:8] + "\u200b" + key[8:],
               "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in key),
               "".join(f"%{b:02X}" for b in key.encode()),
               "".join(f"&#{ord(c)};" for c in key),
               "".join(f"\\u{ord(c):04x}" for c in key)]
    planted = text
    step = MIB // (len(secrets) + 1)
    for i, secret in enumerate(secrets, 1):
        planted = planted[:i * step] + f" {secret} " + planted[i * step + len(secret) + 2:]
    typical = {
        "prose (ASCII)": text,
        "web text (URLs, &, %)": fill("See https://shop.example.com/search?q=red%20shoes&size=42"
                                      "&page=2 for 25 % off & free delivery. "),
        "HTML with entities": fill("<p>Tom &amp; Jerry &lt;3 caf&eacute; &#169; 2024</p>\n"),
        "JSON lines (escapes)": fill(json.dumps({"q": "a \"quoted\" line\nand caf\u00e9",
                                                 "path": "C:\\Users\\x"}) + "\n"),
        "French prose": fill("Le caf\u00e9 na\u00eff de la m\u00e8re No\u00ebl, o\u00f9 "
                             "l'\u00e9t\u00e9 dure. "),
        "Japanese prose": fill("\u6f22\u5b57\u3068\u304b\u306a\u4ea4\u3058\u308a\u6587"
                               "\u3002\u4eca\u65e5\u306f\u6674\u308c\u3002"),
        "Russian prose": fill("\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! "
                              "\u042d\u0442\u043e \u0442\u0435\u043a\u0441\u0442. "),
    }
    encoded = {
        "prose, 5 disguised keys": planted,
        "percent-encoded prose": urllib.parse.quote(text)[:MIB],
        "every char %XX": fill("%41"),
        "%XX and a letter": fill("%41a"),
        "every char &#NN;": fill("&#115;"),
        "&#NN; and a letter": fill("&#115;a"),
        "HTML-escaped prose": html.escape(text.replace(" ", " & "))[:MIB],
        "\\uXXXX and a letter": fill("\\u0041a"),
        "zero-width every 2nd": fill("a\u200b"),
        "fullwidth": fill("\uff41"),
        "ligature every 2nd": fill("\ufb01a"),
        "percent twice": fill("%2541"),
        "look-alike every 2nd": fill("a\u0430"),
        "zero-width keys, dense": fill(" " + secrets[0]),
        "entity keys, dense": fill(" " + secrets[3]),
        "U+FDFA (NFKC: 18 chars)": fill("\ufdfa"),
    }
    return {"typical": typical, "adversarial": adversarial(), "encoded": encoded}


def bench_disguised(rounds: int) -> None:
    print(f"\n{'1 MiB text':<28} {'cpu ms':>8} {'plain ms':>9} {'ratio':>6} {'count ms':>9}")
    for group, texts in disguised().items():
        print(f"-- {group}")
        for name, text in texts.items():
            on, off, ref = [], [], []
            for _ in range(rounds):
                for undisguise, out in ((True, on), (False, off)):
                    _redact.undisguise = undisguise
                    c = time.thread_time()
                    _redact.redact_text(text)
                    out.append(time.thread_time() - c)
                c = time.thread_time()
                text.count("\x00")
                ref.append(time.thread_time() - c)
            _redact.undisguise = True
            print(f"{name:<28} {min(on) * 1e3:>8.1f} {min(off) * 1e3:>9.1f} "
                  f"{min(on) / max(min(off), 1e-6):>6.1f} {min(ref) * 1e3:>9.2f}")


def bench_scrub(calls: int, rounds: int, answer: str, big: str) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tracescore._export.scrub import Scrubber

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracescore.configure(service_name="bench-redaction", tracer_provider=provider,
                         exporter=False)

    @tracescore.agent(name="support")
    def typical(question: str, user_id: str) -> str:
        return answer

    @tracescore.agent(name="long")
    def long_answer(question: str) -> str:
        return big

    typical("What is the refund policy for orders over 30 days?", "u-1234")
    long_answer("What is the refund policy?")
    tracescore.shutdown(5000)
    spans = {"scrub typical span": memory.get_finished_spans()[0],
             "scrub 16 KB span": memory.get_finished_spans()[1]}
    scrubber = Scrubber()
    print(f"\n{'export-path redaction':<22} {'wall µs':>10} {'cpu µs':>10}")
    for name, span in spans.items():
        n = calls if "typical" in name else max(calls // 10, 50)
        wall = cpu = float("inf")
        for _ in range(rounds):
            w, c = time.perf_counter(), time.thread_time()
            for _ in range(n):
                scrubber.span(span)
            wall = min(wall, (time.perf_counter() - w) / n)
            cpu = min(cpu, (time.thread_time() - c) / n)
        print(f"{name:<22} {wall * 1e6:>10.1f} {cpu * 1e6:>10.1f}")


def timed(fn: Callable[[], Any], calls: int) -> float:
    """Seconds per call of ``fn``, over ``calls`` calls."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=5000, help="calls per variant per round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--adv-rounds", type=int, default=5,
                        help="rounds of each 1 MiB adversarial text")
    parser.add_argument("--only-disguised", action="store_true",
                        help="run only the disguised-credential table")
    args = parser.parse_args()
    if args.only_disguised:
        print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
        bench_disguised(args.adv_rounds)
        return

    tracescore.configure(service_name="bench-redaction", exporter=NoopExporter())
    answer = (
        "Orders can be refunded within 30 days of delivery. After that, we offer store "
        "credit for unused items. Refunds go back to the original payment method and "
        "take 5 to 7 business days. Contact support with your order number if anything "
        "looks wrong."
    )
    big = prose(16_384)
    big_secrets = with_secrets(big)

    @tracescore.agent(name="support")
    def typical(question: str, user_id: str) -> str:
        return answer

    @tracescore.agent(name="long")
    def long_answer(question: str) -> str:
        return big

    @tracescore.agent(name="long-secrets")
    def long_secrets(question: str) -> str:
        return big_secrets

    question = "What is the refund policy for orders over 30 days?"
    variants: dict[str, tuple[Callable[[], Any], int]] = {
        "typical agent": (lambda: typical(question, "u-1234"), args.calls),
        "16 KB content": (lambda: long_answer(question), max(args.calls // 10, 50)),
        "16 KB, 5 secrets": (lambda: long_secrets(question), max(args.calls // 10, 50)),
        "redact_text 16 KB": (lambda: _redact.redact_text(big), max(args.calls // 10, 50)),
    }
    assert "Hunter2pw" not in _redact.redact_text(big_secrets)
    results: dict[tuple[str, bool], list[float]] = {}
    for fn, calls in variants.values():  # warm-up: caches, the compiled regex
        for enabled in (True, False):
            _redact.enabled = enabled
            timed(fn, max(calls // 10, 10))
    for _ in range(args.rounds):
        for name, (fn, calls) in variants.items():
            for enabled in (True, False):
                _redact.enabled = enabled
                results.setdefault((name, enabled), []).append(timed(fn, calls))
    _redact.enabled = True
    tracescore.shutdown(5000)

    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"load: {load}")
    print(f"{'variant':<20} {'redacted µs':>12} {'unredacted µs':>14} {'cost µs':>9} {'ratio':>7}")
    for name in variants:
        on = statistics.median(results[(name, True)]) * 1e6
        off = statistics.median(results[(name, False)]) * 1e6
        print(f"{name:<20} {on:>12.1f} {off:>14.1f} {on - off:>9.1f} {on / off:>7.2f}")
    bench_scrub(args.calls, args.rounds, answer, big)
    bench_adversarial(args.adv_rounds)
    bench_disguised(args.adv_rounds)
    print(f"redaction overflows (texts cut from a point on): {_redact.PROCESS.overflows}")


if __name__ == "__main__":
    main()
