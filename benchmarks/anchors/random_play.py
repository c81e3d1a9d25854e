"""The mean return of uniformly random actions: the "random" score a suite normalizes by (benchmarks/suites/), and,
with --seed, random play as a suite's learner on PettingZoo's MPE tasks (benchmarks/suites/mpe.toml).

    python benchmarks/anchors/random_play.py Hopper-v5 Walker2d-v5 --episodes 20
    python benchmarks/anchors/random_play.py mpe2.simple_tag_v3 --episodes 1000 --seed 1 --budget 6000000

Episode i is seeded i, the action space seeded 0. With --seed, every agent of the PettingZoo env plays uniformly at
random, episode i seeded 100,000 x seed + i, and the run writes TensorBoard events in runs/ as ppo_puffer_async.py
names its evaluations: eval/return_mean (the mean over every agent's episode return), and, for an env of several
kinds of agent, eval/return_mean/<kind> and eval/return_vs_random/<kind> (what a team scores when every team plays
at random). Random play learns nothing: the same value is written at each tenth of --budget (agent steps), with the
env steps beside it, so that its curve spans the trained runs' steps.
"""

import argparse
import importlib
import os
import re
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


def random_kinds(env_id: str, episodes: int, seed: int) -> dict:
    """{kind: every agent-episode return of that kind} of uniform-random play on a PettingZoo module's parallel env
    (a kind: the agents' name without its trailing _N)."""
    env = importlib.import_module(env_id).parallel_env()
    rng = np.random.default_rng(seed)
    returns = {}
    for episode in range(episodes):
        env.reset(seed=100_000 * seed + episode)
        totals = dict.fromkeys(env.agents, 0.0)
        while env.agents:
            # the env's own sampler is unseeded: draw from ours
            actions = {agent: int(rng.integers(env.action_space(agent).n)) for agent in env.agents}
            _, rewards, *_ = env.step(actions)
            for agent, reward in rewards.items():
                totals[agent] += reward
        for agent, total in totals.items():
            returns.setdefault(re.sub(r"_\d+$", "", agent), []).append(total)
    env.close()
    return returns


def write_flat_run(run_dir: str, scalars: dict, budget: int, agents: int) -> None:
    """A learner that learns nothing as TensorBoard events in `run_dir`: each of `scalars` ({tag: value}) at each tenth
    of `budget` agent steps, and charts/env_steps beside it (agent steps over the `agents` of an env, as
    ppo_puffer_async.py logs them), so that its curve spans the trained runs' on every axis."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(run_dir)
    for tenth in range(11):
        step = budget * tenth // 10
        for tag, value in scalars.items():
            writer.add_scalar(tag, value, step)
        writer.add_scalar("charts/env_steps", step / agents, step)
    writer.close()


def write_run(env_id: str, episodes: int, seed: int, budget: int) -> str:
    """Random play's evaluation as a run's TensorBoard events, in runs/<run name>/."""
    returns = random_kinds(env_id, episodes, seed)
    scalars = {"eval/return_mean": float(np.mean([r for kind in returns.values() for r in kind]))}
    if len(returns) > 1:
        for kind, values in returns.items():
            scalars[f"eval/return_mean/{kind}"] = float(np.mean(values))
            scalars[f"eval/return_vs_random/{kind}"] = float(np.mean(values))
    run_dir = os.path.join("runs", f"{env_id}__random_play__{seed}")
    agents = len(importlib.import_module(env_id).parallel_env().possible_agents)
    write_flat_run(run_dir, scalars, budget, agents)
    return run_dir


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("env_ids", nargs="+")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--seed", type=int, help="a PettingZoo env as a suite's learner: write its run (see above)")
    parser.add_argument("--budget", type=int, default=1, help="with --seed: the steps its curve spans")
    opts = parser.parse_args()
    for env_id in opts.env_ids:
        if opts.seed is not None:
            print(f"{env_id}: {write_run(env_id, opts.episodes, opts.seed, opts.budget)}")
        else:
            print(f"{env_id}: {random_return(env_id, opts.episodes):.1f}")


if __name__ == "__main__":
    main()
