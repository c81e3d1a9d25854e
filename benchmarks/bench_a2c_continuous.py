"""The speed of a2c_cartpole.py with Box actions against Stable-Baselines3's A2C at RL Zoo's settings, side by side.
(Their learning: the suite `python benchmarks/launch.py a2c-continuous`.)

    pip install -e ".[bench]"
    python benchmarks/bench_a2c_continuous.py                     # the docs' table: ~5 min on 2 cores
    python benchmarks/bench_a2c_continuous.py --envs Pendulum-v1 --sps-timesteps 20000

SB3 2.9.2's A2C with RL Zoo's settings (rl-baselines3-zoo's hyperparams/a2c.yml at commit 22e3ff24): Pendulum-v1
with gSDE (log_std_init -2, no orthogonal init), 8 envs x 8 steps, gamma 0.9, lambda 0.9, vf_coef 0.4, RMSprop,
learning rate 7e-4 annealed linearly, VecNormalize (gamma 0.9); HalfCheetah (its HalfCheetah-v4 entry): VecNormalize
on A2C's defaults (1 env, 5 steps, 7e-4). Ours runs its defaults. Per env, ours and SB3 train side by side, one core
each, one torch thread each, --sps-timesteps steps of seed 1, evaluation time left out. The default configuration
writes benchmarks/results/a2c-continuous-speed.json, from which `python benchmarks/report.py` renders docs/a2c.md's
table.
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

from bench_classic_control import script_flags  # --set NAME=VALUE as the script's flags

import results as results_module  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EVAL_EVERY = 100_000
ENVS = ["Pendulum-v1", "HalfCheetah-v5"]
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
    parser.add_argument("--sps-timesteps", type=int, default=SPS_STEPS, help="steps of each side-by-side SPS run")
    parser.add_argument("--cores", type=int, nargs="+", default=[0, 1], help="SB3 on the first, ours on the last")
    parser.add_argument("--out", default="bench_results/a2c_continuous")
    parser.add_argument("--sb3-worker", nargs=4, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.sb3_worker:
        env_id, seed, total, out = opts.sb3_worker
        return sb3_run(env_id, int(seed), int(total), out)
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
        pair = speed_pair(env_id, opts.sps_timesteps, [], Path(opts.out), opts.cores)
        ratio = pair["ours"] / pair["sb3"]
        rows.append([env_id, f"{pair['ours']:,.0f}", f"{pair['sb3']:,.0f}", f"**{ratio:.2f}x**"])
        runs.append(dict(env_id=env_id, ours=pair["ours"], sb3=pair["sb3"]))
        print(f"| {' | '.join(rows[-1])} |", flush=True)
    print(results_module.markdown(columns, rows))
    if opts.envs == ENVS and opts.sps_timesteps == SPS_STEPS:
        notes = [
            f"Seed 1, {opts.sps_timesteps:,} steps each, ours and SB3 trained side by side, one core and one torch "
            "thread each, evaluation time left out."
        ]
        results_module.save(
            "a2c-continuous-speed",
            (time.time() - start) / 60,
            table=dict(columns=columns, rows=rows, notes=notes),
            runs=runs,
        )


if __name__ == "__main__":
    main()
