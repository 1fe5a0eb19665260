"""Launch the real-model demo run: SmolLM2-135M-Instruct (imported by set-up) learning reasoning-gym's
basic_arithmetic through its chat template, next to the tiny demo sweep.

Launched once: the demo's own run is the one this command made, told by more than its name (anyone may name a
run so): made by the first superuser, in their personal project, outside a sweep (``demo_run``)."""
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from training.fields import FieldErrors
from training.models import SMOLLM2, default_models_dir, imported_ready
from webapp.projects.services import project_for_launch
from webapp.runs import services
from webapp.runs.models import Run

DEMO_NAME = "demo: SmolLM2-135M-Instruct on reasoning_gym:basic_arithmetic"


def demo_run(user) -> Run | None:
    """The demo run this command launched for ``user`` (the first superuser, or None without one): its name, in
    the project a launch by ``user`` goes to (their personal one; ``default`` without a user), made by them,
    outside a sweep. A run another user names so lies in another project, or was made by another user."""
    project = project_for_launch(user=user, project=None)
    return Run.objects.filter(name=DEMO_NAME, project=project, created_by=user, sweep__isnull=True).order_by(
        "pk").first()


class Command(BaseCommand):
    help = "Launch one GRPO run on the built-in pretrained model (SmolLM2-135M-Instruct), once."

    def add_arguments(self, parser):
        parser.add_argument("--steps", type=int, default=60)

    def handle(self, *args, steps: int, **options):
        import os

        path = os.path.join(default_models_dir(), SMOLLM2)
        if not imported_ready(path):
            raise CommandError(f"SmolLM2-135M-Instruct is not imported yet ({path}): ./seedbed setup imports it")
        user = get_user_model().objects.filter(is_superuser=True).order_by("pk").first()
        existing = demo_run(user)
        if existing is not None:
            self.stdout.write(f"real-model demo run not launched: it exists already (run {existing.pk})")
            return
        # Sums and differences of two one-digit numbers, the answer taken as the last number of the reply: the
        # 135 M model gets about a third right at temperature 0.7 (pass@4 one half), so GRPO has a signal; at
        # the package's default difficulty, or asked for <answer> tags, it gets none.
        config = {"preset": "grpo", "model_path": path, "task": "reasoning_gym:basic_arithmetic",
                  "task_params": {"min_terms": 2, "max_terms": 2, "max_digits": 1, "allow_parentheses": False,
                                  "allow_negation": False, "operators": ["+", "-"]},
                  "rewards": [{"name": "reasoning_gym", "params": {"extract": "last_number"}}],
                  "answer_instruction": "Reply with the number only.", "temperature": 0.7,
                  "total_steps": steps, "prompts_per_step": 4, "group_size": 4, "max_new_tokens": 24,
                  "kl_coef": 0.0, "lr": 2e-6, "samples_per_step": 4, "checkpoint_every": 20,
                  # 1.6 GB a checkpoint (weights and optimizer): the demo keeps its newest only
                  "keep_checkpoints": 1}
        try:
            run = services.run_create(config=config, user=user, name=DEMO_NAME)
        except FieldErrors as exc:
            raise CommandError(f"real-model demo config rejected: {exc}") from exc
        self.stdout.write(f"real-model demo run {run.pk} launched")
