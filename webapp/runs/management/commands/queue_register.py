"""Register (or update) a queue runs may name: ``manage.py queue_register NAME [--kind slurm] [--slurm-conf PATH]
[--partition P] [--account A] [--qos Q] [--time-limit-min N] [--warn-before-s N] [--nodes N] [--gpus-per-node N] [--cpus-per-task N]
[--mem-per-node-mb N] [--extra-sbatch OPTION ...] [--description TEXT]``; ``--remove`` takes it off. What the admin
does, from a shell (``./seedbed slurm start`` registers its cluster as the queue ``slurm``)."""
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from webapp.runs.models import Queue, QueueKind

FIELDS = ("kind", "description", "slurm_conf", "partition", "account", "qos", "time_limit_min", "warn_before_s",
          "nodes", "gpus_per_node", "cpus_per_task", "mem_per_node_mb", "extra_sbatch")


class Command(BaseCommand):
    help = "Register or update a queue (a Celery one or a Slurm cluster's partition) that runs may name."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--kind", choices=QueueKind.values)
        parser.add_argument("--description")
        parser.add_argument("--slurm-conf", dest="slurm_conf")
        for name in ("partition", "account", "qos"):
            parser.add_argument(f"--{name}")
        for name in ("time_limit_min", "warn_before_s", "nodes", "gpus_per_node", "cpus_per_task", "mem_per_node_mb"):
            parser.add_argument(f"--{name.replace('_', '-')}", dest=name, type=int)
        parser.add_argument("--extra-sbatch", dest="extra_sbatch", nargs="*")
        parser.add_argument("--remove", action="store_true")

    def handle(self, *args, **options):
        if options["remove"]:
            removed, _ = Queue.objects.filter(name=options["name"]).delete()
            self.stdout.write(f"queue {options['name']}: {'removed' if removed else 'not registered'}")
            return
        queue = Queue.objects.filter(name=options["name"]).first() or Queue(name=options["name"])
        for field in FIELDS:
            if options.get(field) is not None:
                setattr(queue, field, options[field])
        try:
            queue.full_clean()
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from None
        queue.save()
        self.stdout.write(f"queue {queue.name}: {queue.get_kind_display()}"
                          + (f", partition {queue.partition}, {queue.nodes} nodes" if queue.kind == QueueKind.SLURM
                             else ""))
