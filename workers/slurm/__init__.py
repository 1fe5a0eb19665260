"""Slurm as an executor (docs/architecture.md, "Slurm queues"): a run on a queue of kind ``slurm`` is one batch job
that Slurm allocates and starts; Seedbed submits it, reads its state and cancels it, and never keeps a Celery slot
for it.

- ``commands``: the Slurm client commands Seedbed calls (``sbatch``, ``squeue``, ``scontrol``, ``scancel``), each
  with its arguments built from a registered queue and its answer parsed; nothing here touches the database;
- ``job``: what the batch job runs on its node (``python -m workers.slurm.job RUN_ID``): the claim, the training
  child and how it ended, as a worker's slot does;
- ``cluster``: a whole Slurm cluster on this machine (``./seedbed slurm start``: munge, one controller, two nodes)
  for the tests and for trying Slurm queues without a cluster.
"""
