"""The speed of our a2c_cartpole.py against Stable-Baselines3's A2C on CartPole-v1, at SB3's settings, side by side.
(Their learning is compared by the suite `python benchmarks/launch.py a2c-cartpole-sb3`.)

    pip install -e ".[bench]"            # stable-baselines3 is a benchmark-only extra
    python benchmarks/bench_a2c_vs_sb3.py                    # the docs' table: 5 seeds, ~3 minutes on 2 cores
    python benchmarks/bench_a2c_vs_sb3.py --seeds 1 --sps-timesteps 20000               # quick look

Per seed, ours at SB3's settings (RL Zoo's CartPole-v1 settings: 8 envs, n_steps 5, RMSprop 7e-4 constant, no
observation normalization) and SB3 2.9.2's A2C train side by side, --sps-timesteps steps each, one on each of --cores,
one torch thread each, both evaluating every 10k steps (evaluation time left out of their training SPS); the ratio is
the median over the seeds of ours / SB3's. The default configuration writes benchmarks/results/a2c-sb3-speed.json,
from which `python benchmarks/report.py` renders docs/a2c.md's table.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import a2c_cartpole  # noqa: E402
import results as results_module  # noqa: E402

EVAL_EVERY = 10_000
SEEDS = [1, 2, 3, 4, 5]
# SB3's A2C at RL Zoo's CartPole-v1 settings as our flags spell them (for the SPS pairs)
SB3_SETTINGS = dict(num_envs=8, num_steps=5, learning_rate=7e-4, norm_obs=False, anneal_lr=False)


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


def speed_worker(learner: str, seed: int, steps: int, out: str) -> None:
    """One side of an SPS pair, in its own (pinned) process: writes {"sps"} to `out`."""
    import torch

    torch.set_num_threads(1)
    if learner == "ours":
        _, sps = run_ours(seed, total_timesteps=steps, **SB3_SETTINGS)
    else:
        _, sps = run_sb3(seed, steps)
    Path(out).write_text(json.dumps({"sps": sps}))


def speed_pair(seed: int, steps: int, cores) -> dict:
    """Ours at SB3's settings and SB3 at the same time, SB3 on the first of `cores`, ours on the last (one core given:
    one after the other): {"ours", "sb3"} training SPS."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    def one(learner, core, folder):
        out = Path(folder) / f"{learner}.json"
        command = [
            "taskset",
            "-c",
            str(core),
            sys.executable,
            os.path.abspath(__file__),
            "--speed-worker",
            learner,
            str(seed),
            str(steps),
            str(out),
        ]
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=folder)
        if done.returncode != 0:
            raise SystemExit(f"{learner} seed {seed} (SPS pair) failed:\n{done.stderr[-2000:]}")
        return json.loads(out.read_text())["sps"]

    with tempfile.TemporaryDirectory() as folder, ThreadPoolExecutor(2 if len(set(cores)) > 1 else 1) as pool:
        sb3, ours = pool.submit(one, "sb3", cores[0], folder), pool.submit(one, "ours", cores[-1], folder)
        return {"ours": ours.result(), "sb3": sb3.result()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=SEEDS)
    parser.add_argument("--sps-timesteps", type=int, default=100_000, help="steps of each side of a pair")
    parser.add_argument("--cores", type=int, nargs="+", default=[0, 1], help="SB3 on the first, ours on the last")
    parser.add_argument("--speed-worker", nargs=4, help=argparse.SUPPRESS)  # internal: one side of an SPS pair
    opts = parser.parse_args()
    if opts.speed_worker:
        learner, seed, steps, out = opts.speed_worker
        return speed_worker(learner, int(seed), int(steps), out)
    start = time.time()
    pairs = {}
    for seed in opts.seeds:
        pairs[seed] = speed_pair(seed, opts.sps_timesteps, opts.cores)
        print(f"seed {seed}: ours {pairs[seed]['ours']:,.0f} SPS, SB3 {pairs[seed]['sb3']:,.0f} SPS", flush=True)
    ratio = float(np.median([pair["ours"] / pair["sb3"] for pair in pairs.values()]))
    print(f"SPS ratio at the same settings, side by side (ours / SB3, median over seeds): {ratio:.2f}x")
    version = __import__("stable_baselines3").__version__
    seeds = ", ".join(map(str, opts.seeds))
    columns = ["learner", "settings", "training SPS (median over seeds)", "ours / SB3 (median of the seeds' ratios)"]
    table = [
        [
            "`a2c_cartpole.py`",
            f"SB3's: 8 envs x 5 steps, RMSprop 7e-4 constant, no observation normalization; "
            f"{opts.sps_timesteps // 1000}k steps beside SB3",
            f"{np.median([pair['ours'] for pair in pairs.values()]):,.0f}",
            f"**{ratio:.2f}x**",
        ],
        [
            f"SB3 {version} A2C",
            f"RL Zoo's; {opts.sps_timesteps // 1000}k steps beside ours",
            f"{np.median([pair['sb3'] for pair in pairs.values()]):,.0f}",
            "",
        ],
    ]
    print(results_module.markdown(columns, table))
    if opts.seeds == SEEDS and opts.sps_timesteps == 100_000:
        notes = [
            f"Per seed ({seeds}), ours at SB3's settings and SB3 trained side by side in this run, "
            f"{opts.sps_timesteps:,} steps each, one core and one torch thread each, evaluation time left out."
        ]
        runs = [dict(seed=seed, ours=pair["ours"], sb3=pair["sb3"]) for seed, pair in pairs.items()]
        results_module.save(
            "a2c-sb3-speed", (time.time() - start) / 60, table=dict(columns=columns, rows=table, notes=notes), runs=runs
        )


if __name__ == "__main__":
    main()
