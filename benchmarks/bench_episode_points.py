"""What a point per finished episode costs: each script's training speed with `--episode-points each` (a
charts/episodic_return and charts/episodic_length point per finished episode, as CleanRL's ppo.py writes them) and
with `--episode-points mean` (one mean per log interval), alternating, at the presets users run. A preset writes each
episode unless that costs more than 3% of its speed (docs/design.md, "The scalars"); the table says which is which.

    python benchmarks/bench_episode_points.py              # ~5 min; docs/benchmarks.md's table
    python benchmarks/bench_episode_points.py --rounds 1

Each row is a short run of the preset (the first updates, where episodes are shortest: a fresh Tetris policy's games
last ~45 steps, a trained one's hundreds), in this process, evaluation left out of the rate (train()'s sps).
"""

import argparse
import glob
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import a2c_cartpole  # noqa: E402
import ppo_puffer_async  # noqa: E402
import ppo_tetris  # noqa: E402
import results  # noqa: E402
from common import presets  # noqa: E402

QUIET = dict(eval_freq=0, eval_episodes=1, checkpoint_freq=0)
# (label, script module, its flags at the preset, but the run's length)
ROWS = [
    (
        "a2c_cartpole.py, CartPole-v1",
        a2c_cartpole,
        {**presets.a2c_cartpole("CartPole-v1"), "total_timesteps": 50_000},
    ),
    ("ppo_tetris.py, Tetris", ppo_tetris, {"total_timesteps": 8 * 32_768}),
    ("ppo_puffer_async.py, tetris", ppo_puffer_async, {"total_timesteps": 8 * 32_768}),
    (
        "ppo_puffer_async.py, CartPole-v1",
        ppo_puffer_async,
        {**presets.ppo_puffer_async("CartPole-v1"), "total_timesteps": 50_000},
    ),
    (
        "ppo_puffer_async.py, mpe-spread",
        ppo_puffer_async,
        {**presets.ppo_puffer_async("mpe-spread"), "total_timesteps": 4 * 24_576},
    ),
]


def run(module, flags: dict, episode_points: str):
    """(training SPS, finished episodes per second of training) of one run."""
    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            result = module.train(module.Args(**{**flags, **QUIET, "episode_points": episode_points}))
            (run_dir,) = glob.glob(os.path.join(tmp, "runs", "*"))
            events = EventAccumulator(run_dir, size_guidance={"scalars": 0}).Reload()
            points = len(events.Scalars("charts/episodic_return"))
        finally:
            os.chdir(cwd)
    seconds = result["global_step"] / result["sps"]
    return result["sps"], points / seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    start = time.time()
    sps = {(label, mode): [] for label, *_ in ROWS for mode in ("each", "mean")}
    episodes = {label: [] for label, *_ in ROWS}
    for _ in range(opts.rounds):  # alternating, so drift in the machine's load hits both alike
        for label, module, flags in ROWS:
            for mode in ("each", "mean"):
                rate, per_second = run(module, flags, mode)
                sps[label, mode].append(rate)
                if mode == "each":
                    episodes[label].append(per_second)
    columns = ["run (first updates)", "episodes a second", "SPS, a point each", "SPS, one mean", "cost of a point each"]
    rows = []
    for label, module, flags in ROWS:
        each = float(np.median(sps[label, "each"]))
        mean = float(np.median(sps[label, "mean"]))
        rows.append(
            [label, f"{np.median(episodes[label]):,.0f}", f"{each:,.0f}", f"{mean:,.0f}", f"{1 - each / mean:.1%}"]
        )
    print(f"\n{results.markdown(columns, rows)}")
    if opts.rounds == 3:  # the docs' configuration
        note = (
            "Training SPS (evaluation left out), the median of 3 alternating rounds; the cost is 1 - SPS(each) / "
            "SPS(mean). Where the cost passes three percent, the preset writes one mean per update (--episode-points "
            "mean: common/presets.py)."
        )
        table = dict(columns=columns, rows=rows, notes=[note])
        runs = [dict(zip(columns, row)) for row in rows]
        results.save("episode-points", (time.time() - start) / 60, table=table, runs=runs)


if __name__ == "__main__":
    main()
