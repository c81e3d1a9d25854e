"""Steps per second of our Tetris (common.tetris.Tetris) against PufferLib Ocean's C Tetris: random actions, N envs
stepped as one batch in this process, pinned to one core; runs alternate between the two, and each side's median
is taken.

    bash benchmarks/build_ocean_tetris.sh                           # builds Ocean's Tetris into /tmp/ocean (gcc)
    python benchmarks/bench_tetris_env.py --ocean /tmp/ocean        # N = 4,096, 5 alternating runs of 3 s: ~1 min
    python benchmarks/bench_tetris_env.py --num-envs 1024 4096 --runs 3 --quick
    python benchmarks/bench_tetris_env.py --fancy-indexing         # ours against ours with x[rows] for np.take

build_ocean_tetris.sh compiles Ocean's C Tetris (pufferlib/ocean/tetris/) from PufferLib 3.0.0's sdist (its full build,
setup.py, downloads raylib and box2d);
without --ocean, only ours is timed.
"""

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script, package not installed
import results as results_module  # noqa: E402
from common.tetris import Tetris  # noqa: E402


class FancyIndexingNumpy:
    """numpy, except that np.take(x, rows, axis=0) is x[rows]: the plain form of the row gathers in common/tetris.py."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def take(a, indices, axis=None):
        return a[indices] if axis == 0 else np.take(a, indices, axis=axis)


def plain_gathers_tetris():
    """common/tetris.py's Tetris, loaded a second time with its np.take row gathers as fancy indexing."""
    spec = importlib.util.spec_from_file_location(
        "tetris_fancy", Path(__file__).resolve().parents[1] / "common/tetris.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.np = FancyIndexingNumpy()
    return module.Tetris


def steps_per_second(make_env, num_envs: int, seconds: float, seed: int = 0) -> float:
    env = make_env(num_envs)
    env.reset(seed=seed)
    # Pre-drawn, so that drawing actions is not timed; 256 rows are enough to avoid any pattern.
    actions = np.random.default_rng(seed).integers(0, 7, (256, num_envs), dtype=np.int32)
    for i in range(20):  # warm-up
        env.step(actions[i])
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for i in range(50):
            env.step(actions[(steps + i) % 256])
        steps += 50
    sps = steps * num_envs / (time.perf_counter() - start)
    env.close()
    return sps


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ocean", help="the folder build_ocean_tetris.sh built (holds anchor_ocean/)")
    parser.add_argument("--num-envs", type=int, nargs="+", default=[4096])
    parser.add_argument("--runs", type=int, default=5, help="alternating runs of each env; the median is shown")
    parser.add_argument("--quick", action="store_true", help="time 0.5 s per run instead of 3 s")
    parser.add_argument("--core", type=int, default=0, help="the core to run on")
    parser.add_argument("--fancy-indexing", action="store_true", help="also time ours with x[rows] for np.take")
    opts = parser.parse_args()
    os.sched_setaffinity(0, {opts.core})
    envs = {"ours (common/tetris.py)": lambda n: Tetris(num_envs=n, seed=0)}
    if opts.fancy_indexing:
        fancy = plain_gathers_tetris()
        envs["ours, rows gathered by x[rows]"] = lambda n: fancy(num_envs=n, seed=0)
    if opts.ocean:
        sys.path.insert(0, opts.ocean)
        from anchor_ocean.tetris.tetris import Tetris as Ocean

        envs["Ocean's C Tetris (PufferLib 3.0.0)"] = lambda n: Ocean(num_envs=n, seed=0)
    start, rows, runs = time.time(), [], []
    for num_envs in opts.num_envs:
        measured = {name: [] for name in envs}
        for _ in range(opts.runs):
            for name, make_env in envs.items():
                measured[name].append(steps_per_second(make_env, num_envs, 0.5 if opts.quick else 3.0))
        medians = {name: float(np.median(values)) for name, values in measured.items()}
        runs.append(dict(num_envs=num_envs, **{name: values for name, values in measured.items()}))
        row = [f"{num_envs:,}"] + [f"{medians[name] / 1e6:.2f}M" for name in envs]
        ours = medians["ours (common/tetris.py)"]
        if opts.fancy_indexing:
            row.append(f"{ours / medians['ours, rows gathered by x[rows]']:.2f}x")
        if opts.ocean:
            row.append(f"**{ours / medians[list(envs)[-1]]:.2f}x**")
        rows.append(row)
    columns = ["N envs", *(f"{name}, steps/s" for name in envs)]
    columns += (["np.take / x[rows]"] if opts.fancy_indexing else []) + (["ours / Ocean"] if opts.ocean else [])
    print(results_module.markdown(columns, rows))
    if opts.ocean and opts.num_envs == [4096] and opts.runs == 5 and not opts.quick and not opts.fancy_indexing:
        notes = [
            f"One process pinned to one core, random actions; the median of {opts.runs} alternating runs of 3 s each."
        ]
        table = dict(columns=columns, rows=rows, notes=notes)
        results_module.save("tetris-env", (time.time() - start) / 60, table=table, runs=runs)


if __name__ == "__main__":
    main()
