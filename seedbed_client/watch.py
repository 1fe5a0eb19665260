"""``runs watch ID``: poll a run until it has ended, with a one-line progress bar on stderr.

Each poll reads GET /runs/{id} and the reward/mean points after the last one seen (GET /runs/{id}/metrics
with since_step), then redraws the line with ``\\r``: ``[######------] 3/6 running  reward/mean 0.512``.
When the run has ended the final status line goes to stdout (and the run's error, if any, to stderr);
the exit code is 0 for a run that succeeded, 1 otherwise. Ctrl-C stops watching, not the run (exit 130).
"""
from __future__ import annotations

import sys
import time

from .client import SeedbedClient
from .text import printable

ENDED = frozenset({"succeeded", "failed", "killed", "lost"})
REWARD_KEY = "reward/mean"
BAR_WIDTH = 24
RECENT_STEPS = 1000  # the metrics window read per poll: small, so a long run's first poll stays cheap
MAX_POINTS = 10_000  # more than RECENT_STEPS: the window comes back point by point, never bucketed


def progress_bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    """``[######------]`` for ``done`` of ``total`` steps (an unknown total draws an empty bar)."""
    filled = min(width, width * done // total) if total > 0 else 0
    return "[" + "#" * filled + "-" * (width - filled) + "]"


def format_reward(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def progress_line(run: dict, reward: float | None) -> str:
    done, total = run.get("last_step") or 0, run.get("total_steps") or 0
    line = f"{progress_bar(done, total)} {done}/{total} {run['status']}"
    if run.get("kill_requested") and run["status"] not in ENDED:
        line += " (kill requested)"
    if run.get("stalled"):  # no step for far longer than its steps take (the server's stall rule)
        line += f" (stalled: no step for {run.get('stalled_for_s') or 0:.0f} s)"
    return f"{line}  {REWARD_KEY} {format_reward(reward)}"


def final_line(run: dict, reward: float | None) -> str:
    line = (f"run {run['id']} {run['status']} at step {run.get('last_step') or 0}/{run.get('total_steps') or 0}"
            f"  {REWARD_KEY} {format_reward(reward)}")
    if run["status"] == "killed" and run.get("killed_by"):
        line += f"  (killed by {run['killed_by']}: {run.get('kill_reason') or 'no reason given'})"
    return line


class RewardTracker:
    """The latest reward/mean of one run, read incrementally: only points after the last step seen."""

    def __init__(self, client: SeedbedClient, run_id: int):
        self.client, self.run_id = client, run_id
        self.seen_step, self.latest = 0, None

    def update(self, last_step: int) -> float | None:
        since = max(self.seen_step, last_step - RECENT_STEPS)
        answer = self.client.get(f"/runs/{self.run_id}/metrics", keys=REWARD_KEY, since_step=since,
                                 max_points=MAX_POINTS)
        series = answer.get("series", {}).get(REWARD_KEY)
        if series and series["step"]:
            self.seen_step, self.latest = series["step"][-1], series["value"][-1]
        return self.latest


class ProgressLine:
    """One line on stderr, redrawn in place with ``\\r`` (only when its text changes)."""

    def __init__(self, stream=sys.stderr):
        self.stream, self.text = stream, None

    def draw(self, text: str) -> None:
        if text != self.text:
            padding = " " * max(0, len(self.text or "") - len(text))  # erase what a longer line left
            self.stream.write(f"\r{printable(text)}{padding}")
            self.stream.flush()
            self.text = text

    def close(self) -> None:
        if self.text is not None:
            self.stream.write("\n")
            self.stream.flush()
            self.text = None


def report_end(run: dict, reward: float | None) -> int:
    print(printable(final_line(run, reward)))  # a kill reason is whoever typed it's words: escaped
    if run.get("error"):  # a traceback keeps its lines; each line's control characters are escaped
        lines = str(run["error"]).splitlines() or [""]
        print(printable(f"error: run {run['id']} {run['status']}: {lines[0]}"), file=sys.stderr)
        for more in lines[1:]:
            print(printable(more), file=sys.stderr)
    return 0 if run["status"] == "succeeded" else 1


def watch_run(client: SeedbedClient, run_id: int, interval: float) -> int:
    """Poll until the run has ended; the exit code (0 succeeded, 1 any other end, 130 on Ctrl-C)."""
    rewards, line = RewardTracker(client, run_id), ProgressLine()
    try:
        while True:
            run = client.get(f"/runs/{run_id}")
            reward = rewards.update(run.get("last_step") or 0)
            line.draw(progress_line(run, reward))
            if run["status"] in ENDED:
                line.close()
                return report_end(run, reward)
            time.sleep(interval)
    except KeyboardInterrupt:
        line.close()
        print(f"stopped watching run {run_id}; it goes on (stop it with: runs kill {run_id})", file=sys.stderr)
        return 130
    finally:
        line.close()
