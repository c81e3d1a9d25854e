"""The mean return of uniformly random actions: the "random" score a suite normalizes by (benchmarks/suites/).

    python benchmarks/anchors/random_play.py Hopper-v5 Walker2d-v5 --episodes 20

Episode i is seeded i, the action space seeded 0.
"""

import argparse
import os
import sys

import gymnasium as gym
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from common.puffer_envs import MEMORY_ENVS  # noqa: E402  (cartpole-novel, repeat-previous-easy: our memory tasks)


def make_env(env_id: str) -> gym.Env:
    """A Gymnasium id, POPGym's popgym-... ids, or one of our memory tasks."""
    if env_id in MEMORY_ENVS:
        return MEMORY_ENVS[env_id]()
    if env_id.startswith("popgym-"):
        import popgym  # noqa: F401  (registers its ids)
    return gym.make(env_id)


def random_return(env_id: str, episodes: int) -> float:
    env = make_env(env_id)
    env.action_space.seed(0)
    returns = []
    for episode in range(episodes):
        env.reset(seed=episode)
        total = 0.0
        done = False
        while not done:
            _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return float(np.mean(returns))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("env_ids", nargs="+")
    parser.add_argument("--episodes", type=int, default=20)
    opts = parser.parse_args()
    for env_id in opts.env_ids:
        print(f"{env_id}: {random_return(env_id, opts.episodes):.1f}")


if __name__ == "__main__":
    main()
