"""The speed of our a2c_cartpole.py against Stable-Baselines3's A2C on CartPole-v1, at SB3's settings, side by side.
(Their learning is compared by the suite `python benchmarks/launch.py a2c-cartpole-sb3`.)

    pip install -e ".[bench]"            # stable-baselines3 is a benchmark-only extra
    python benchmarks/bench_a2c_vs_sb3.py                    # the docs' table: 5 seeds, ~6 minutes on 2 cores
    python benchmarks/bench_a2c_vs_sb3.py --seeds 1 --sps-timesteps 20000               # quick look

Per seed, ours at SB3's settings (RL Zoo's CartPole-v1 settings: 8 envs, n_steps 5, RMSprop 7e-4 constant, no
observation normalization) and SB3 2.9.2's A2C (benchmarks/anchors/sb3.py) train side by side, --sps-timesteps steps
each, one on each of --cores, one torch thread each, both evaluating every 10k steps (evaluation time left out of their
training SPS), then again with the cores swapped (two cores need not run alike); each one's SPS is the geometric mean of
its two runs, and the ratio is the median over the seeds of ours / SB3's. The default configuration writes
benchmarks/results/a2c-sb3-speed.json, from which `python benchmarks/report.py` renders docs/a2c.md's table.
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch  # noqa: E402
import results as results_module  # noqa: E402

SEEDS = [1, 2, 3, 4, 5]
# SB3's A2C at RL Zoo's CartPole-v1 settings as our flags spell them; an evaluation every 10k steps (40 a step)
OURS = (
    "{python} {root}/a2c_cartpole.py --seed {seed} --total-timesteps {steps} --num-envs 8 --num-steps 5 "
    "--learning-rate 7e-4 --no-norm-obs --no-anneal-lr --eval-freq 250 --checkpoint-freq 0"
)
SB3 = (
    "{python} {root}/benchmarks/anchors/sb3.py --algo a2c --env-id CartPole-v1 --seed {seed} --total-timesteps {steps} "
    "--eval-every 10000"
)


def speed_pair(seed: int, steps: int, cores) -> dict:
    """Ours at SB3's settings and SB3 at the same time, twice: SB3 on the first of `cores` and ours on the last, then
    the other way round, since two cores of one machine need not run alike (one core given: one after the other, both
    times). {"ours", "sb3"}: each one's training SPS, the geometric mean of its two runs; {"each_way"}: each way's
    [SB3, ours]."""
    words = dict(python=sys.executable, root=launch.ROOT, seed=seed, steps=steps)
    commands = [SB3.format(**words), OURS.format(**words)]
    speeds, each_way = launch.side_by_side(commands, cores)
    return {"ours": speeds[1], "sb3": speeds[0], "each_way": each_way}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=SEEDS)
    parser.add_argument("--sps-timesteps", type=int, default=100_000, help="steps of each side of a pair")
    parser.add_argument(
        "--cores", type=int, nargs="+", default=[0, 1], help="SB3 on the first, ours on the last, then swapped"
    )
    opts = parser.parse_args()
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
            f"{opts.sps_timesteps:,} steps each, one core and one torch thread each, evaluation time left out; "
            "each pair ran twice, the cores swapped, and each side's SPS is the geometric mean of its two runs."
        ]
        runs = [dict(seed=seed, **pair) for seed, pair in pairs.items()]
        results_module.save(
            "a2c-sb3-speed", (time.time() - start) / 60, table=dict(columns=columns, rows=table, notes=notes), runs=runs
        )


if __name__ == "__main__":
    main()
