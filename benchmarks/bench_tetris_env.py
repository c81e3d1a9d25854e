"""Steps per second of common.tetris.Tetris in one process, random actions, vs Ocean's C Tetris.

python benchmarks/bench_tetris_env.py            # N = 1,024 and 4,096, about 3 s each
python benchmarks/bench_tetris_env.py --quick    # under a second each
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script, package not installed
from common.tetris import Tetris  # noqa: E402

OCEAN_STEPS_PER_SECOND = 3.8e6  # Ocean's C env, measured on one core of the same machine kind (docs/tetris.md)


def steps_per_second(num_envs, seconds, seed=0):
    env = Tetris(num_envs=num_envs, seed=seed)
    env.reset(seed=seed)
    # Pre-generated so that drawing actions is not timed; 256 rows are enough to avoid any pattern.
    actions = np.random.default_rng(seed).integers(0, 7, (256, num_envs), dtype=np.int32)
    for i in range(20):  # warm-up
        env.step(actions[i])
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for i in range(50):
            env.step(actions[(steps + i) % 256])
        steps += 50
    return steps * num_envs / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="time 0.5 s per size instead of 3 s")
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1024, 4096])
    args = parser.parse_args()
    seconds = 0.5 if args.quick else 3.0
    for num_envs in args.num_envs:
        sps = steps_per_second(num_envs, seconds)
        print(f"N = {num_envs:>6,}: {sps / 1e6:5.2f}M steps/s  ({sps / OCEAN_STEPS_PER_SECOND:.2f}x Ocean's 3.8M)")


if __name__ == "__main__":
    main()
