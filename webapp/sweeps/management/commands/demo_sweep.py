"""Launch the demo seed sweep: 4 seeds on the built-in tiny arithmetic task, two at a time, under the calibrated
early-stopping policy, so that a new user watches it stop a seed (the last two seeds are judged against the first
two and each other) and read why and what it saved."""
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from training.fields import FieldErrors
from webapp.sweeps import services
from webapp.sweeps.models import Sweep

# The demo's policy: ``bayes`` at a risk of 0.2 (replayed on the recorded tiny-arithmetic sweeps, 4 seeds two at a
# time, it stops a seed in every one: tests/sweeps/test_demo_sweep.py).
DEMO_POLICY = {"name": "bayes", "metric": "reward/mean", "mode": "max", "risk": 0.2}


class Command(BaseCommand):
    help = "Launch a seed sweep on the tiny arithmetic task (the README's demo)."

    def add_arguments(self, parser):
        parser.add_argument("--seeds", type=int, default=4)
        parser.add_argument("--concurrency", type=int, default=2)
        parser.add_argument("--steps", type=int, default=150)
        parser.add_argument("--preset", default="grpo")
        parser.add_argument("--no-policy", action="store_true", help="no early stopping (every seed runs to its end)")
        parser.add_argument("--if-no-sweeps", action="store_true",
                            help="launch only on a database that has no sweep yet (./seedbed up: a fresh install)")

    def handle(self, *args, seeds: int, concurrency: int, steps: int, preset: str, if_no_sweeps: bool,
               no_policy: bool = False, **options):
        if if_no_sweeps and Sweep.objects.exists():
            self.stdout.write("demo sweep not launched: this database already has sweeps")
            return
        user = get_user_model().objects.filter(is_superuser=True).order_by("pk").first()
        config = {"preset": preset, "task": "arithmetic", "total_steps": steps, "samples_per_step": 4}
        try:
            policy = None if no_policy else dict(DEMO_POLICY)
            sweep = services.sweep_create(config=config, seeds=range(seeds), concurrency=concurrency, policy=policy,
                                          name=f"demo: {preset} x {seeds} seeds, tiny arithmetic"
                                               + ("" if no_policy else ", early stopping (bayes, risk 0.2)"),
                                          user=user)
        except FieldErrors as exc:
            raise CommandError(f"demo sweep config rejected: {exc}") from exc
        self.stdout.write(f"demo sweep {sweep.pk} launched: runs {list(sweep.runs.values_list('pk', flat=True))}")
