"""Recurrent A2C on POPGym's memory tasks: a2c_cartpole.py --lstm at its POPGym defaults (and with --rnn-type gru)
beside the same without --lstm (the memoryless control), ppo_puffer_async.py --lstm at its Gymnasium defaults,
and sb3-contrib's RecurrentPPO with RL Zoo's tuned settings for CartPole without velocities
(bench_lstm_cartpole_novel.py's).

    pip install -e ".[bench]"                                     # stable-baselines3, sb3-contrib, matplotlib
    python benchmarks/bench_a2c_memory.py                         # ours, 3 seeds, 1M steps: ~25 min on 2 cores
    python benchmarks/bench_a2c_memory.py --learners a2c-lstm sb3-contrib --seeds 1 --total-timesteps 200000

Every run: --total-timesteps steps, then a final greedy evaluation of 20 episodes with the recurrent state
carried through each episode (sb3-contrib: VecNormalize's statistics frozen). Runs go one per core, each in its
own folder under --out; a finished run's result is kept there, so rerunning the command only runs what is
missing. sb3-contrib's RecurrentPPO runs at a few hundred steps per second (20 epochs of its LSTM a rollout),
so give it a smaller --total-timesteps than 1M unless you have hours.
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
    parser.add_argument(
        "--learners", nargs="+", default=["a2c-lstm", "a2c-gru", "a2c-mlp", "ppo-lstm"], choices=list(LEARNERS)
    )
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
    print("| task | learner | seeds " + " / ".join(map(str, opts.seeds)) + " | mean | train SPS |")
    print("|---|---|---|---|---|")
    for task in opts.tasks:
        for learner in opts.learners:
            runs = [results[(task, learner, seed)] for seed in opts.seeds]
            finals = [r["final"] for r in runs]
            sps = f"{min(r['sps'] for r in runs):,.0f}-{max(r['sps'] for r in runs):,.0f}"
            cells = " / ".join(f"{f:.3f}" for f in finals)
            print(f"| {task} | {learner} | {cells} | {np.mean(finals):.3f} | {sps} |")


if __name__ == "__main__":
    main()
