"""Launch the demo seed sweep: 4 seeds on the built-in tiny arithmetic task."""
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from training.fields import FieldErrors
from webapp.sweeps import services
from webapp.sweeps.models import Sweep


class Command(BaseCommand):
    help = "Launch a seed sweep on the tiny arithmetic task (the README's demo)."

    def add_arguments(self, parser):
        parser.add_argument("--seeds", type=int, default=4)
        parser.add_argument("--concurrency", type=int, default=2)
        parser.add_argument("--steps", type=int, default=150)
        parser.add_argument("--preset", default="grpo")
        parser.add_argument("--if-no-sweeps", action="store_true",
                            help="launch only on a database that has no sweep yet (./seedbed up: a fresh install)")

    def handle(self, *args, seeds: int, concurrency: int, steps: int, preset: str, if_no_sweeps: bool,
               **options):
        if if_no_sweeps and Sweep.objects.exists():
            self.stdout.write("demo sweep not launched: this database already has sweeps")
            return
        user = get_user_model().objects.filter(is_superuser=True).order_by("pk").first()
        config = {"preset": preset, "task": "arithmetic", "total_steps": steps, "samples_per_step": 4}
        try:
            sweep = services.sweep_create(config=config, seeds=range(seeds), concurrency=concurrency,
                                          name=f"demo: {preset} x {seeds} seeds, tiny arithmetic", user=user)
        except FieldErrors as exc:
            raise CommandError(f"demo sweep config rejected: {exc}") from exc
        self.stdout.write(f"demo sweep {sweep.pk} launched: runs {list(sweep.runs.values_list('pk', flat=True))}")
