"""Learning happened: the DAPO preset on the tiny arithmetic task raises the reward (a real CPU run)."""
import time

from training.loop import train

from .conftest import ListSink, small_config


def test_dapo_raises_reward_on_the_tiny_task(tmp_path, tiny_model_dir):
    cfg = small_config(preset="dapo", total_steps=50, prompts_per_step=16, group_size=8, max_new_tokens=6,
                       lr=1e-4, warmup_steps=5, seed=0, samples_per_step=0)
    sink = ListSink()
    t0 = time.time()
    result = train(cfg, str(tmp_path), sink)
    assert result.status == "succeeded"
    rewards = [m["reward/mean"] for _, m in sink.metrics]
    first, last = sum(rewards[:5]) / 5, sum(rewards[-5:]) / 5
    print(f"reward first 5 steps {first:.3f}, last 5 steps {last:.3f}, {time.time() - t0:.0f} s")
    assert last > first + 0.05, rewards
