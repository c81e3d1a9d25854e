"""What a point per finished episode costs: charts/episodic_return and charts/episodic_length written for each
finished episode (`--episode-points each`, as CleanRL's ppo.py writes them; agents of several kinds add
charts/episodic_return/<kind>) rather than one mean per log interval (`--episode-points mean`). A preset writes each
episode unless that costs its runs more than three percent of their speed (docs/design.md, "The scalars").

    python benchmarks/bench_episode_points.py              # ~3 min; docs/benchmarks.md's table
    python benchmarks/bench_episode_points.py --rounds 1

The cost is computed from two measurements, each steadier than the small difference between two runs' speeds (which
varies from run to run by more than the effect on 2 shared cores): the time of one `SummaryWriter.add_scalar` call
(the median of 5 blocks of 20,000 calls), and, for each preset, the points a second of training a short run of it
writes with a point each (its first updates, where episodes are shortest: a fresh Tetris policy's games last ~45
steps, a trained one's hundreds), in this process, evaluation left out (train()'s sps). Cost = points a second x the
time of a point: the share of training time that writing them takes.
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
ROWS = [  # the presets users run, each family's
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
    (
        "ppo_puffer_async.py, mpe2.simple_speaker_listener_v4 (2 kinds)",
        ppo_puffer_async,
        {**presets.ppo_puffer_async("mpe2.simple_speaker_listener_v4"), "total_timesteps": 4 * 16_384},
    ),
]


def point_seconds(calls: int = 20_000) -> float:
    """Seconds per SummaryWriter.add_scalar call: the median of 5 blocks of `calls` calls."""
    from torch.utils.tensorboard import SummaryWriter

    blocks = []
    with tempfile.TemporaryDirectory() as tmp:
        writer = SummaryWriter(tmp)
        for block in range(5):
            start = time.perf_counter()
            for i in range(calls):
                writer.add_scalar("charts/episodic_return", float(i), block * calls + i)
            blocks.append((time.perf_counter() - start) / calls)
        writer.close()
    return float(np.median(blocks))


def points_per_second(module, flags: dict):
    """(episodes, points) a second of training of a short run of the preset writing a point per episode."""
    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            result = module.train(module.Args(**{**flags, **QUIET, "episode_points": "each"}))
            (run_dir,) = glob.glob(os.path.join(tmp, "runs", "*"))
            events = EventAccumulator(run_dir, size_guidance={"scalars": 0}).Reload()
            tags = [tag for tag in events.Tags()["scalars"] if tag.startswith("charts/episodic_")]
            episodes = len(events.Scalars("charts/episodic_return"))
            points = sum(len(events.Scalars(tag)) for tag in tags)
        finally:
            os.chdir(cwd)
    seconds = result["global_step"] / result["sps"]
    return episodes / seconds, points / seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    start = time.time()
    point = point_seconds()
    columns = ["preset (first updates)", "episodes a second", "points a second", "cost of a point each"]
    columns.append("preset writes")
    rows = []
    for label, module, flags in ROWS:
        rates = [points_per_second(module, flags) for _ in range(opts.rounds)]
        episodes = float(np.median([rate[0] for rate in rates]))
        points = float(np.median([rate[1] for rate in rates]))
        preset = module.Args(**flags).episode_points
        rows.append([label, f"{episodes:,.0f}", f"{points:,.0f}", f"{points * point:.1%}", preset])
    print(f"\nadd_scalar: {point * 1e6:.1f} us a call\n{results.markdown(columns, rows)}")
    if opts.rounds == 3:  # the docs' configuration
        note = (
            f"One `add_scalar` call took {point * 1e6:.1f} us (the median of 5 blocks of 20,000). Points a second: the "
            "median of 3 short runs of each preset with a point per episode, training time only. Where the cost "
            "passes three percent, the preset writes one mean per update (--episode-points mean: common/presets.py)."
        )
        table = dict(columns=columns, rows=rows, notes=[note])
        runs = [dict(zip(columns, row)) for row in rows]
        results.save("episode-points", (time.time() - start) / 60, table=table, runs=runs)


if __name__ == "__main__":
    main()
