"""The processes a run's ranks are (docs/architecture.md#engines-and-distribution): what torchrun starts on each
node, ``python -m training.engines.entry.seedbed <run folder>`` (Seedbed's own loop) or ``... entry.trl`` (TRL's
GRPOTrainer), and their shared start (``rank``). A subpackage, so the engine registry's walk
(``training.extensions``) never imports them: they load the run's config and the loop, which the web process and
the config check do not need.
"""
