"""a2c_cartpole.py with Box actions against Stable-Baselines3's A2C with RL Zoo's hyperparameters, same seeds:
the final deterministic evaluation (20 episodes, observation statistics frozen), training SPS (evaluation time
excluded), and evaluations every 100k steps for a learning-curve picture.

    pip install -e ".[bench]"
    python benchmarks/bench_a2c_continuous.py                     # Pendulum-v1, HalfCheetah-v5, 3 seeds, 1M steps
    python benchmarks/bench_a2c_continuous.py --envs Pendulum-v1 --learners ours --set gamma=0.95 --tag g95
    python benchmarks/bench_a2c_continuous.py --plot docs/a2c_continuous.png

SB3 (rl-baselines3-zoo hyperparams/a2c.yml): Pendulum-v1 with gSDE (log_std_init -2, no orthogonal init),
8 envs x 8 steps, gamma 0.9, lambda 0.9, vf_coef 0.4, RMSprop, learning rate 7e-4 annealed linearly,
VecNormalize (gamma 0.9); HalfCheetah: VecNormalize on A2C's defaults (1 env, 5 steps, 7e-4). Also
LunarLander-v3 (Discrete actions; `--envs LunarLander-v3 --total-timesteps 500000`): 8 envs x 5 steps, gamma
0.995, learning rate 8.3e-4 annealed, ent_coef 1e-5, nothing normalized. Ours runs its defaults. Each run is a
subprocess pinned to one core; a finished run's result is kept under --out, so rerunning only runs what is missing.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from bench_classic_control import script_flags  # --set NAME=VALUE as the script's flags

ROOT = Path(__file__).resolve().parents[1]
EVAL_EVERY = 100_000
RL_ZOO = {"Pendulum-v1": (-162.965, 103.210), "HalfCheetah-v5": (3041.174, 157.265)}  # benchmark.md (v3 there)
RL_ZOO["LunarLander-v3"] = (155.751, 80.419)  # 200k steps, v2 there


def sb3_run(env_id: str, seed: int, total: int, out: str) -> None:
    """One SB3 training (in its own process); writes {"final", "curve", "sps"} to `out`."""
    import gymnasium as gym
    import torch
    from stable_baselines3 import A2C
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    torch.set_num_threads(1)
    if env_id == "Pendulum-v1":
        hyper = dict(n_steps=8, gae_lambda=0.9, vf_coef=0.4, gamma=0.9, ent_coef=0.0, max_grad_norm=0.5,
                     use_rms_prop=True, normalize_advantage=False, learning_rate=lambda progress: 7e-4 * progress,
                     use_sde=True, policy_kwargs=dict(log_std_init=-2, ortho_init=False))  # fmt: skip
        n_envs = 8
    elif env_id == "LunarLander-v3":
        hyper = dict(n_steps=5, gamma=0.995, ent_coef=1e-5, learning_rate=lambda progress: 8.3e-4 * progress)
        n_envs = 8
    else:
        hyper, n_envs = {}, 1
    normalize = env_id != "LunarLander-v3"  # RL Zoo normalizes neither observations nor rewards there
    env = make_vec_env(env_id, n_envs=n_envs, seed=seed)
    env = VecNormalize(env, gamma=hyper.get("gamma", 0.99), norm_obs=normalize, norm_reward=normalize)
    model = A2C("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **hyper)

    def evaluate(episodes):
        eval_env = VecNormalize(DummyVecEnv([lambda: gym.make(env_id)]), False, normalize, norm_reward=False)
        if normalize:
            eval_env.obs_rms = env.obs_rms  # the training statistics, frozen
        eval_env.seed(seed + 10_000)
        return float(evaluate_policy(model, eval_env, n_eval_episodes=episodes, deterministic=True)[0])

    class Curve(BaseCallback):
        def __init__(self):
            super().__init__()
            self.curve, self.eval_time, self.next = [], 0.0, EVAL_EVERY

        def _on_step(self):
            if self.num_timesteps >= self.next:
                start = time.perf_counter()
                self.curve.append((self.num_timesteps, evaluate(10)))
                self.eval_time += time.perf_counter() - start
                self.next += EVAL_EVERY
            return True

    callback = Curve()
    start = time.perf_counter()
    model.learn(total, callback=callback)
    sps = total / (time.perf_counter() - start - callback.eval_time)
    final = evaluate(20)
    Path(out).write_text(json.dumps({"final": final, "curve": callback.curve + [(total, final)], "sps": sps}))


def ours_run(env_id, seed, total, settings, folder, core):
    flags = ["--env-id", env_id, "--seed", str(seed), "--total-timesteps", str(total), "--eval-episodes", "20",
             "--checkpoint-freq", "0"]  # fmt: skip
    flags += script_flags("a2c_cartpole", settings)
    command = ["taskset", "-c", str(core), sys.executable, str(ROOT / "a2c_cartpole.py"), *flags]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run(command, cwd=folder, capture_output=True, text=True, env=env)
    (folder / "log.txt").write_text(out.stdout + out.stderr)
    if out.returncode != 0:
        raise SystemExit(f"ours {env_id} seed {seed} failed:\n{out.stderr[-2000:]}")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(glob.glob(str(folder / "runs" / "*"))[0], size_guidance={"scalars": 0}).Reload()
    curve = [(e.step, e.value) for e in events.Scalars("eval/return_mean")]
    return {"final": curve[-1][1], "curve": curve, "sps": events.Scalars("charts/SPS")[-1].value}


def run(learner, env_id, seed, opts, settings, core):
    folder = Path(opts.out) / (opts.tag if learner == "ours" else "sb3") / learner / env_id / str(seed)
    result_file = folder / "result.json"
    if result_file.exists():
        return json.loads(result_file.read_text())
    if opts.report_only:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    start = time.time()
    if learner == "ours":
        result = ours_run(env_id, seed, opts.total_timesteps, settings, folder, core)
    else:
        command = ["taskset", "-c", str(core), sys.executable, __file__, "--sb3-worker", env_id, str(seed),
                   str(opts.total_timesteps), str(result_file)]  # fmt: skip
        out = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        if out.returncode != 0:
            raise SystemExit(f"sb3 {env_id} seed {seed} failed:\n{out.stderr[-2000:]}")
        result = json.loads(result_file.read_text())
    result["wall"] = time.time() - start
    result_file.write_text(json.dumps(result))
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=["Pendulum-v1", "HalfCheetah-v5"])
    parser.add_argument("--learners", nargs="+", default=["ours", "sb3"], choices=["ours", "sb3"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--total-timesteps", type=int, default=1_000_000)
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="a flag of ours, e.g. gamma=0.95"
    )
    parser.add_argument("--tag", default="defaults", help="name of our configuration (its own result folders)")
    parser.add_argument("--cores", type=int, nargs="+", default=[0, 1], help="one run at a time on each core")
    parser.add_argument("--out", default="bench_results/a2c_continuous")
    parser.add_argument("--plot", help="also draw the learning curves into this PNG")
    parser.add_argument("--report-only", action="store_true", help="table and plot from the results kept, run nothing")
    parser.add_argument("--sb3-worker", nargs=4, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.sb3_worker:
        env_id, seed, total, out = opts.sb3_worker
        return sb3_run(env_id, int(seed), int(total), out)
    settings = [tuple(item.split("=", 1)) for item in opts.set]
    jobs = [(learner, env_id, seed) for env_id in opts.envs for learner in opts.learners for seed in opts.seeds]
    free = list(opts.cores)

    def work(job):
        core = free.pop()
        try:
            return job, run(*job, opts, settings, core)
        finally:
            free.append(core)

    results = {}
    with ThreadPoolExecutor(len(opts.cores)) as pool:
        for job, result in pool.map(work, jobs):
            if result is None:
                print(f"  {job[0]:<5} {job[1]:<15} seed {job[2]}: not run", flush=True)
                continue
            results[job] = result
            print(f"  {job[0]:<5} {job[1]:<15} seed {job[2]}: final {result['final']:9.1f}, SPS {result['sps']:7,.0f}, "
                  f"{result['wall']:5.0f} s", flush=True)  # fmt: skip
    print(f"\nfinal deterministic evaluation, 20 episodes, after {opts.total_timesteps:,} steps; "
          f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores; ours: {opts.tag}")  # fmt: skip
    print("| env | learner | per seed | mean +/- std | train SPS (median) | RL Zoo's published A2C |")
    print("|---|---|---|---|---|---|")
    for env_id in opts.envs:
        for learner in opts.learners:
            rows = [results[(learner, env_id, seed)] for seed in opts.seeds if (learner, env_id, seed) in results]
            if not rows:
                continue
            finals = [r["final"] for r in rows]
            zoo = "{:.1f} +/- {:.1f}".format(*RL_ZOO[env_id]) if env_id in RL_ZOO else "-"
            print(f"| {env_id} | {learner} | {' / '.join(f'{f:.1f}' for f in finals)} | {np.mean(finals):.1f} +/- "
                  f"{np.std(finals):.1f} | {np.median([r['sps'] for r in rows]):,.0f} | {zoo} |")  # fmt: skip
    if opts.plot:
        plot(results, opts)


def plot(results, opts):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(opts.envs), figsize=(5 * len(opts.envs), 3.6), squeeze=False)
    for ax, env_id in zip(axes[0], opts.envs):
        for learner, color in zip(opts.learners, ("tab:blue", "tab:orange")):
            for i, seed in enumerate(s for s in opts.seeds if (learner, env_id, s) in results):
                steps, values = zip(*results[(learner, env_id, seed)]["curve"])
                label = {"ours": "a2c_cartpole.py", "sb3": "SB3 A2C (RL Zoo)"}[learner] if i == 0 else None
                ax.plot(steps, values, color=color, alpha=0.8, label=label)
        ax.set_title(env_id)
        ax.set_xlabel("environment steps")
    axes[0][0].set_ylabel("deterministic eval return (each seed)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(opts.plot, dpi=110)
    print(f"wrote {opts.plot}")


if __name__ == "__main__":
    main()
