"""The speed of ppo_puffer_async.py --lstm against sb3-contrib's RecurrentPPO (RL Zoo's tuned CartPoleNoVel-v1
settings, its hyperparams/ppo_lstm.yml at commit 22e3ff2) on CartPole with the velocities hidden, side by side.
(Their learning, with the memoryless control: the suite `python benchmarks/launch.py cartpole-novel`.)

    pip install -e ".[bench]"          # stable-baselines3, sb3-contrib
    python benchmarks/bench_lstm_cartpole_novel.py            # the docs' table: ~5 min
    python benchmarks/bench_lstm_cartpole_novel.py --sps-timesteps 10000

Ours --lstm at its cartpole-novel preset and sb3-contrib (benchmarks/anchors/sb3.py) train side by side, seed 1,
--sps-timesteps steps each, one on each of --cores, one torch thread each, both evaluating every 10k steps (evaluation
time left out of their training SPS), then again with the cores swapped (two cores need not run alike): each one's
SPS is the geometric mean of its two runs. The default configuration writes
benchmarks/results/cartpole-novel-speed.json, from which `python benchmarks/report.py` renders
docs/ppo_puffer_async.md's table.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch  # noqa: E402
import results as results_module  # noqa: E402

SPS_STEPS = 50_000  # each side of the SPS pair
# an evaluation every 10k steps on both sides (ours: 8 envs x 25 steps an update), 10 episodes
OURS = (
    "{python} {root}/ppo_puffer_async.py --env-id cartpole-novel --lstm --seed 1 --total-timesteps {steps} "
    "--eval-freq 50 --eval-episodes 10 --checkpoint-freq 0"
)
SB3_CONTRIB = (
    "{python} {root}/benchmarks/anchors/sb3.py --algo recurrentppo --env-id cartpole-novel --seed 1 "
    "--total-timesteps {steps} --eval-every 10000"
)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sps-timesteps", type=int, default=SPS_STEPS, help="steps of each side of the SPS pair")
    parser.add_argument(
        "--cores", type=int, nargs="+", default=[0, 1], help="the SPS pair: sb3-contrib on the first, then swapped"
    )
    opts = parser.parse_args()
    start = time.time()
    words = dict(python=sys.executable, root=launch.ROOT, steps=opts.sps_timesteps)
    commands = [SB3_CONTRIB.format(**words), OURS.format(**words)]
    speeds, each_way = launch.side_by_side(commands, opts.cores)
    pair = {"lstm": speeds[1], "sb3-contrib": speeds[0]}
    ratio = pair["lstm"] / pair["sb3-contrib"]
    version = __import__("sb3_contrib").__version__
    columns = ["learner", "training SPS, side by side", "ratio"]
    rows = [
        ["`ppo_puffer_async.py --lstm`, its cartpole-novel preset", f"{pair['lstm']:,.0f}", f"**{ratio:.2f}x**"],
        [f"sb3-contrib {version} RecurrentPPO, RL Zoo's settings", f"{pair['sb3-contrib']:,.0f}", ""],
    ]
    print(results_module.markdown(columns, rows))
    if opts.sps_timesteps == SPS_STEPS:
        notes = [
            f"Seed 1, {opts.sps_timesteps:,} steps each, trained side by side, one core and one torch thread each, "
            "evaluation time left out, twice, the cores swapped (each side's SPS: the geometric mean of its two runs); "
            "the ratio is ours over sb3-contrib's."
        ]
        runs = [
            dict(learner="lstm", sps=pair["lstm"], each_way=[way[1] for way in each_way]),
            dict(learner="sb3-contrib", sps=pair["sb3-contrib"], each_way=[way[0] for way in each_way]),
        ]
        results_module.save(
            "cartpole-novel-speed",
            (time.time() - start) / 60,
            table=dict(columns=columns, rows=rows, notes=notes),
            runs=runs,
        )


if __name__ == "__main__":
    main()
