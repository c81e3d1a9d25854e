"""Our a2c_cartpole.py against Stable-Baselines3's A2C on CartPole-v1, same seeds, one process.

    pip install -e ".[bench]"            # stable-baselines3 is a benchmark-only extra
    python benchmarks/bench_a2c_vs_sb3.py                 # 5 seeds, ~15 minutes on 2 cores
    python benchmarks/bench_a2c_vs_sb3.py --seeds 1 --sb3-timesteps 100000   # quick look

Both learners get a deterministic (argmax) evaluation of 10 episodes every 10k env steps. Per seed
it prints: steps to the first eval >= 475; "stable solve", the steps after which every later eval
stays >= 475 (none if the last eval fails); the share of evals >= 475 after the first hit; and
training SPS with evaluation time excluded. SB3 runs the RL Zoo CartPole-v1 settings (8 envs,
n_steps 5, RMSprop 7e-4, ent 0.0, 500k steps). Ours runs twice: with its defaults (for learning)
and with SB3's settings (8 envs, n_steps 5, RMSprop 7e-4 constant, no observation normalization,
for a like-for-like SPS ratio).
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import a2c_cartpole  # noqa: E402

THRESHOLD = 475.0
EVAL_EVERY = 10_000


def summarize(history):
    """history: [(step, eval_mean)] -> (first_hit, stable_solve, share_after_first_hit)."""
    steps = np.array([s for s, _ in history])
    means = np.array([m for _, m in history])
    hits = means >= THRESHOLD
    if not hits.any():
        return None, None, 0.0
    first = int(np.argmax(hits))
    share = float(hits[first:].mean())
    if not hits[-1]:
        return int(steps[first]), None, share
    last_fail = np.flatnonzero(~hits)
    stable_index = 0 if len(last_fail) == 0 else last_fail[-1] + 1
    return int(steps[first]), int(steps[stable_index]), share


def run_ours(seed, **overrides):
    defaults = a2c_cartpole.Args()  # CartPole-v1's
    batch = overrides.get("num_envs", defaults.num_envs) * overrides.get("num_steps", defaults.num_steps)
    args = a2c_cartpole.Args(seed=seed, eval_freq=max(EVAL_EVERY // batch, 1), exp_name="bench_a2c", **overrides)
    result = a2c_cartpole.train(args)
    return result["eval_history"], result["sps"]


def run_sb3(seed, timesteps):
    import gymnasium as gym
    from stable_baselines3 import A2C
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    class EvalEvery(BaseCallback):
        def __init__(self):
            super().__init__()
            self.history, self.eval_time, self.next_eval = [], 0.0, EVAL_EVERY

        def _on_step(self):
            if self.num_timesteps >= self.next_eval:
                start = time.perf_counter()
                eval_env = gym.make("CartPole-v1")
                eval_env.reset(seed=seed + 10_000)
                mean, _ = evaluate_policy(self.model, eval_env, n_eval_episodes=10, deterministic=True)
                self.history.append((self.num_timesteps, float(mean)))
                self.next_eval += EVAL_EVERY
                self.eval_time += time.perf_counter() - start
            return True

    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    model = A2C("MlpPolicy", env, n_steps=5, learning_rate=7e-4, ent_coef=0.0, seed=seed, device="cpu", verbose=0)
    callback = EvalEvery()
    start = time.perf_counter()
    model.learn(timesteps, callback=callback)
    train_time = time.perf_counter() - start - callback.eval_time
    return callback.history, timesteps / train_time


def fmt(x):
    return "-" if x is None else f"{x:,}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--sb3-timesteps", type=int, default=500_000)
    parser.add_argument(
        "--sps-timesteps", type=int, default=100_000, help="steps of our A2C at SB3's settings, for the SPS ratio"
    )
    parser.add_argument("--skip-sb3", action="store_true", help="only run ours (for tuning)")
    parser.add_argument(
        "--sps-only",
        action="store_true",
        help="only the SPS comparison: ours and SB3 at SB3's settings, --sps-timesteps each",
    )
    opts = parser.parse_args()

    rows = []
    for seed in opts.seeds:
        if not opts.sps_only:
            history, sps = run_ours(seed)
            rows.append(("ours (defaults)", seed, *summarize(history), sps))
        if not opts.skip_sb3:
            _, sps_same = run_ours(
                seed,
                num_envs=8,
                num_steps=5,
                learning_rate=7e-4,
                norm_obs=False,
                anneal_lr=False,
                total_timesteps=opts.sps_timesteps,
            )
            rows.append(("ours (SB3 settings)", seed, None, None, None, sps_same))
            history, sps = run_sb3(seed, opts.sps_timesteps if opts.sps_only else opts.sb3_timesteps)
            rows.append(("SB3 A2C", seed, *summarize(history), sps))
        print(rows[-3:], flush=True)

    print("\n| learner | seed | first eval >= 475 | stable solve | evals >= 475 after first hit | train SPS |")
    print("|---|---|---|---|---|---|")
    for name, seed, first, stable, share, sps in rows:
        share_txt = "-" if share is None else f"{share:.0%}"
        print(f"| {name} | {seed} | {fmt(first)} | {fmt(stable)} | {share_txt} | {sps:,.0f} |")
    for name in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == name]
        if all(r[4] is None for r in mine):  # a speed-only row: its evals are not scored
            print(f"{name}: median train SPS {np.median([r[5] for r in mine]):,.0f} (speed only)")
            continue
        stables = [r[3] for r in mine]
        solved = [s for s in stables if s is not None]
        median = np.median([s if s is not None else np.inf for s in stables]) if solved else None
        print(
            f"{name}: {len(solved)}/{len(mine)} seeds stably solved, median stable-solve step "
            f"{median if median is None or np.isinf(median) else f'{median:,.0f}'}, "
            f"median train SPS {np.median([r[5] for r in mine]):,.0f}"
        )
    if not opts.skip_sb3:
        ours = np.median([r[5] for r in rows if r[0] == "ours (SB3 settings)"])
        sb3 = np.median([r[5] for r in rows if r[0] == "SB3 A2C"])
        print(f"SPS ratio at the same settings (ours / SB3, medians of this run): {ours / sb3:.2f}x")


if __name__ == "__main__":
    main()
