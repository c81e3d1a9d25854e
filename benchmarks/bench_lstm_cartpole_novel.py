"""The speed of ppo_puffer_async.py --lstm against sb3-contrib's RecurrentPPO (RL Zoo's tuned CartPoleNoVel-v1
settings, its hyperparams/ppo_lstm.yml at commit 22e3ff2) on CartPole with the velocities hidden, side by side.
(Their learning, with the memoryless control: the suite `python benchmarks/launch.py cartpole-novel`.)

    pip install -e ".[bench]"          # stable-baselines3, sb3-contrib
    python benchmarks/bench_lstm_cartpole_novel.py            # the docs' table: ~3 min
    python benchmarks/bench_lstm_cartpole_novel.py --sps-timesteps 10000

Ours --lstm at its cartpole-novel preset and sb3-contrib train side by side, seed 1, --sps-timesteps steps each, one
on each of --cores, one torch thread each, both evaluating every 10k steps (evaluation time left out of their
training SPS). The default configuration writes benchmarks/results/cartpole-novel-speed.json, from which
`python benchmarks/report.py` renders docs/ppo_puffer_async.md's table.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ppo_puffer_async  # noqa: E402
import results as results_module  # noqa: E402
from common import presets  # noqa: E402
from common.puffer_envs import make_cartpole_novel  # noqa: E402

TOTAL, EVAL_EVERY, EVAL_EPISODES = 100_000, 10_000, 10
SPS_STEPS = 50_000  # each side of the SPS pair


def ours(seed, lstm, changes=None, total=TOTAL):
    """Our defaults for cartpole-novel (8 envs x 25 steps = 200 per update) with `changes`: an eval every
    10,000 steps."""
    args = ppo_puffer_async.Args(**{**presets.ppo_puffer_async("cartpole-novel"), **(changes or {})})
    batch = args.batch_size or args.num_envs * args.horizon
    if EVAL_EVERY % batch:
        raise SystemExit(f"--set: an update of {batch} steps does not divide the {EVAL_EVERY:,}-step eval interval")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            start = time.perf_counter()
            result = ppo_puffer_async.train(
                ppo_puffer_async.Args(
                    **{
                        **presets.ppo_puffer_async("cartpole-novel"),
                        "seed": seed,
                        "lstm": lstm,
                        "total_timesteps": total,
                        "eval_freq": EVAL_EVERY // batch,
                        "eval_episodes": EVAL_EPISODES,
                        "checkpoint_freq": 0,
                        **(changes or {}),
                    }
                )
            )
            wall = time.perf_counter() - start
            events = EventAccumulator(result["run_dir"], size_guidance={"scalars": 0})
            events.Reload()
            evals = [(e.step, e.value) for e in events.Scalars("eval/return_mean")]
        finally:
            os.chdir(cwd)
    return evals, result["sps"], wall


def sb3_contrib(seed, make_env=make_cartpole_novel, total=TOTAL, eval_every=EVAL_EVERY, eval_episodes=EVAL_EPISODES):
    """RL Zoo's CartPoleNoVel-v1 RecurrentPPO: 8 envs, n_steps 32, batch 256, 20 epochs, gamma 0.98, lambda 0.8,
    lr and clip linear to 0, VecNormalize, LSTM 64 (critic LSTM too), ReLU, no ortho init. `make_env`: any
    Gymnasium env (bench_a2c_memory.py runs POPGym's tasks with these settings)."""
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    torch.set_num_threads(1)
    train_envs, eval_envs = make_vec_env(make_env, n_envs=8, seed=seed), make_vec_env(make_env, seed=seed + 10_000)
    box = len(train_envs.observation_space.shape) == 1  # VecNormalize scales Box observations only (POPGym's: Discrete)
    env = VecNormalize(train_envs, gamma=0.98, norm_obs=box)
    eval_env = VecNormalize(eval_envs, training=False, norm_obs=box, norm_reward=False)
    linear = lambda start: lambda progress: progress * start  # noqa: E731 (progress goes 1 -> 0)
    model = RecurrentPPO(
        "MlpLstmPolicy",
        env,
        n_steps=32,
        batch_size=256,
        n_epochs=20,
        gamma=0.98,
        gae_lambda=0.8,
        ent_coef=0.0,
        learning_rate=linear(1e-3),
        clip_range=linear(0.2),
        seed=seed,
        device="cpu",
        policy_kwargs=dict(
            ortho_init=False,
            activation_fn=torch.nn.ReLU,
            lstm_hidden_size=64,
            enable_critic_lstm=True,
            net_arch=dict(pi=[64], vf=[64]),
        ),
    )
    evals, eval_time = [], [0.0]

    def evaluate():
        start = time.perf_counter()
        if box:
            eval_env.obs_rms = env.obs_rms  # the training statistics, frozen
        returns = []
        for _ in range(eval_episodes):
            obs, state, done, ret = eval_env.reset(), None, np.ones(1, dtype=bool), 0.0
            while True:
                action, state = model.predict(obs, state=state, episode_start=done, deterministic=True)
                obs, reward, done, _ = eval_env.step(action)
                ret += eval_env.get_original_reward()[0]
                if done[0]:
                    break
            returns.append(ret)
        eval_time[0] += time.perf_counter() - start
        return float(np.mean(returns))

    class Every(BaseCallback):
        def _on_step(self):
            if self.num_timesteps % eval_every < 8:  # 8 envs: the first call past each multiple
                evals.append((self.num_timesteps, evaluate()))
            return True

    start = time.perf_counter()
    model.learn(total, callback=Every())
    if not evals or evals[-1][0] < total:  # and a final evaluation after the last step
        evals.append((model.num_timesteps, evaluate()))
    wall = time.perf_counter() - start
    return evals, total / (wall - eval_time[0]), wall


def speed_worker(learner: str, steps: int, out: str) -> None:
    """One side of the SPS pair, in its own (pinned) process, seed 1: writes {"sps"} to `out`."""
    torch.set_num_threads(1)
    _, sps, _ = sb3_contrib(1, total=steps) if learner == "sb3-contrib" else ours(1, True, total=steps)
    Path(out).write_text(json.dumps({"sps": sps}))


def speed_pair(steps: int, cores) -> dict:
    """Ours --lstm and sb3-contrib at the same time, sb3-contrib on the first of `cores`, ours on the last (one core
    given: one after the other), one torch thread each: {"lstm", "sb3-contrib", "wall"} training SPS."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    def one(learner, core, folder):
        out = Path(folder) / f"{learner}.json"
        command = [
            "taskset",
            "-c",
            str(core),
            sys.executable,
            os.path.abspath(__file__),
            "--speed-worker",
            learner,
            str(steps),
            str(out),
        ]
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=folder)
        if done.returncode != 0:
            raise SystemExit(f"{learner} (SPS pair) failed:\n{done.stderr[-2000:]}")
        return json.loads(out.read_text())["sps"]

    start = time.time()
    with tempfile.TemporaryDirectory() as folder, ThreadPoolExecutor(2 if len(set(cores)) > 1 else 1) as pool:
        theirs, mine = pool.submit(one, "sb3-contrib", cores[0], folder), pool.submit(one, "lstm", cores[-1], folder)
        return {"lstm": mine.result(), "sb3-contrib": theirs.result(), "wall": time.time() - start}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sps-timesteps", type=int, default=SPS_STEPS, help="steps of each side of the SPS pair")
    parser.add_argument("--cores", type=int, nargs="+", default=[0, 1], help="the SPS pair: sb3-contrib on the first")
    parser.add_argument("--speed-worker", nargs=3, help=argparse.SUPPRESS)  # internal: one side of the SPS pair
    opts = parser.parse_args()
    if opts.speed_worker:
        learner, steps, out = opts.speed_worker
        return speed_worker(learner, int(steps), out)
    start = time.time()
    pair = speed_pair(opts.sps_timesteps, opts.cores)
    ratio = pair["lstm"] / pair["sb3-contrib"]
    version = __import__("sb3_contrib").__version__
    columns = ["learner", "training SPS, side by side", "ratio"]
    rows = [
        ["`ppo_puffer_async.py --lstm`, its cartpole-novel preset", f"{pair['lstm']:,.0f}", f"**{ratio:.2f}x**"],
        [f"sb3-contrib {version} RecurrentPPO, RL Zoo's settings", f"{pair['sb3-contrib']:,.0f}", ""],
    ]
    print(results_module.markdown(columns, rows))
    if opts.sps_timesteps == SPS_STEPS:
        notes = [
            f"Seed 1, {opts.sps_timesteps:,} steps each, trained side by side, one core and one torch thread each, "
            "evaluation time left out; the ratio is ours over sb3-contrib's."
        ]
        runs = [dict(learner=learner, sps=pair[learner]) for learner in ("lstm", "sb3-contrib")]
        results_module.save(
            "cartpole-novel-speed",
            (time.time() - start) / 60,
            table=dict(columns=columns, rows=rows, notes=notes),
            runs=runs,
        )


if __name__ == "__main__":
    main()
