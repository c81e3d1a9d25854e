"""The speed of a2c_cartpole.py with Box actions against Stable-Baselines3's A2C at RL Zoo's settings, side by side.
(Their learning: the suite `python benchmarks/launch.py a2c-continuous`.)

    pip install -e ".[bench]"
    python benchmarks/bench_a2c_continuous.py                     # the docs' table: ~6 min on 2 cores
    python benchmarks/bench_a2c_continuous.py --envs Pendulum-v1 --sps-timesteps 20000

SB3 2.9.2's A2C with RL Zoo's settings (benchmarks/anchors/sb3.py: rl-baselines3-zoo's hyperparams/a2c.yml at commit
22e3ff24): Pendulum-v1 with gSDE (log_std_init -2, no orthogonal init), 8 envs x 8 steps, gamma 0.9, lambda 0.9, vf_coef
0.4, RMSprop, learning rate 7e-4 annealed linearly, VecNormalize (gamma 0.9); HalfCheetah (its HalfCheetah-v4 entry):
VecNormalize on A2C's defaults (1 env, 5 steps, 7e-4). Ours runs its defaults. Per env, ours and SB3 train side by side,
one core each, one torch thread each, --sps-timesteps steps of seed 1, evaluation time left out, then again with the
cores swapped (two cores need not run alike): each one's SPS is the geometric mean of its two runs. The default
configuration writes benchmarks/results/a2c-continuous-speed.json, from which `python benchmarks/report.py` renders
docs/a2c.md's table.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch  # noqa: E402
import results as results_module  # noqa: E402

ENVS = ["Pendulum-v1", "HalfCheetah-v5"]
SPS_STEPS = 100_000  # each side-by-side SPS run
OURS = (
    "{python} {root}/a2c_cartpole.py --env-id {env} --seed 1 --total-timesteps {steps} --eval-freq 0 "
    "--checkpoint-freq 0"
)
# one evaluation, at the end (left out of the training SPS)
SB3 = (
    "{python} {root}/benchmarks/anchors/sb3.py --algo a2c --env-id {env} --seed 1 --total-timesteps {steps} "
    "--eval-every {steps}"
)


def speed_pair(env_id, steps, cores) -> dict:
    """Training SPS side by side: SB3's A2C (RL Zoo's settings) on the first of `cores`, ours (its defaults) on the
    last, at the same time, one torch thread each, `steps` steps of seed 1, evaluation excluded; then the other way
    round, since two cores of one machine need not run alike (one core given: one after the other, both times).
    {"ours", "sb3"}: each one's SPS, the geometric mean of its two runs; {"each_way"}: each way's [SB3, ours]."""
    words = dict(python=sys.executable, root=launch.ROOT, env=env_id, steps=steps)
    commands = [SB3.format(**words), OURS.format(**words)]
    speeds, each_way = launch.side_by_side(commands, cores)
    return {"ours": speeds[1], "sb3": speeds[0], "each_way": each_way}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=ENVS)
    parser.add_argument("--sps-timesteps", type=int, default=SPS_STEPS, help="steps of each side-by-side SPS run")
    parser.add_argument(
        "--cores", type=int, nargs="+", default=[0, 1], help="SB3 on the first, ours on the last, then swapped"
    )
    opts = parser.parse_args()
    start = time.time()
    version = __import__("stable_baselines3").__version__
    columns = [
        "env",
        "`a2c_cartpole.py` (its defaults): training SPS",
        f"SB3 {version} A2C (RL Zoo's) beside it",
        "ratio",
    ]
    rows = []
    runs = []
    for env_id in opts.envs:
        pair = speed_pair(env_id, opts.sps_timesteps, opts.cores)
        ratio = pair["ours"] / pair["sb3"]
        rows.append([env_id, f"{pair['ours']:,.0f}", f"{pair['sb3']:,.0f}", f"**{ratio:.2f}x**"])
        runs.append(dict(env_id=env_id, **pair))
        print(f"| {' | '.join(rows[-1])} |", flush=True)
    print(results_module.markdown(columns, rows))
    if opts.envs == ENVS and opts.sps_timesteps == SPS_STEPS:
        notes = [
            f"Seed 1, {opts.sps_timesteps:,} steps each, ours and SB3 trained side by side, one core and one torch "
            "thread each, evaluation time left out; each pair ran twice, the cores swapped, and each side's SPS is the "
            "geometric mean of its two runs."
        ]
        results_module.save(
            "a2c-continuous-speed",
            (time.time() - start) / 60,
            table=dict(columns=columns, rows=rows, notes=notes),
            runs=runs,
        )


if __name__ == "__main__":
    main()
