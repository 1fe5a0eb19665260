"""Template filters of the sweep dashboard's fragments."""
from django import template

register = template.Library()


@register.filter
def sig4(value) -> str:
    """A number with 4 significant digits, "–" when there is none (the dashboard's cells)."""
    if value is None or value == "":
        return "–"
    return f"{float(value):.4g}"
