"""Template hygiene: Django's ``{# … #}`` comment is one line only; one spread over several lines is not a comment
and its text is drawn on the page (the audit section once showed its own comment on every run and sweep page)."""
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_every_short_comment_opens_and_closes_on_one_line():
    unclosed = []
    for path in sorted((REPO / "templates").rglob("*.html")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.count("{#") != line.count("#}"):
                unclosed.append(f"{path.relative_to(REPO)}:{number}")
    assert not unclosed, f"{{# … #}} spread over several lines (use {{% comment %}}): {unclosed}"
