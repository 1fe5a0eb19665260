"""A run's final value of a metric: the mean over its last 10 % of steps, not its noisiest single step (the value
bench/early_stopping.py scores policies by). Used by the sweep summary (webapp.sweeps.summary), the compare
page (webapp.runs.compare) and, evaluated in the database, the runs table's final columns and sort
(``final_mean``)."""
from __future__ import annotations

FINAL_DIVISOR = 10  # the final value averages the last 1/10 of a run's steps (rounded up)


def final_window(last_step: int) -> int:
    """How many of a run's last steps its final value averages: ceil(last_step / 10), at least 1. In integers,
    so the database computes the same window (0.1 * 30 is 3.0000000000000004 in floating point: 4 steps).

    >>> final_window(40), final_window(5), final_window(0), final_window(30), final_window(31)
    (4, 1, 1, 3, 4)
    """
    return max(1, -(-last_step // FINAL_DIVISOR))


def final_mean(metric: str):
    """The final value of ``metric`` for each run of a queryset, as a subquery expression: the mean of its finite
    points with last_step - final_window(last_step) < step <= last_step (null when it has none). The window in
    SQL is (last_step + 9) / 10, integer division on SQLite and PostgreSQL alike: ``final_window`` for every
    last_step >= 1. It reads the (run, key, step) index over the window only."""
    from django.db.models import Avg, FloatField, IntegerField, OuterRef, Subquery
    from django.db.models.expressions import ExpressionWrapper

    from .models import MetricPoint

    window = ExpressionWrapper((OuterRef("last_step") + (FINAL_DIVISOR - 1)) / FINAL_DIVISOR,
                               output_field=IntegerField())
    points = (MetricPoint.objects.filter(run_id=OuterRef("pk"), key=metric, value__isnull=False,
                                         step__gt=OuterRef("last_step") - window, step__lte=OuterRef("last_step"))
              .order_by().values("run_id").annotate(mean=Avg("value")).values("mean"))
    return Subquery(points, output_field=FloatField())
