"""ppo_puffer_async.py (and a2c_cartpole.py) on MuJoCo at their continuous defaults: final deterministic
evaluation (10 episodes, the Gaussian's mean) after 1M steps, 3 seeds, beside CleanRL's published
ppo_continuous_action.py figures, with SPS and a learning-curve picture; and the speed of the learner against
Stable-Baselines3's PPO at matched settings, side by side.

    python benchmarks/bench_mujoco.py                                  # the table; ~45 min on 2 cores
    python benchmarks/bench_mujoco.py --envs Hopper-v5 --seeds 11 --cores 0 --tag probe
    python benchmarks/bench_mujoco.py --version v4                      # CleanRL's env versions (a warning each)
    python benchmarks/bench_mujoco.py --plot docs/mujoco.png
    python benchmarks/bench_mujoco.py --speed                           # vs SB3 PPO, 200k steps, one core each

Every run is a subprocess at the script's defaults (plus --set), pinned to one core, in its own folder under
--out; a finished run's result is kept there, so rerunning the command only runs what is missing: a sweep that
outlives a working session goes on where it stopped. Needs `pip install -e ".[bench]"` (matplotlib, SB3).
"""

import argparse
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_classic_control import ROOT, fmt, run_one, script_flags  # noqa: E402

ENVS = ["HalfCheetah", "Hopper", "Walker2d", "InvertedPendulum"]
# CleanRL's ppo_continuous_action.py at 1M steps on the v4 envs (its docs; mean +/- std over seeds).
CLEANRL = {"HalfCheetah": (1442.6, 46.0), "Walker2d": (2288.0, 571.8), "Hopper": (2382.9, 271.7),
           "InvertedPendulum": (963.1, 22.2)}  # fmt: skip
EVAL_FREQ = {"ppo_puffer_async": 50, "a2c_cartpole": 1000}  # updates: ~100k steps at either script's defaults
# CleanRL's (and SB3's RL Zoo) PPO settings for MuJoCo, as each learner spells them.
MATCHED = ["--num-envs", "1", "--horizon", "64", "--batch-size", "2048", "--num-minibatches", "32"]
MATCHED += ["--update-epochs", "10", "--hidden-size", "64"]
SB3 = """
import sys, time, gymnasium as gym, torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize
torch.set_num_threads(1)
env = VecNormalize(make_vec_env(sys.argv[1], n_envs=1, seed=1), gamma=0.99)
model = PPO("MlpPolicy", env, n_steps=2048, batch_size=64, n_epochs=10, learning_rate=3e-4, gamma=0.99,
            gae_lambda=0.95, clip_range=0.2, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5, seed=1, device="cpu")
start = time.perf_counter()
model.learn(int(sys.argv[2]))
print(f"SPS {int(sys.argv[2]) / (time.perf_counter() - start):.0f}")
"""


def speed(env_id: str, steps: int, out: Path) -> None:
    """SB3's PPO and ours at matched settings, at the same time, one core each; then ours at its defaults (8 envs,
    minibatches of 256 steps), and at its defaults in CleanRL's 32 minibatches."""
    out.mkdir(parents=True, exist_ok=True)
    common = ["--env-id", env_id, "--total-timesteps", str(steps), "--checkpoint-freq", "0", "--seed", "1"]
    ours = [sys.executable, str(ROOT / "ppo_puffer_async.py"), *common]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    def sps_of(proc) -> float:
        text = proc.communicate()[0]
        (out / f"log_{proc.args[2]}.txt").write_text(text)
        return float(re.findall(r"SPS\s+([\d,]+)", text)[-1].replace(",", ""))

    def launch(core, cmd):
        pipes = dict(stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return subprocess.Popen(["taskset", "-c", str(core), *cmd], cwd=out, env=env, **pipes)

    sb3 = launch(0, [sys.executable, "-c", SB3, env_id, str(steps)])
    matched = launch(1, ours + MATCHED)
    sb3_sps, matched_sps = sps_of(sb3), sps_of(matched)
    defaults_sps = sps_of(launch(1, ours))
    small_sps = sps_of(launch(1, ours + ["--num-minibatches", "32"]))  # the defaults in minibatches of 64 steps
    print(f"{env_id}, {steps:,} steps, one core each, {time.strftime('%Y-%m-%d')}:")
    print("| learner | settings | SPS | vs SB3 |\n|---|---|---|---|")
    print(f"| SB3 {__import__('stable_baselines3').__version__} PPO | 1 env x 2048, 32 minibatches, 10 epochs | "
          f"{sb3_sps:,.0f} | 1.00x |")  # fmt: skip
    print(f"| ppo_puffer_async.py | the same | {matched_sps:,.0f} | {matched_sps / sb3_sps:.2f}x |")
    print(f"| ppo_puffer_async.py | its defaults | {defaults_sps:,.0f} | {defaults_sps / sb3_sps:.2f}x |")
    print(f"| ppo_puffer_async.py | its defaults, 32 minibatches | {small_sps:,.0f} | {small_sps / sb3_sps:.2f}x |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=ENVS, help="names without the version")
    parser.add_argument("--version", default="v5", help="v5, or v4 for CleanRL's versions")
    parser.add_argument("--scripts", nargs="+", default=["ppo_puffer_async"], choices=list(EVAL_FREQ))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--total-timesteps", type=int, default=1_000_000)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a flag for every run")
    parser.add_argument("--tag", default="defaults", help="name of this configuration (its own result folders)")
    parser.add_argument("--cores", type=int, nargs="+", default=[0, 1], help="one run at a time on each core")
    parser.add_argument("--out", default="bench_results/mujoco")
    parser.add_argument("--plot", help="also draw the learning curves into this PNG")
    parser.add_argument("--speed", action="store_true", help="only the SPS comparison with SB3 (200k steps)")
    opts = parser.parse_args()
    if opts.speed:
        return speed(f"HalfCheetah-{opts.version}", 200_000, Path(opts.out) / "speed")
    settings = [tuple(item.split("=", 1)) for item in opts.set]
    for script in opts.scripts:
        script_flags(script, settings)  # a bad --set fails now, not after an hour
    envs = [f"{env}-{opts.version}" for env in opts.envs]
    jobs = [(script, env_id, seed) for env_id in envs for script in opts.scripts for seed in opts.seeds]
    free = list(opts.cores)

    def work(job):
        core = free.pop()
        try:
            script, env_id, seed = job
            folder = Path(opts.out) / opts.tag / script / env_id / str(seed)
            flags = (script, env_id, seed, opts.total_timesteps, settings, folder, core, EVAL_FREQ[script], 10)
            return job, run_one(*flags)
        finally:
            free.append(core)

    results = {}
    with ThreadPoolExecutor(len(opts.cores)) as pool:
        for job, result in pool.map(work, jobs):
            results[job] = result
            print(f"  {job[0]:<17} {job[1]:<20} seed {job[2]}: final {result['final']:8.1f}, "
                  f"SPS {result['sps']:7,.0f}, {result['wall']:5.0f} s", flush=True)  # fmt: skip

    print(f"\n{opts.tag}: final deterministic evaluation (10 episodes) after {opts.total_timesteps:,} steps, seeds "
          f"{' '.join(map(str, opts.seeds))}; {time.strftime('%Y-%m-%d')}, one run per core")  # fmt: skip
    print("| env | script | per seed | mean +/- std | SPS | CleanRL ppo_continuous_action.py (v4) |")
    print("|---|---|---|---|---|---|")
    for env in opts.envs:
        for script in opts.scripts:
            runs = [results[(script, f"{env}-{opts.version}", seed)] for seed in opts.seeds]
            finals = [run["final"] for run in runs]
            print(f"| {env}-{opts.version} | {script} | {' / '.join(f'{f:.1f}' for f in finals)} | "
                  f"{fmt(np.mean(finals), np.std(finals))} | {np.mean([r['sps'] for r in runs]):,.0f} | "
                  f"{fmt(*CLEANRL[env])} |")  # fmt: skip
    if opts.plot:
        plot(results, opts)


def plot(results, opts):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(opts.envs), figsize=(4.2 * len(opts.envs), 3.4), squeeze=False)
    for ax, env in zip(axes[0], opts.envs):
        for script, color in zip(opts.scripts, ("tab:blue", "tab:orange")):
            curves = [results[(script, f"{env}-{opts.version}", seed)]["curve"] for seed in opts.seeds]
            steps = [s for s, _ in curves[0]]
            values = np.array([[v for _, v in curve[: len(steps)]] for curve in curves])
            ax.plot(steps, values.mean(0), color=color, label=script)
            ax.fill_between(steps, values.min(0), values.max(0), color=color, alpha=0.2)
        ax.axhline(CLEANRL[env][0], color="gray", linestyle="--", linewidth=1, label="CleanRL at 1M (v4)")
        ax.set_title(f"{env}-{opts.version}")
        ax.set_xlabel("environment steps")
    axes[0][0].set_ylabel(f"eval return (mean, min-max of {len(opts.seeds)})")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(opts.plot, dpi=110)
    print(f"wrote {opts.plot}")


if __name__ == "__main__":
    main()
