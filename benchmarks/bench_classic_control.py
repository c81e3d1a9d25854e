"""Both scripts that take Gymnasium ids on a classic-control suite: final greedy evaluation (20 episodes) after
500k steps, 3 seeds each, beside CleanRL's published ppo.py figures and RL Zoo's tuned A2C/PPO agents, and a
learning-curve picture (greedy evaluations every ~25k steps).

    python benchmarks/bench_classic_control.py                          # the docs' table; ~11 min on 2 cores
    python benchmarks/bench_classic_control.py --envs Acrobot-v1 --seeds 1 --cores 0
    python benchmarks/bench_classic_control.py --scripts ppo_puffer_async --set norm_obs=False --tag no-norm
    python benchmarks/bench_classic_control.py --plot docs/classic_control.png

Every run is a subprocess of the script at its defaults (plus --set), pinned to one core, in its own folder
under --out; a finished run's result is kept there, so rerunning the command only runs what is missing
(runs are deterministic per seed on CPU). Needs `pip install -e ".[bench]"` (matplotlib).

The default configuration (no flag but --cores, --out or --plot) also writes benchmarks/results/classic-control.json,
from which `python benchmarks/report.py` renders docs/classic_control.md's table and the README's row; any other
run only prints its table.
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

import results as results_module  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ENVS = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "LunarLander-v3"]
# Evaluations every ~25k steps: a2c_cartpole.py's updates are 16 x 5 = 80 steps, ppo_puffer_async.py's 8 x 64.
EVAL_FREQ = {"a2c_cartpole": 312, "ppo_puffer_async": 49}
# Published figures (mean +/- std; what each measures differs, see docs/classic_control.md):
# CleanRL's docs/rl-algorithms/ppo.md at commit fe8d8a03 (the runs of its benchmark/ppo.sh: cleanrl/ppo.py at its
# defaults, 500k steps, 3 seeds): the episodic return of training episodes at the end of training.
CLEANRL_PPO = {"CartPole-v1": (490.04, 6.12), "Acrobot-v1": (-86.36, 1.32), "MountainCar-v0": (-200.00, 0.00)}
# RL Zoo (github.com/DLR-RM/rl-baselines3-zoo, benchmark.md at commit 22e3ff24): one tuned agent each, deterministic
# evaluation; (mean, std, steps).
RL_ZOO_A2C = {
    "CartPole-v1": (500.0, 0.0, "500k"),
    "Acrobot-v1": (-83.353, 17.213, "500k"),
    "MountainCar-v0": (-111.263, 24.087, "1M"),
    "LunarLander-v3": (155.751, 80.419, "200k, v2"),
}
# Our run of SB3 2.9.2's A2C with RL Zoo's LunarLander settings (hyperparams/a2c.yml), measured as this table is
# (500k steps, final deterministic evaluation of 20 episodes), recorded: 2026-11-25, commit 33b473c, by `python
# benchmarks/bench_a2c_continuous.py --envs LunarLander-v3 --learners sb3 --total-timesteps 500000` (which re-runs it).
# It does not depend on our code, so it is not re-run here. {seed: final}
SB3_A2C_LUNARLANDER_RECORDED = {1: -49.9, 2: 52.5, 3: 17.4}
RL_ZOO_PPO = {
    "CartPole-v1": (500.0, 0.0, "100k"),
    "Acrobot-v1": (-73.506, 18.201, "1M"),
    "MountainCar-v0": (-110.423, 19.473, "1M"),
    "LunarLander-v3": (242.119, 31.823, "1M, v2"),
}


def script_flags(script: str, settings) -> list:
    """--set NAME=VALUE pairs as the script's command line: a plain bool is --name or --no-name (tyro's form)."""
    sys.path.insert(0, str(ROOT))
    fields = __import__(script).Args.__dataclass_fields__
    flags = []
    for name, value in settings:
        if name not in fields:
            raise SystemExit(f"--set {name}={value}: {script}.py has no flag --{name.replace('_', '-')}")
        if fields[name].type is bool:
            flags.append(f"--{'' if value == 'True' else 'no-'}{name.replace('_', '-')}")
        else:
            flags += [f"--{name.replace('_', '-')}", value]
    return flags


def run_one(script, env_id, seed, total, settings, folder, core, eval_freq=None, eval_episodes=20):
    """Runs one training (or reuses its saved result): {"final", "curve", "sps", "wall"}."""
    result_file = folder / "result.json"
    if result_file.exists():
        return json.loads(result_file.read_text())
    folder.mkdir(parents=True, exist_ok=True)
    flags = [
        "--env-id",
        env_id,
        "--seed",
        str(seed),
        "--total-timesteps",
        str(total),
        "--eval-episodes",
        str(eval_episodes),
        "--eval-freq",
        str(eval_freq or EVAL_FREQ[script]),
        "--checkpoint-freq",
        "0",
    ]
    flags += script_flags(script, settings)
    command = ["taskset", "-c", str(core), sys.executable, str(ROOT / f"{script}.py"), *flags]
    start = time.time()
    out = subprocess.run(
        command, cwd=folder, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}
    )
    (folder / "log.txt").write_text(out.stdout + out.stderr)
    if out.returncode != 0:
        raise SystemExit(f"{script} {env_id} seed {seed} failed:\n{out.stderr[-2000:]}")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(glob.glob(str(folder / "runs" / "*"))[0], size_guidance={"scalars": 0}).Reload()
    curve = [(e.step, e.value) for e in events.Scalars("eval/return_mean")]
    result = {
        "final": curve[-1][1],
        "curve": curve,
        "sps": events.Scalars("charts/SPS")[-1].value,
        "wall": time.time() - start,
    }
    result_file.write_text(json.dumps(result))
    return result


def fmt(mean, std):
    return f"{mean:.1f} +/- {std:.1f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=ENVS)
    parser.add_argument("--scripts", nargs="+", default=["ppo_puffer_async", "a2c_cartpole"], choices=list(EVAL_FREQ))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--total-timesteps", type=int, default=500_000)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a flag of the script(s) for every run, e.g. --set norm_obs=False",
    )
    parser.add_argument("--tag", default="defaults", help="name of this configuration (its own result folders)")
    parser.add_argument("--cores", type=int, nargs="+", default=[0, 1], help="one run at a time on each core")
    parser.add_argument("--out", default="bench_results/classic_control")
    parser.add_argument("--plot", help="also draw the learning curves of --tag into this PNG")
    opts = parser.parse_args()
    settings = []
    for item in opts.set:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SystemExit(f"--set {item}: expected NAME=VALUE")
        settings.append((name, value))

    jobs = [(script, env_id, seed) for env_id in opts.envs for script in opts.scripts for seed in opts.seeds]
    free = list(opts.cores)

    def work(job):
        core = free.pop()
        try:
            script, env_id, seed = job
            folder = Path(opts.out) / opts.tag / script / env_id / str(seed)
            return job, run_one(script, env_id, seed, opts.total_timesteps, settings, folder, core)
        finally:
            free.append(core)

    results = {}
    with ThreadPoolExecutor(len(opts.cores)) as pool:
        for job, result in pool.map(work, jobs):
            results[job] = result
            print(
                f"  {job[0]:<17} {job[1]:<15} seed {job[2]}: final {result['final']:8.1f}, "
                f"SPS {result['sps']:7,.0f}, {result['wall']:5.0f} s",
                flush=True,
            )

    print(
        f"\n{opts.tag}: final greedy evaluation, 20 episodes, after {opts.total_timesteps:,} steps "
        f"(seeds {' '.join(map(str, opts.seeds))}); {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores"
    )
    seeds = " / ".join(map(str, opts.seeds))
    columns = [
        "env",
        "script",
        f"seeds {seeds}",
        "mean +/- std",
        "training SPS (mean)",
        "CleanRL's ppo.py (published)",
        "RL Zoo, the same algorithm (published)",
    ]
    rows = []
    for env_id in opts.envs:
        for script in opts.scripts:
            runs = [results[(script, env_id, seed)] for seed in opts.seeds]
            finals = [run["final"] for run in runs]
            ppo = script == "ppo_puffer_async"
            zoo = (RL_ZOO_PPO if ppo else RL_ZOO_A2C).get(env_id)
            rows.append(
                [
                    env_id,
                    f"`{script}.py`",
                    " / ".join(f"{f:.1f}" for f in finals),
                    fmt(np.mean(finals), np.std(finals)),
                    f"{np.mean([r['sps'] for r in runs]):,.0f}",
                    fmt(*CLEANRL_PPO[env_id]) if ppo and env_id in CLEANRL_PPO else "-",
                    f"{'PPO' if ppo else 'A2C'} {fmt(*zoo[:2])} ({zoo[2]})" if zoo else "-",
                ]
            )
        recorded = [SB3_A2C_LUNARLANDER_RECORDED.get(seed) for seed in opts.seeds]
        if (
            (env_id, opts.total_timesteps) == ("LunarLander-v3", 500_000)
            and "a2c_cartpole" in opts.scripts
            and all(recorded)
        ):
            rows.append(
                [
                    env_id,
                    "SB3 2.9.2 A2C, RL Zoo's settings (recorded run, 2026-11-25)",
                    " / ".join(f"{f:.1f}" for f in recorded),
                    fmt(np.mean(recorded), np.std(recorded)),
                    "-",
                    "-",
                    f"A2C {fmt(*RL_ZOO_A2C[env_id][:2])} ({RL_ZOO_A2C[env_id][2]})",
                ]
            )
    print(results_module.markdown(columns, rows))
    default = (opts.envs, opts.scripts, opts.seeds) == (ENVS, ["ppo_puffer_async", "a2c_cartpole"], [1, 2, 3])
    if default and opts.total_timesteps == 500_000 and opts.tag == "defaults" and not settings:
        notes = [
            "Final greedy evaluation (20 episodes, observation statistics frozen) after 500k steps at each script's "
            "defaults (`a2c_cartpole.py` on LunarLander-v3: its own preset, in common/presets.py), two runs at a "
            "time, one per core; training SPS as the script reports it. SB3's row: our recorded run of SB3's A2C "
            "with RL Zoo's LunarLander settings, measured the same way (`python benchmarks/bench_a2c_continuous.py "
            "--envs LunarLander-v3 --learners sb3 --total-timesteps 500000` re-runs it).",
            "Published columns: CleanRL's `ppo.py` (its docs: the return of training episodes at the end of "
            "training, 3 seeds); RL Zoo's tuned agent of the same algorithm (its benchmark.md: one agent, "
            "deterministic evaluation, at the steps shown; LunarLander there is v2). Other measurements than ours: "
            "reference levels, not a race.",
        ]
        mountain = np.mean([results[("ppo_puffer_async", "MountainCar-v0", seed)]["final"] for seed in opts.seeds])
        readme = dict(
            task="Classic control (CartPole, Acrobot, MountainCar, LunarLander), both scripts, 500k steps",
            result=f"MountainCar-v0, `ppo_puffer_async.py`: {mountain:.1f} (CleanRL's `ppo.py`: "
            f"{CLEANRL_PPO['MountainCar-v0'][0]:.1f})",
            page="docs/classic_control.md",
            order=5,
        )
        minutes = sum(result["wall"] for result in results.values()) / 60 / len(opts.cores)
        runs = [
            dict(script=script, env_id=env_id, seed=seed, final=r["final"], sps=r["sps"])
            for (script, env_id, seed), r in results.items()
        ]
        runs += [
            dict(
                script="SB3 A2C, RL Zoo's settings (recorded run, 2026-11-25)",
                env_id="LunarLander-v3",
                seed=seed,
                final=final,
            )
            for seed, final in SB3_A2C_LUNARLANDER_RECORDED.items()
        ]
        results_module.save(
            "classic-control", minutes, table=dict(columns=columns, rows=rows, notes=notes), runs=runs, readme=readme
        )
    if opts.plot:
        plot(results, opts, opts.plot)


def plot(results, opts, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(opts.envs), figsize=(4.2 * len(opts.envs), 3.4), squeeze=False)
    for ax, env_id in zip(axes[0], opts.envs):
        for script, color in zip(opts.scripts, ("tab:blue", "tab:orange")):
            curves = [results[(script, env_id, seed)]["curve"] for seed in opts.seeds]
            steps = [s for s, _ in curves[0]]
            values = np.array([[v for _, v in curve[: len(steps)]] for curve in curves])
            ax.plot(steps, values.mean(0), color=color, label=script)
            ax.fill_between(steps, values.min(0), values.max(0), color=color, alpha=0.2)
        if env_id in CLEANRL_PPO:
            ax.axhline(CLEANRL_PPO[env_id][0], color="gray", linestyle="--", linewidth=1, label="CleanRL ppo.py")
        ax.set_title(env_id)
        ax.set_xlabel("environment steps")
    axes[0][0].set_ylabel(f"greedy eval return (mean, min-max of {len(opts.seeds)} seeds)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
