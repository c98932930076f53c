"""What both generated pages share of Markdown: citations of docs pages made links from docs/reference/."""

from __future__ import annotations

import re

DOCS_CITATION = re.compile(r"(?<![\w/.-])docs/([\w./-]+?\.md)(#[\w-]+)?")


def link_docs(text: str) -> str:
    """A text's citations of docs pages (docs/method.md#what-is-measured) as links from docs/reference/."""
    return DOCS_CITATION.sub(lambda m: f"[{m.group(0)}](../{m.group(1)}{m.group(2) or ''})", text)
