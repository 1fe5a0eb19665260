"""One rank of a multi-rank Seedbed run, as torchrun starts it on each node: ``python -m
training.engines.entry.seedbed <run folder>`` (``training.engines.seedbed.run_distributed`` builds the command and
supervises it): the loop (``training.loop.train``) with this rank's ``training.distributed.World``."""
from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> int:
    """One rank that torchrun started: ``python -m training.engines.entry.seedbed <run folder>``."""
    import torch

    from training.distributed import EventSink, RankStop, collective_timeout, world_from_env
    from training.engines.events import EventWriter
    from training.engines.entry.rank import rank_setup
    from training.loop import train
    from training.sink import NullSink

    out_dir = argv[1]
    cfg = rank_setup(out_dir)
    world = world_from_env(cfg.device, cfg.collective_timeout_s)
    sink = EventSink(EventWriter(os.environ["SEEDBED_EVENTS"])) if world.is_main else NullSink()
    try:
        result = train(cfg, out_dir, sink, RankStop(world, os.environ.get("SEEDBED_STOP_FILE", "")), world=world)
        sink.on_log(f"rank {world.rank}: {result.status} at step {result.step}")
    except RuntimeError as exc:  # a collective past collective_timeout_s: the run fails naming it
        timed_out = collective_timeout(exc, world)
        if timed_out is None:
            raise
        raise timed_out from exc
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
