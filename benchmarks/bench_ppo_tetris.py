"""Where ppo_tetris.py's time goes, per vector backend: end-to-end training SPS, env-only SPS (random
actions through the same vecenv, no policy), and the share of training time in env, inference, learning.

    python benchmarks/bench_ppo_tetris.py                   # default sizes, 6 updates per backend
    python benchmarks/bench_ppo_tetris.py --updates 3 --num-envs 256 --num-steps 128

The default run (no flags) also writes benchmarks/results/ppo-tetris-time.json (docs/ppo_tetris.md's table).
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script, package not installed
import results as results_module  # noqa: E402
from common.tetris import make_tetris_vecenv  # noqa: E402
from ppo_tetris import Args, train  # noqa: E402

BACKENDS = (("Serial", 1), ("Multiprocessing", 2))


def env_only_sps(backend: str, num_workers: int, num_envs: int, steps: int) -> float:
    envs = make_tetris_vecenv(backend, num_envs, num_workers, seed=0)
    try:
        envs.reset(seed=0)
        actions = np.random.default_rng(0).integers(0, 7, (64, num_envs), dtype=np.int32)
        for i in range(10):  # warm-up (workers start spinning)
            envs.step(actions[i])
        start = time.perf_counter()
        for i in range(steps):
            envs.step(actions[i % 64])
        return steps * num_envs / (time.perf_counter() - start)
    finally:
        envs.close()
        for worker in getattr(envs, "processes", ()):
            worker.join(timeout=5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = Args()
    parser.add_argument("--updates", type=int, default=6, help="training updates timed per backend")
    parser.add_argument("--num-envs", type=int, default=defaults.num_envs)
    parser.add_argument("--num-steps", type=int, default=defaults.num_steps)
    args = parser.parse_args()
    start = time.time()
    batch_size = args.num_envs * args.num_steps
    print(f"{args.num_envs} envs x {args.num_steps} steps, {args.updates} updates of {batch_size:,} steps per backend")
    rows, runs = [], []
    for backend, num_workers in BACKENDS:
        env_sps = env_only_sps(backend, num_workers, args.num_envs, steps=500)
        with tempfile.TemporaryDirectory() as tmp:
            cwd = os.getcwd()
            os.chdir(tmp)  # runs/ and the checkpoint go to a throwaway directory
            try:
                result = train(
                    Args(
                        backend=backend,
                        num_workers=num_workers,
                        num_envs=args.num_envs,
                        num_steps=args.num_steps,
                        total_timesteps=args.updates * batch_size,
                    )
                )
            finally:
                os.chdir(cwd)
        timers = result["timers"]
        total = sum(timers.values())
        split = ", ".join(f"{key} {value / total:.0%}" for key, value in timers.items())
        workers = f"{num_workers} worker{'s' if num_workers > 1 else ''}"
        print(
            f"{backend:<15} ({workers}): training SPS "
            f"{result['sps']:>8,.0f} | env-only SPS {env_sps:>10,.0f} (inside training {result['env_sps']:,.0f}) "
            f"| time: {split}"
        )
        figures = [f"{result['sps']:,.0f}", f"{env_sps:,.0f}", f"{result['env_sps']:,.0f}"]
        rows.append([f"{backend} ({workers})", *figures, *(f"{value / total:.0%}" for value in timers.values())])
        runs.append(
            dict(
                backend=backend,
                num_workers=num_workers,
                sps=result["sps"],
                env_only_sps=env_sps,
                env_sps_in_training=result["env_sps"],
                time_fracs={k: v / total for k, v in timers.items()},
            )
        )
    if (args.updates, args.num_envs, args.num_steps) == (6, defaults.num_envs, defaults.num_steps):
        columns = ["backend", "training SPS", "env-only SPS", "env SPS inside training"]
        columns += [f"time in {key}" for key in timers]
        notes = [
            f"{args.num_envs} games x {args.num_steps} steps, {args.updates} updates per backend; env-only: "
            "500 steps of random actions through the same vector env, no policy."
        ]
        table = dict(columns=columns, rows=rows, notes=notes)
        results_module.save("ppo-tetris-time", (time.time() - start) / 60, table=table, runs=runs)


if __name__ == "__main__":
    main()
