"""Recurrent A2C on POPGym's memory tasks: a2c_cartpole.py --lstm at its POPGym defaults (and with --rnn-type gru)
beside the same without --lstm (the memoryless control), ppo_puffer_async.py --lstm at its Gymnasium defaults,
and sb3-contrib's RecurrentPPO with RL Zoo's tuned settings for CartPole without velocities
(bench_lstm_cartpole_novel.py's, from rl-baselines3-zoo's hyperparams/ppo_lstm.yml, CartPoleNoVel-v1, at commit
22e3ff24).

    pip install -e ".[bench]"                                     # stable-baselines3, sb3-contrib, matplotlib
    python benchmarks/bench_a2c_memory.py                         # the docs' table: 3 seeds, 1M steps, ~25 min
    python benchmarks/bench_a2c_memory.py --learners a2c-lstm sb3-contrib --seeds 1 --total-timesteps 200000

Every run: --total-timesteps steps, then a final greedy evaluation of 20 episodes with the recurrent state
carried through each episode (sb3-contrib: VecNormalize's statistics frozen). Runs go one per core, each in its
own folder under --out; a finished run's result is kept there, so rerunning the command only runs what is
missing. sb3-contrib's RecurrentPPO runs at a few hundred steps per second (20 epochs of its LSTM a rollout),
so give it a smaller --total-timesteps than 1M unless you have hours. Its runs do not depend on our code: unless
--learners names sb3-contrib, the table shows SB3_CONTRIB_RECORDED, our recorded run of it, labelled so.

The default configuration (no flag but --cores or --out; --learners may add sb3-contrib) also writes
benchmarks/results/popgym.json, from which `python benchmarks/report.py` renders docs/a2c.md's table and the README's
row; any other run only prints its table.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_classic_control import run_one  # noqa: E402

import results as results_module  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TASKS = ["popgym-RepeatPreviousEasy-v0", "popgym-PositionOnlyCartPoleEasy-v0"]
# learner: (script, flags); an evaluation about every 100k steps (16 x 16 and 8 x 64 steps per update)
LEARNERS = {
    "a2c-lstm": ("a2c_cartpole", [("lstm", "True")], 390),
    "a2c-gru": ("a2c_cartpole", [("lstm", "True"), ("rnn_type", "gru")], 390),
    "a2c-mlp": ("a2c_cartpole", [], 390),
    "ppo-lstm": ("ppo_puffer_async", [("lstm", "True")], 195),
    "sb3-contrib": (None, [], None),
}
EVAL_EPISODES = 20
DEFAULT = ["a2c-lstm", "a2c-gru", "a2c-mlp", "ppo-lstm"]
NAMES = {
    "a2c-lstm": "`a2c_cartpole.py --lstm` (its POPGym defaults)",
    "a2c-gru": "`a2c_cartpole.py --lstm --rnn-type gru` (the same, a GRU)",
    "a2c-mlp": "`a2c_cartpole.py`, the same without `--lstm`",
    "ppo-lstm": "`ppo_puffer_async.py --lstm` (its Gymnasium defaults)",
    "sb3-contrib": "sb3-contrib RecurrentPPO, RL Zoo's CartPoleNoVel-v1 settings",
}
# Our run of sb3-contrib 2.9.2's RecurrentPPO (sb3_one below), recorded: it does not depend on our code, so the table
# uses it unless --learners names sb3-contrib. Seed 1, 200k steps, evaluated every 20k steps and at the end (20
# episodes); training SPS with its other core running our learners. 2026-11-25, commit 33b473c, by `python
# benchmarks/bench_a2c_memory.py --learners sb3-contrib a2c-lstm a2c-mlp ppo-lstm --seeds 1 --total-timesteps 200000`
# (docs/a2c.md at git HEAD 46636a5, "Against sb3-contrib's RecurrentPPO"). {task: (seed, steps, final, first
# evaluation >= 0.95 at, training SPS, wall seconds)}
SB3_CONTRIB_RECORDED_DATE = "2026-11-25"
RECORDED_NAME = "sb3-contrib 2.9.2 RecurrentPPO, RL Zoo's CartPoleNoVel-v1 settings"
SB3_CONTRIB_RECORDED = {
    "popgym-RepeatPreviousEasy-v0": (1, 200_000, 1.000, 40_000, 660, 310),
    "popgym-PositionOnlyCartPoleEasy-v0": (1, 200_000, 1.000, 20_000, 498, 424),
}


def sb3_one(env_id: str, seed: int, total: int, folder: Path) -> None:
    """One RecurrentPPO run (in its own process, pinned by the caller): writes folder/result.json."""
    import gymnasium as gym
    import popgym  # noqa: F401  (registers the popgym-... ids)
    from bench_lstm_cartpole_novel import sb3_contrib

    start = time.time()
    evals, sps, _ = sb3_contrib(seed, lambda: gym.make(env_id), total, total // 10, EVAL_EPISODES)
    result = {"final": evals[-1][1], "curve": evals, "sps": sps, "wall": time.time() - start}
    (folder / "result.json").write_text(json.dumps(result))


def run_sb3(env_id, seed, total, folder: Path, core: int) -> dict:
    result_file = folder / "result.json"
    if not result_file.exists():
        folder.mkdir(parents=True, exist_ok=True)
        command = ["taskset", "-c", str(core), sys.executable, __file__, "--sb3-one", env_id, str(seed), str(total)]
        out = subprocess.run(command + [str(folder)], capture_output=True, text=True)
        (folder / "log.txt").write_text(out.stdout + out.stderr)
        if out.returncode != 0:
            raise SystemExit(f"sb3-contrib {env_id} seed {seed} failed:\n{out.stderr[-2000:]}")
    return json.loads(result_file.read_text())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=TASKS)
    parser.add_argument("--learners", nargs="+", default=DEFAULT, choices=list(LEARNERS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--total-timesteps", type=int, default=1_000_000)
    parser.add_argument("--cores", type=int, nargs="+", default=[0, 1], help="one run at a time on each core")
    parser.add_argument("--out", default="bench_results/a2c_memory")
    parser.add_argument("--sb3-one", nargs=4, help=argparse.SUPPRESS)  # internal: one sb3-contrib run
    opts = parser.parse_args()
    if opts.sb3_one:
        env_id, seed, total, folder = opts.sb3_one
        return sb3_one(env_id, int(seed), int(total), Path(folder))

    total, free = opts.total_timesteps, list(opts.cores)
    jobs = [(task, learner, seed) for task in opts.tasks for learner in opts.learners for seed in opts.seeds]

    def work(job):
        task, learner, seed = job
        core = free.pop()
        try:
            folder = Path(opts.out) / f"{total}" / task / learner / f"seed{seed}"
            script, settings, eval_freq = LEARNERS[learner]
            if script is None:
                return run_sb3(task, seed, total, folder, core)
            return run_one(script, task, seed, total, settings, folder, core, eval_freq, EVAL_EPISODES)
        finally:
            free.append(core)

    with ThreadPoolExecutor(len(opts.cores)) as pool:
        results = dict(zip(jobs, pool.map(work, jobs)))
    print(f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, {total:,} steps, final greedy evaluation")
    columns = [
        "task",
        "learner",
        "steps",
        f"seeds {' / '.join(map(str, opts.seeds))}",
        "mean",
        "first evaluation >= 0.95, per seed",
        "training SPS",
    ]
    rows = []
    for task in opts.tasks:
        for learner in opts.learners:
            runs = [results[(task, learner, seed)] for seed in opts.seeds]
            finals = [r["final"] for r in runs]
            sps = f"{min(r['sps'] for r in runs):,.0f}-{max(r['sps'] for r in runs):,.0f}"
            firsts = " / ".join(first_at(r["curve"]) for r in runs)
            rows.append(
                [
                    task.removeprefix("popgym-"),
                    NAMES[learner],
                    steps_text(total),
                    " / ".join(f"{f:.3f}" for f in finals),
                    f"{np.mean(finals):.3f}",
                    firsts,
                    sps,
                ]
            )
        if "sb3-contrib" not in opts.learners and task in SB3_CONTRIB_RECORDED:
            seed, steps, final, first, sps, _ = SB3_CONTRIB_RECORDED[task]
            rows.append(
                [
                    task.removeprefix("popgym-"),
                    f"{RECORDED_NAME} (recorded run, {SB3_CONTRIB_RECORDED_DATE})",
                    steps_text(steps),
                    f"{final:.3f} (seed {seed})",
                    f"{final:.3f}",
                    steps_text(first),
                    f"{sps:,} (its own run)",
                ]
            )
    print(results_module.markdown(columns, rows))
    default = opts.tasks == TASKS and opts.seeds == [1, 2, 3] and total == 1_000_000
    if default and set(opts.learners) in ({*DEFAULT}, {*DEFAULT, "sb3-contrib"}):
        save(results, columns, rows, opts)


def steps_text(steps: int) -> str:
    """1M, 200k, 400k (to the nearest 10k: our evaluations fall every 99,840 steps)."""
    steps = round(steps, -4)
    return f"{steps / 1e6:g}M" if steps >= 1_000_000 else f"{steps / 1000:g}k"


def first_at(curve, level=0.95) -> str:
    """The step of a run's first evaluation >= `level`; - for none."""
    step = next((step for step, value in curve if value >= level), None)
    return "-" if step is None else steps_text(step)


def save(results, columns, rows, opts):
    """benchmarks/results/popgym.json, from the default configuration."""
    recorded = "sb3-contrib" not in opts.learners
    notes = [
        "Final greedy evaluation of 20 episodes, the recurrent state carried through each episode, after 1M steps at "
        "each script's defaults for the task (`--help` with the `--env-id` shows them), seeds 1-3, two runs at a "
        "time, one per core; evaluations about every 100k steps; training SPS as each script reports it.",
        "sb3-contrib's RecurrentPPO runs RL Zoo's settings for CartPole without velocities (8 envs x 32 steps, 20 "
        "epochs, 64-wide LSTMs for actor and critic, gamma 0.98, lambda 0.8)"
        + (
            f"; its rows are our recorded run of it (sb3-contrib 2.9.2, {SB3_CONTRIB_RECORDED_DATE}: seed 1, 200k "
            "steps, its schedule annealed over them, evaluated every 20k steps), which does not depend on our code "
            "(`python benchmarks/bench_a2c_memory.py --learners sb3-contrib a2c-lstm --seeds 1 --total-timesteps "
            "200000` re-runs it); its SPS is from that run, not measured beside ours."
            if recorded
            else "; its runs here, on the same seeds and steps."
        ),
    ]
    repeat = [
        results[("popgym-RepeatPreviousEasy-v0", learner, seed)]["final"]
        for learner in ("a2c-lstm", "a2c-mlp")
        for seed in opts.seeds
    ]
    readme = dict(
        task="POPGym memory tasks (RepeatPreviousEasy, PositionOnlyCartPoleEasy), `a2c_cartpole.py --lstm`",
        result=f"RepeatPreviousEasy {np.mean(repeat[:3]):.3f}, mean of seeds 1-3 (without `--lstm`: "
        f"{np.mean(repeat[3:]):.3f})",
        page="docs/a2c.md#memory-tasks-popgym",
        order=9,
    )
    runs = [
        dict(task=task, learner=learner, seed=seed, final=r["final"], sps=r["sps"])
        for (task, learner, seed), r in results.items()
    ]
    if recorded:
        runs += [
            dict(
                task=task,
                learner=f"sb3-contrib (recorded, {SB3_CONTRIB_RECORDED_DATE})",
                seed=seed,
                steps=steps,
                final=final,
                first_at_0_95=first,
                sps=sps,
            )
            for task, (seed, steps, final, first, sps, _) in SB3_CONTRIB_RECORDED.items()
        ]
    minutes = sum(r["wall"] for r in results.values()) / 60 / len(opts.cores)
    results_module.save(
        "popgym", minutes, table=dict(columns=columns, rows=rows, notes=notes), runs=runs, readme=readme
    )


if __name__ == "__main__":
    main()
