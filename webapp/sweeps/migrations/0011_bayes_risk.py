"""Stored ``bayes`` policy configs of the earlier model (``p_stop``, ``criterion``, ``drift``) become the calibrated
one's: ``p_stop`` -> ``risk`` (clamped into (0, 0.5], the range risk accepts), ``criterion`` and ``drift`` dropped.
Every sweep page then renders and every check builds its policy (docs/architecture.md, "Early stopping")."""
from django.db import migrations

OLD_KEYS = ("p_stop", "criterion", "drift")


def converted(policy: dict) -> dict:
    """The config with ``risk`` for ``p_stop`` (min(max(p_stop, 1e-6), 0.5); a risk already there wins) and without
    ``criterion`` or ``drift``; a config without any of them is returned as it is."""
    if not isinstance(policy, dict) or policy.get("name") != "bayes" or not any(k in policy for k in OLD_KEYS):
        return policy
    new = {k: v for k, v in policy.items() if k not in OLD_KEYS}
    if "p_stop" in policy and "risk" not in policy:
        try:
            new["risk"] = min(max(float(policy["p_stop"]), 1e-6), 0.5)
        except (TypeError, ValueError):
            pass  # a p_stop that was never a number: the default risk
    return new


def forwards(apps, schema_editor):
    Sweep = apps.get_model("sweeps", "Sweep")
    for sweep in Sweep.objects.filter(policy__name="bayes").iterator():
        new = converted(sweep.policy)
        if new is not sweep.policy:
            sweep.policy = new
            sweep.save(update_fields=["policy"])


class Migration(migrations.Migration):
    dependencies = [("sweeps", "0010_sweepplan_budget")]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
