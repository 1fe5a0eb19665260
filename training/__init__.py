"""Seedbed's training core: GRPO/DAPO for RLVR in plain PyTorch + transformers.

Imports neither Django nor Celery. Entry points: ``training.loop.train`` (library), ``python -m training``
(CLI). Events leave through a ``training.sink.Sink``; the loop polls ``should_stop()`` once per step.
"""
