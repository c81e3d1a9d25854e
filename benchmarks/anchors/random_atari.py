"""The mean whole-game score of uniformly random actions in our Atari env (common/atari.py): the "random" score the
atari suite normalizes by (benchmarks/suites/atari.toml).

    python benchmarks/anchors/random_atari.py atari-breakout atari-pong --games 100

A score is a whole game's (every life, unclipped), as both learners of the suite log charts/episodic_return. Eight
games play at a time, their actions drawn from a generator seeded --seed, the envs reset with it.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from common import atari  # noqa: E402


def random_atari(env_id: str, games: int, seed: int = 1) -> float:
    """The mean whole-game score of uniformly random actions over `games` games of `env_id` (atari-<game>)."""
    vecenv = atari.AtariEnvs(atari.game_name(env_id), 8)
    vecenv.async_reset(seed)
    rng = np.random.default_rng(seed)
    scores = []
    running = np.zeros(8)
    while len(scores) < games:
        _, rewards, _, _, _, agents, _ = vecenv.recv()
        running[agents] += rewards
        # a lost life ends the learner's episode, not the game: a score is the whole game's
        for agent in agents[vecenv.game_over[agents]]:
            scores.append(running[agent])
            running[agent] = 0.0
        vecenv.send(rng.integers(0, vecenv.single_action_space.n, len(agents)))
    vecenv.close()
    return float(np.mean(scores[:games]))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("env_ids", nargs="+", help="atari-<game> ids, as ppo_puffer_async.py takes them")
    parser.add_argument("--games", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    opts = parser.parse_args()
    for env_id in opts.env_ids:
        if not atari.game_name(env_id):
            raise SystemExit(f"error: {env_id}: an Atari game is named atari-<game>, e.g. atari-breakout")
        print(f"{env_id}: {random_atari(env_id, opts.games, opts.seed):.1f}")


if __name__ == "__main__":
    main()
