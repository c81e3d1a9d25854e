"""a2c_cartpole.py with Box actions against Stable-Baselines3's A2C with RL Zoo's hyperparameters, same seeds:
the final deterministic evaluation (20 episodes, observation statistics frozen), training SPS (evaluation time
excluded), and evaluations every 100k steps for a learning-curve picture.

    pip install -e ".[bench]"
    python benchmarks/bench_a2c_continuous.py                     # the docs' table: ours on seeds 1-8, ~15 min
    python benchmarks/bench_a2c_continuous.py --sps-only          # only the side-by-side SPS pairs, ~5 min
    python benchmarks/bench_a2c_continuous.py --learners ours sb3 # SB3's learning runs too (seeds 1-3: hours)
    python benchmarks/bench_a2c_continuous.py --envs Pendulum-v1 --set gamma=0.95 --tag g95 --seeds 11 12 13
    python benchmarks/bench_a2c_continuous.py --plot docs/a2c_continuous.png

SB3 2.9.2's A2C with RL Zoo's settings (rl-baselines3-zoo's hyperparams/a2c.yml at commit 22e3ff24): Pendulum-v1
with gSDE (log_std_init -2, no orthogonal init), 8 envs x 8 steps, gamma 0.9, lambda 0.9, vf_coef 0.4, RMSprop,
learning rate 7e-4 annealed linearly, VecNormalize (gamma 0.9); HalfCheetah (its HalfCheetah-v4 entry): VecNormalize
on A2C's defaults (1 env, 5 steps, 7e-4). Also
LunarLander-v3 (Discrete actions; `--envs LunarLander-v3 --learners sb3 --total-timesteps 500000`): 8 envs x 5
steps, gamma 0.995, learning rate 8.3e-4 annealed, ent_coef 1e-5, nothing normalized. Ours runs its defaults. Each
run is a subprocess pinned to one core; a finished run's result is kept under --out, so rerunning only runs what is
missing.

SB3's learning runs take hours and do not depend on our code: unless `--learners` names sb3 (its seeds:
--sb3-seeds), the table shows SB3_RECORDED, our recorded runs of it, labelled so. The training-SPS ratio is always
measured in the run: after the learning runs, ours and SB3 train side by side on each env, one core each, one torch
thread each, --sps-timesteps steps (seed 1), and the table gives both SPS and the ratio (`--sps-only`: only these).

The default configuration (no flag but --cores, --out or --plot) also writes benchmarks/results/a2c-continuous.json,
from which `python benchmarks/report.py` renders docs/a2c.md's table and the README's row; any other run only
prints its table.
"""

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from bench_classic_control import script_flags  # --set NAME=VALUE as the script's flags

import results as results_module  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EVAL_EVERY = 100_000
# RL Zoo's published A2C agents (github.com/DLR-RM/rl-baselines3-zoo, benchmark.md at commit 22e3ff24; mean, std):
# one tuned agent each, deterministic evaluation; HalfCheetah is v3 there
RL_ZOO = {"Pendulum-v1": (-162.965, 103.210), "HalfCheetah-v5": (3041.174, 157.265)}
RL_ZOO["LunarLander-v3"] = (155.751, 80.419)  # 200k steps, v2 there
# Our runs of SB3 2.9.2's A2C with RL Zoo's settings (sb3_run below), recorded: they do not depend on our code, so the
# table uses them unless --learners names sb3. {env: steps, date, {seed: final deterministic evaluation, 20 episodes}}.
# Pendulum-v1, and HalfCheetah-v5 seed 1: 2026-11-24, commit 1521f12, by `python benchmarks/bench_a2c_continuous.py`
# (its defaults then: --learners ours sb3 --seeds 1 2 3); HalfCheetah-v5 seeds 2 and 3: 2026-11-24, commit dac292d, the
# same bench on those seeds (docs/a2c.md at git HEAD 46636a5, "Against Stable-Baselines3 on Pendulum-v1 and
# HalfCheetah-v5"). LunarLander-v3: 2026-11-25, commit 33b473c, `python benchmarks/bench_a2c_continuous.py --envs
# LunarLander-v3 --learners sb3 --total-timesteps 500000` (docs/classic_control.md). `--learners sb3` re-runs them.
SB3_RECORDED = {
    "Pendulum-v1": (1_000_000, "2026-11-24", {1: -195.5, 2: -148.0, 3: -174.4}),
    "HalfCheetah-v5": (1_000_000, "2026-11-24", {1: 438.0, 2: 2174.9, 3: 919.0}),
    "LunarLander-v3": (500_000, "2026-11-25", {1: -49.9, 2: 52.5, 3: 17.4}),
}
ENVS = ["Pendulum-v1", "HalfCheetah-v5"]
SEEDS = [1, 2, 3, 4, 5, 6, 7, 8]  # ours: the table gives seeds 1-3 (as SB3's) and the worst of all 8
SPS_STEPS = 100_000  # each side-by-side SPS run


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
        hyper = dict(
            n_steps=8,
            gae_lambda=0.9,
            vf_coef=0.4,
            gamma=0.9,
            ent_coef=0.0,
            max_grad_norm=0.5,
            use_rms_prop=True,
            normalize_advantage=False,
            learning_rate=lambda progress: 7e-4 * progress,
            use_sde=True,
            policy_kwargs=dict(log_std_init=-2, ortho_init=False),
        )
        n_envs = 8
    elif env_id == "LunarLander-v3":
        hyper = dict(n_steps=5, gamma=0.995, ent_coef=1e-5, learning_rate=lambda progress: 8.3e-4 * progress)
        n_envs = 8
    else:
        hyper, n_envs = {}, 1
    normalize = env_id != "LunarLander-v3"  # RL Zoo's a2c.yml normalizes neither observations nor rewards there
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
    flags = [
        "--env-id",
        env_id,
        "--seed",
        str(seed),
        "--total-timesteps",
        str(total),
        "--eval-episodes",
        "20",
        "--checkpoint-freq",
        "0",
    ]
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
    return {"final": curve[-1][1], "curve": curve, "sps": events.Scalars("perf/train_SPS")[-1].value}


def sb3_process(env_id, seed, total, result_file, core) -> dict:
    """sb3_run in its own process, pinned to `core`, one torch thread."""
    command = [
        "taskset",
        "-c",
        str(core),
        sys.executable,
        __file__,
        "--sb3-worker",
        env_id,
        str(seed),
        str(total),
        str(result_file),
    ]
    out = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if out.returncode != 0:
        raise SystemExit(f"sb3 {env_id} seed {seed} failed:\n{out.stderr[-2000:]}")
    return json.loads(Path(result_file).read_text())


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
        result = sb3_process(env_id, seed, opts.total_timesteps, result_file, core)
    result["wall"] = time.time() - start
    result_file.write_text(json.dumps(result))
    return result


def speed_pair(env_id, steps, settings, out: Path, cores) -> dict:
    """Training SPS side by side: SB3's A2C (RL Zoo's settings) on the first of `cores`, ours (its defaults and
    `settings`) on the last, at the same time, one torch thread each, `steps` steps of seed 1, evaluation excluded
    (one core given: one after the other). Measured afresh every time: {"ours", "sb3", "wall"}."""
    folder = out / "speed" / env_id
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "ours").mkdir(parents=True)
    start = time.time()
    ours = lambda: ours_run(env_id, 1, steps, [*settings, ("eval_freq", "0")], folder / "ours", cores[-1])["sps"]
    sb3 = lambda: sb3_process(env_id, 1, steps, folder / "sb3.json", cores[0])["sps"]
    with ThreadPoolExecutor(2 if len(set(cores)) > 1 else 1) as pool:
        sb3_sps, ours_sps = pool.submit(sb3), pool.submit(ours)
        result = {"ours": ours_sps.result(), "sb3": sb3_sps.result()}
    return {**result, "wall": time.time() - start}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=ENVS)
    parser.add_argument(
        "--learners",
        nargs="+",
        default=["ours"],
        choices=["ours", "sb3"],
        help="sb3: run SB3's learning runs (hours) instead of showing SB3_RECORDED",
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=None, help=f"default: {' '.join(map(str, SEEDS))}")
    parser.add_argument("--sb3-seeds", nargs="+", type=int, default=None, help="SB3's; default: --seeds, else 1 2 3")
    parser.add_argument("--total-timesteps", type=int, default=1_000_000)
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="a flag of ours, e.g. gamma=0.95"
    )
    parser.add_argument("--tag", default="defaults", help="name of our configuration (its own result folders)")
    parser.add_argument("--cores", type=int, nargs="+", default=[0, 1], help="one run at a time on each core")
    parser.add_argument("--out", default="bench_results/a2c_continuous")
    parser.add_argument("--plot", help="also draw the learning curves into this PNG")
    parser.add_argument("--report-only", action="store_true", help="table and plot from the results kept, run nothing")
    parser.add_argument("--sps-only", action="store_true", help="only the side-by-side SPS pairs, one per env")
    parser.add_argument("--sps-timesteps", type=int, default=SPS_STEPS, help="steps of each side-by-side SPS run")
    parser.add_argument("--sb3-worker", nargs=4, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.sb3_worker:
        env_id, seed, total, out = opts.sb3_worker
        return sb3_run(env_id, int(seed), int(total), out)
    settings = [tuple(item.split("=", 1)) for item in opts.set]
    script_flags("a2c_cartpole", settings)  # a bad --set fails now, not after an hour
    seeds = {"ours": opts.seeds or SEEDS, "sb3": opts.sb3_seeds or opts.seeds or [1, 2, 3]}
    speed = {}
    if opts.sps_only:
        for env_id in opts.envs:
            speed[env_id] = speed_pair(env_id, opts.sps_timesteps, settings, Path(opts.out), opts.cores)
            print(
                f"  {env_id}: ours {speed[env_id]['ours']:,.0f} SPS, SB3 {speed[env_id]['sb3']:,.0f} SPS beside it: "
                f"{speed[env_id]['ours'] / speed[env_id]['sb3']:.2f}x",
                flush=True,
            )
        return
    jobs = [(learner, env_id, seed) for env_id in opts.envs for learner in opts.learners for seed in seeds[learner]]
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
            print(
                f"  {job[0]:<5} {job[1]:<15} seed {job[2]}: final {result['final']:9.1f}, SPS {result['sps']:7,.0f}, "
                f"{result['wall']:5.0f} s",
                flush=True,
            )
    if "ours" in opts.learners and not settings and not opts.report_only:  # ours at its defaults: the SPS pairs
        for env_id in opts.envs:
            speed[env_id] = speed_pair(env_id, opts.sps_timesteps, settings, Path(opts.out), opts.cores)
    print(
        f"\nfinal deterministic evaluation, 20 episodes, after {opts.total_timesteps:,} steps; "
        f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores; ours: {opts.tag}"
    )
    columns, rows, recorded = table(results, speed, seeds, opts)
    print(results_module.markdown(columns, rows))
    default = opts.envs == ENVS and opts.seeds in (None, SEEDS) and seeds["sb3"] == [1, 2, 3] and not settings
    if default and "ours" in opts.learners and opts.total_timesteps == 1_000_000 and not opts.report_only:
        save(results, speed, recorded, columns, rows, opts)
    if opts.plot:
        plot(results, opts)


def span(seeds) -> str:
    """1-8 for a run of consecutive seeds, else 1, 3, 5."""
    consecutive = list(seeds) == list(range(seeds[0], seeds[0] + len(seeds)))
    return f"{seeds[0]}-{seeds[-1]}" if consecutive and len(seeds) > 2 else ", ".join(map(str, seeds))


def table(results, speed, seeds, opts):
    """The docs' table: per env, ours and SB3 (its runs, or SB3_RECORDED), the first three of our seeds and their
    mean, the worst of all our seeds, training SPS side by side with the ratio, RL Zoo's published A2C."""
    shown = seeds["ours"][:3]
    columns = ["env", "learner", f"seeds {' / '.join(map(str, shown))}", "mean +/- std"]
    worst = "ours" in opts.learners and len(seeds["ours"]) > len(shown)
    columns += [f"worst of seeds {span(seeds['ours'])}"] if worst else []
    columns += [f"training SPS, side by side ({opts.sps_timesteps:,} steps, one core each)", "RL Zoo's published A2C"]
    rows, recorded = [], {}
    for env_id in opts.envs:
        finals = {}
        for learner in ("ours", "sb3"):
            finals[learner] = {
                seed: results[(learner, env_id, seed)]["final"]
                for seed in seeds[learner]
                if (learner, env_id, seed) in results
            }
        steps, date, kept = SB3_RECORDED.get(env_id, (None, None, {}))
        if "sb3" not in opts.learners and steps == opts.total_timesteps and all(seed in kept for seed in shown):
            finals["sb3"], recorded[env_id] = kept, (date, kept)
        pair, sps = speed.get(env_id), {"ours": "not measured", "sb3": "not measured"}
        if pair:
            sps = {
                "ours": f"{pair['ours']:,.0f} (**{pair['ours'] / pair['sb3']:.2f}x** SB3's)",
                "sb3": f"{pair['sb3']:,.0f}",
            }
        zoo = "{:,.1f} +/- {:,.1f}".format(*RL_ZOO[env_id]) if env_id in RL_ZOO else "-"
        zoo += " (v3)" if env_id == "HalfCheetah-v5" else ""
        for learner in ("ours", "sb3"):
            mine = finals[learner]
            if not mine:
                continue
            name = "`a2c_cartpole.py` (its defaults)" if opts.tag == "defaults" else f"`a2c_cartpole.py` ({opts.tag})"
            if learner == "sb3" and env_id in recorded:
                name = f"SB3 2.9.2 A2C, RL Zoo's settings (recorded runs, {recorded[env_id][0]})"
            elif learner == "sb3":
                name = f"SB3 {__import__('stable_baselines3').__version__} A2C, RL Zoo's settings"
            values = [mine[seed] for seed in shown if seed in mine]
            row = [
                env_id,
                name,
                " / ".join(f"{mine[seed]:,.1f}" if seed in mine else "-" for seed in shown),
                f"{np.mean(values):,.1f} +/- {np.std(values):,.1f}",
            ]
            if worst:
                low = min(mine, key=mine.get)
                row.append(f"{mine[low]:,.1f} (seed {low})" if len(mine) > len(values) else "-")
            rows.append(row + [sps[learner], "" if rows and rows[-1][0] == env_id else zoo])
    return columns, rows, recorded


def save(results, speed, recorded, columns, rows, opts):
    """benchmarks/results/a2c-continuous.json, from the default configuration."""
    dates = ", ".join(sorted({date for date, _ in recorded.values()}))
    sb3 = ", same seeds."
    if recorded:
        sb3 = (
            f"; its rows are our recorded runs of it (SB3 2.9.2, {dates}), which do not depend on our code "
            "(`python benchmarks/bench_a2c_continuous.py --learners sb3` re-runs them)."
        )
    notes = [
        f"Final deterministic evaluation (20 episodes, observation statistics frozen) after 1M steps; "
        f"`a2c_cartpole.py` at its Box-action defaults on seeds {span(SEEDS)}, two runs at a time, one "
        "per core; the mean is of seeds 1-3, as SB3's. SB3's A2C runs RL Zoo's hyperparameters (Pendulum: 8 envs x 8 "
        "steps, gamma 0.9, gSDE, `VecNormalize`; HalfCheetah: A2C's defaults with `VecNormalize`)" + sb3,
        f"Training SPS: ours at its defaults and SB3's A2C at RL Zoo's settings trained side by side in this run, "
        f"{opts.sps_timesteps:,} steps of seed 1 each, one core and one torch thread each, evaluation excluded; the "
        "ratio is ours over SB3's. RL Zoo's column: its published benchmark.md (one agent; HalfCheetah v3 there).",
    ]
    runs = [
        dict(learner=learner, env_id=env_id, seed=seed, final=r["final"], sps=r["sps"])
        for (learner, env_id, seed), r in results.items()
    ]
    runs += [
        dict(learner=f"sb3 (recorded, {date})", env_id=env_id, seed=seed, final=final)
        for env_id, (date, kept) in recorded.items()
        for seed, final in kept.items()
    ]
    runs += [
        dict(
            learner="ours beside sb3",
            env_id=env_id,
            seed=1,
            steps=opts.sps_timesteps,
            sps=pair["ours"],
            sb3_sps=pair["sb3"],
        )
        for env_id, pair in speed.items()
    ]
    pendulum = np.mean([results[("ours", "Pendulum-v1", seed)]["final"] for seed in (1, 2, 3)])
    sb3_pendulum = np.mean(
        [
            r["final"]
            for r in runs
            if r["learner"].startswith("sb3") and r["env_id"] == "Pendulum-v1" and r["seed"] in (1, 2, 3)
        ]
    )
    readme = dict(
        task="Pendulum-v1 and HalfCheetah-v5, `a2c_cartpole.py` against SB3's A2C (RL Zoo's settings), 1M steps",
        result=f"Pendulum-v1 {pendulum:.1f}, mean of seeds 1-3 (SB3: {sb3_pendulum:.1f})",
        page="docs/a2c.md#against-stable-baselines3-on-pendulum-v1-and-halfcheetah-v5",
        order=7,
    )
    learning = [r["wall"] for r in results.values()]
    minutes = (sum(learning) / len(opts.cores) + sum(pair["wall"] for pair in speed.values())) / 60
    results_module.save(
        "a2c-continuous", minutes, table=dict(columns=columns, rows=rows, notes=notes), runs=runs, readme=readme
    )


def plot(results, opts):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(opts.envs), figsize=(5 * len(opts.envs), 3.6), squeeze=False)
    for ax, env_id in zip(axes[0], opts.envs):
        for learner, color in zip(opts.learners, ("tab:blue", "tab:orange")):
            for i, seed in enumerate(sorted(s for (name, env, s) in results if (name, env) == (learner, env_id))):
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
