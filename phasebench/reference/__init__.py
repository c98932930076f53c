"""The reference pages generated from the code (docs/reference/): the options (from the plugin's option
definitions, phasebench/reference/options.py) and the saved results (from phasebench/schema.py,
phasebench/reference/saved.py). `python -m phasebench.reference` writes them; `--check` says which differ."""

from __future__ import annotations

from pathlib import Path

from phasebench.repository import ROOT


def _options() -> str:
    from phasebench.reference import options

    return options.page()


def _saved() -> str:
    from phasebench.reference import saved

    return saved.page()


# Each page, relative to the repository, and what writes it.
PAGES = {"docs/reference/options.md": _options, "docs/reference/saved-results.md": _saved}


def stale(pages: dict | None = None, root: Path = ROOT) -> dict[str, str]:
    """{page: its text as generated} for every page whose file differs from it (or is missing)."""
    found = {}
    for name, make in (pages or PAGES).items():
        text = make()
        path = root / name
        if not path.is_file() or path.read_text(encoding="utf8") != text:
            found[name] = text
    return found


def check() -> list[str]:
    """The pages that are out of date."""
    return sorted(stale())


def write() -> list[str]:
    """Write every page that is out of date; the pages written."""
    found = stale()
    for name, text in found.items():
        (ROOT / name).parent.mkdir(parents=True, exist_ok=True)
        (ROOT / name).write_text(text, encoding="utf8")
    return sorted(found)
