"""ppo_puffer_async.py on PettingZoo MPE tasks through the generic module-path env id, against a uniform-random and
an always-no-op policy on the same envs: per-agent episode return, 100 episodes each (the trained policy's final
checkpoint, sampled actions as in training). Results depend only on the seeds, not on the machine's load.

    python benchmarks/bench_mpe.py                            # simple_reference_v3, simple_v3, simple_spread_v3
    python benchmarks/bench_mpe.py --envs mpe2.simple_v3 --seeds 1 --total-timesteps 500000

Each training is the script at its defaults (those of every PettingZoo env: 2 env worker processes) with
--total-timesteps, one at a time; a finished run's result is kept under --out, so rerunning only runs what is missing.
"""

import argparse
import glob
import importlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def baseline(env_id: str, policy: str, episodes: int, seed: int) -> float:
    """Mean per-agent episode return of `policy` ("random" or "no-op": action 0) on the raw parallel env."""
    env = importlib.import_module(env_id).parallel_env()
    rng, returns = np.random.default_rng(seed), []
    for episode in range(episodes):
        observations, _ = env.reset(seed=seed + episode)
        totals = dict.fromkeys(env.agents, 0.0)
        while env.agents:
            actions = {a: 0 if policy == "no-op" else int(rng.integers(env.action_space(a).n)) for a in env.agents}
            observations, rewards, terminations, truncations, _ = env.step(actions)
            for agent, reward in rewards.items():
                totals[agent] += reward
        returns.extend(totals.values())
    env.close()
    return float(np.mean(returns))


def train(env_id, seed, total, folder):
    result_file = folder / "result.json"
    if result_file.exists():
        return json.loads(result_file.read_text())
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, str(ROOT / "ppo_puffer_async.py"), "--env-id", env_id, "--seed", str(seed),
               "--total-timesteps", str(total), "--checkpoint-freq", "0"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    start = time.time()
    out = subprocess.run(command, cwd=folder, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"{env_id} seed {seed} failed:\n{out.stderr[-2000:]}")
    (checkpoint,) = glob.glob(str(folder / "runs" / "*" / "ppo_puffer_async.pt"))
    command = [
        sys.executable,
        str(ROOT / "ppo_puffer_async.py"),
        "--eval-checkpoint",
        checkpoint,
        "--eval-episodes",
        "100",
    ]
    evaluation = subprocess.run([*command, "--seed", str(seed)], capture_output=True, text=True, env=env)
    mean = float(re.search(r"return\s+(-?[\d.]+)", evaluation.stdout).group(1))
    result = {"eval": mean, "wall": time.time() - start}
    result_file.write_text(json.dumps(result))
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--envs", nargs="+", default=["mpe2.simple_reference_v3", "mpe2.simple_v3", "mpe2.simple_spread_v3"]
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--total-timesteps", type=int, default=2_000_000)
    parser.add_argument("--out", default="bench_results/mpe")
    opts = parser.parse_args()
    results = {}
    for env_id in opts.envs:
        for seed in opts.seeds:
            results[(env_id, seed)] = train(env_id, seed, opts.total_timesteps, Path(opts.out) / env_id / str(seed))
            print(f"  {env_id} seed {seed}: {results[(env_id, seed)]}", flush=True)
    print(f"\nper-agent episode return, 100 episodes; trained {opts.total_timesteps:,} agent steps at the defaults; "
          f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores")  # fmt: skip
    print("| env | trained (per seed) | random | always no-op |")
    print("|---|---|---|---|")
    for env_id in opts.envs:
        trained = [results[(env_id, seed)]["eval"] for seed in opts.seeds]
        random, noop = (baseline(env_id, policy, 100, 10_000) for policy in ("random", "no-op"))
        print(f"| {env_id} | {' / '.join(f'{t:.2f}' for t in trained)} | {random:.2f} | {noop:.2f} |")


if __name__ == "__main__":
    main()
