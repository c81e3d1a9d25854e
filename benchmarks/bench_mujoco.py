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

import results as results_module  # noqa: E402

ENVS = ["HalfCheetah", "Hopper", "Walker2d", "InvertedPendulum"]
# CleanRL's ppo_continuous_action.py at 1M steps on the v4 envs (mean +/- std over seeds, rounded): CleanRL's
# docs/benchmark/ppo_continuous_action.md at commit fe8d8a03, shown on docs.cleanrl.dev's PPO page.
CLEANRL = {
    "HalfCheetah": (1442.6, 46.0),
    "Walker2d": (2288.0, 571.8),
    "Hopper": (2382.9, 271.7),
    "InvertedPendulum": (963.1, 22.2),
}
EVAL_FREQ = {"ppo_puffer_async": 50, "a2c_cartpole": 1000}  # updates: ~100k steps at either script's defaults
# CleanRL's ppo_continuous_action.py settings (at fe8d8a03), as this script spells them. SB3 below takes them as
# arguments; they are SB3 2.9.2's PPO defaults (stable_baselines3/ppo/ppo.py), which RL Zoo v2.8.0's
# hyperparams/ppo.yml keeps for some MuJoCo tasks (its mujoco-defaults) but not HalfCheetah (tuned there).
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
# CleanRL's ppo_continuous_action.py at this commit of github.com/vwxyzjn/cleanrl, with the one edit Gymnasium 1.x
# needs to run it. (Its episode logging reads infos["final_info"], which Gymnasium 1.x no longer writes, so it logs
# no returns, and 1.x's next-step autoreset hands it one transition per episode across the reset: neither changes
# its speed.)
CLEANRL_COMMIT = "fe8d8a03c41a7ef5b523e2e354bd01c363e786bb"
CLEANRL_EDITS = [
    (
        "gym.wrappers.TransformObservation(env, lambda obs: np.clip(obs, -10, 10))",
        "gym.wrappers.TransformObservation(env, lambda obs: np.clip(obs, -10, 10), env.observation_space)",
    )
]


def cleanrl_script(clone: str, out: Path) -> Path:
    """CleanRL's ppo_continuous_action.py from a clone of its repository at CLEANRL_COMMIT, edited for Gymnasium 1.x."""
    show = ["git", "-C", clone, "show", f"{CLEANRL_COMMIT}:cleanrl/ppo_continuous_action.py"]
    source = subprocess.run(show, capture_output=True, text=True)
    if source.returncode != 0:
        raise SystemExit(
            f"--cleanrl {clone}: no commit {CLEANRL_COMMIT[:8]} there (git clone "
            "https://github.com/vwxyzjn/cleanrl; it needs the full history)"
        )
    text = source.stdout
    for old, new in CLEANRL_EDITS:
        assert old in text, f"CleanRL's script changed: {old!r} not found"
        text = text.replace(old, new)
    path = out / "cleanrl_ppo_continuous_action.py"
    path.write_text(text)
    return path


def speed(env_id: str, steps: int, out: Path, cleanrl=None):
    """Training SPS side by side with SB3's PPO (SB3 on core 0, the other on core 1, one torch thread each, the same
    steps): ppo_puffer_async.py at CleanRL's settings, CleanRL's own script (with --cleanrl), ppo_puffer_async.py at
    its defaults. Each ratio is from one pair run at the same time."""
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    ours = [
        sys.executable,
        str(ROOT / "ppo_puffer_async.py"),
        "--env-id",
        env_id,
        "--total-timesteps",
        str(steps),
        "--checkpoint-freq",
        "0",
        "--seed",
        "1",
        "--eval-freq",
        "0",
        "--eval-episodes",
        "1",
    ]
    learners = [
        ("ppo_puffer_async.py", "CleanRL's: 1 env x 2048 steps, 32 minibatches, 10 epochs, 64 x 64", ours + MATCHED)
    ]
    if cleanrl:
        command = [
            sys.executable,
            str(cleanrl_script(cleanrl, out).resolve()),
            "--env-id",
            env_id,
            "--total-timesteps",
            str(steps),
        ]
        learners.append((f"CleanRL's ppo_continuous_action.py ({CLEANRL_COMMIT[:8]})", "its own (the same)", command))
    learners.append(("ppo_puffer_async.py", "its defaults: 8 envs x 256 steps, minibatches of 256, 64 x 64", ours))

    def launch(core, name, command):
        log = open(out / f"{name}.txt", "w")
        return subprocess.Popen(
            ["taskset", "-c", str(core), *command], cwd=out, env=env, stdout=log, stderr=subprocess.STDOUT
        )

    def sps_of(proc, name) -> float:
        if proc.wait() != 0:
            raise SystemExit(f"{name} failed: {out / (name + '.txt')}")
        return float(re.findall(r"SPS:?\s+([\d,]+)", (out / f"{name}.txt").read_text())[-1].replace(",", ""))

    rows, runs, sb3_version = [], [], __import__("stable_baselines3").__version__
    for i, (learner, settings, command) in enumerate(learners):
        pair = (
            launch(0, f"sb3_{i}", [sys.executable, "-c", SB3, env_id, str(steps)]),
            launch(1, f"learner_{i}", command),
        )
        sb3_sps, sps = sps_of(pair[0], f"sb3_{i}"), sps_of(pair[1], f"learner_{i}")
        runs.append(dict(learner=learner, settings=settings, sps=sps, sb3_sps=sb3_sps))
        rows.append([learner, settings, f"{sps:,.0f}", f"{sb3_sps:,.0f}", f"**{sps / sb3_sps:.2f}x**"])
        print(f"| {' | '.join(rows[-1])} |", flush=True)
    columns = ["learner", "settings", "training SPS", f"SB3 {sb3_version} PPO beside it (CleanRL's settings)", "ratio"]
    return columns, rows, runs


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
    parser.add_argument("--cleanrl", help="with --speed: a clone of github.com/vwxyzjn/cleanrl, to run its script too")
    opts = parser.parse_args()
    if opts.speed:
        start = time.time()
        columns, rows, runs = speed(f"HalfCheetah-{opts.version}", 200_000, Path(opts.out) / "speed", opts.cleanrl)
        print(results_module.markdown(columns, rows))
        notes = [
            f"HalfCheetah-{opts.version}, 200,000 steps per run; each row's learner on one core while SB3's PPO "
            "runs on the other, one torch thread each; training SPS as each learner reports it."
        ]
        if opts.version == "v5" and opts.cleanrl:
            results_module.save(
                "mujoco-speed",
                (time.time() - start) / 60,
                table=dict(columns=columns, rows=rows, notes=notes),
                runs=runs,
            )
        return
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
            print(
                f"  {job[0]:<17} {job[1]:<20} seed {job[2]}: final {result['final']:8.1f}, "
                f"SPS {result['sps']:7,.0f}, {result['wall']:5.0f} s",
                flush=True,
            )

    print(
        f"\n{opts.tag}: final deterministic evaluation (10 episodes) after {opts.total_timesteps:,} steps, seeds "
        f"{' '.join(map(str, opts.seeds))}; {time.strftime('%Y-%m-%d')}, one run per core"
    )
    columns = ["env", "script", "per seed", "mean +/- std", "training SPS", "CleanRL's ppo_continuous_action.py (v4)"]
    rows, above = [], []
    for env in opts.envs:
        for script in opts.scripts:
            runs = [results[(script, f"{env}-{opts.version}", seed)] for seed in opts.seeds]
            finals = [run["final"] for run in runs]
            rows.append(
                [
                    f"{env}-{opts.version}",
                    script,
                    " / ".join(f"{f:.1f}" for f in finals),
                    fmt(np.mean(finals), np.std(finals)),
                    f"{np.mean([r['sps'] for r in runs]):,.0f}",
                    fmt(*CLEANRL[env]),
                ]
            )
            above += [np.mean(finals) > CLEANRL[env][0]] if script == "ppo_puffer_async" else []
    print(results_module.markdown(columns, rows))
    if (
        opts.tag == "defaults"
        and opts.version == "v5"
        and (opts.envs, opts.seeds, opts.scripts) == (ENVS, [1, 2, 3], ["ppo_puffer_async"])
    ):
        notes = [
            "Final deterministic evaluation (10 episodes, the Gaussian's mean) after 1M steps at each script's "
            "continuous defaults, one run per core. CleanRL's column: its published figures, v4 envs, the "
            "return of training episodes (docs.cleanrl.dev, ppo_continuous_action.py)."
        ]
        cheetah = np.mean([results[("ppo_puffer_async", "HalfCheetah-v5", seed)]["final"] for seed in opts.seeds])
        readme = dict(
            task="MuJoCo v5 (HalfCheetah, Hopper, Walker2d, InvertedPendulum), `ppo_puffer_async.py`",
            result=f"HalfCheetah {cheetah:,.0f}; above CleanRL's published PPO on {sum(above)} of {len(above)} tasks",
            page="docs/ppo_puffer_async.md#mujoco-box-actions",
            order=6,
        )
        minutes = sum(result["wall"] for result in results.values()) / 60 / len(opts.cores)
        runs = [
            dict(script=s, env_id=e, seed=seed, final=r["final"], sps=r["sps"]) for (s, e, seed), r in results.items()
        ]
        results_module.save(
            "mujoco", minutes, table=dict(columns=columns, rows=rows, notes=notes), runs=runs, readme=readme
        )
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
