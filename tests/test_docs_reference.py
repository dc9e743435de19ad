"""The API reference (docs/reference/, rendered by mkdocstrings) covers the public API: every name
of ``tracescore.__all__`` has its own entry, and ``tracescore.scorers`` and ``tracescore.testing``
are rendered whole (their ``__all__``), so a new public name cannot be left out of the site."""

from __future__ import annotations

import re
from pathlib import Path

import tracescore
import tracescore.scorers
import tracescore.testing

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "reference"


def _entries() -> set[str]:
    text = "\n".join(p.read_text(encoding="utf-8") for p in REFERENCE.glob("*.md"))
    return set(re.findall(r"^::: ([\w.]+)\s*$", text, re.M))


def test_every_top_level_name_has_an_entry() -> None:
    entries = _entries()
    wanted = {f"tracescore.{name}" for name in tracescore.__all__
              if name not in ("__version__", "scorers")}
    assert sorted(wanted - entries) == []
    assert {"tracescore.scorers", "tracescore.testing"} <= entries


def test_every_entry_is_a_public_name() -> None:
    for entry in _entries():
        module, _, name = entry.rpartition(".")
        if entry in ("tracescore.scorers", "tracescore.testing"):
            continue
        assert module == "tracescore" and name in tracescore.__all__, entry


def test_the_modules_rendered_whole_export_what_they_document() -> None:
    # mkdocstrings renders a module's members from its __all__: each must have a docstring.
    for module in (tracescore.scorers, tracescore.testing):
        for name in module.__all__:
            value = getattr(module, name)
            if callable(value):
                assert (value.__doc__ or "").strip(), f"{module.__name__}.{name}"


def test_the_reference_is_in_the_site_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "mkdocstrings" in nav
    for page in REFERENCE.glob("*.md"):
        assert f"reference/{page.name}" in nav, page.name
