"""Uniformly random moves in our Tetris as a suite's learner (benchmarks/suites/tetris.toml): what a game scores
with no learning, beside the trainers.

    python benchmarks/anchors/random_tetris.py --episodes 1000 --seed 1 --budget 90000000

Game i is seeded 100,000 x seed + i (the game and the moves). The run writes TensorBoard events in runs/ under the
tags the scripts give their training games: charts/episodic_return and tetris/lines_deleted, the means over the
games. Random play learns nothing: the same values are written at each tenth of --budget, so that its curve spans
the trained runs' steps.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from random_play import write_flat_run  # noqa: E402

from common.tetris import Tetris  # noqa: E402


def random_games(episodes: int, seed: int) -> dict:
    """{stat: every game's value} of uniformly random moves: the return and the lines deleted."""
    stats = {"ep_return": [], "lines_deleted": []}
    for episode in range(episodes):
        env = Tetris(num_envs=1, seed=100_000 * seed + episode, log_interval=1)
        rng = np.random.default_rng(100_000 * seed + episode)
        ended = False
        while not ended:
            action = rng.integers(0, env.single_action_space.n, 1, dtype=np.int32)
            _, _, terminals, truncations, infos = env.step(action)
            ended = terminals[0] or truncations[0]
        for key, values in stats.items():
            values.append(infos[0][key])
    return stats


def write_run(episodes: int, seed: int, budget: int) -> str:
    """Random play as a run's TensorBoard events, in runs/<run name>/."""
    stats = random_games(episodes, seed)
    scalars = {"charts/episodic_return": float(np.mean(stats["ep_return"]))}
    scalars["tetris/lines_deleted"] = float(np.mean(stats["lines_deleted"]))
    run_dir = os.path.join("runs", f"tetris__random_moves__{seed}")
    write_flat_run(run_dir, scalars, budget, agents=1)
    return run_dir


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--budget", type=int, default=1, help="the steps its curve spans")
    opts = parser.parse_args()
    print(f"tetris: {write_run(opts.episodes, opts.seed, opts.budget)}")


if __name__ == "__main__":
    main()
