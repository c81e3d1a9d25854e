"""Recurrent PPO on CartPole with the velocities hidden (cartpole-novel): ppo_puffer_async.py --lstm vs
sb3-contrib's RecurrentPPO with RL Zoo's tuned CartPoleNoVel-v1 settings, and the memoryless MLP control.

    pip install -e ".[bench]"          # stable-baselines3, sb3-contrib
    python benchmarks/bench_lstm_cartpole_novel.py --seeds 1 2 3 4 5
    python benchmarks/bench_lstm_cartpole_novel.py --learners lstm --seeds 11 12 13 14 15 16 17 18 --set gamma=0.99

Every learner: 100k steps; every ~10k steps a deterministic evaluation of 10 episodes on a separate env,
the LSTM state carried through each episode (and, for sb3-contrib, VecNormalize's statistics frozen).
Reported per seed: the first step with eval >= 475, the step after which every eval stays >= 475 ("stable
solve"), the final eval, and training SPS (wall time minus evaluation). One run, same machine.
--set NAME=VALUE changes one of our flags from its cartpole-novel default (a tuning sweep); evaluations stay
every 10k steps whatever the batch size.
"""

import argparse
import ast
import os
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ppo_puffer_async  # noqa: E402
from common.puffer_envs import make_cartpole_novel  # noqa: E402

TOTAL, EVAL_EVERY, EVAL_EPISODES = 100_000, 10_000, 10
FIXED = ("env_id", "seed", "lstm", "total_timesteps", "eval_freq", "eval_episodes", "checkpoint_freq")  # not for --set


def ours(seed, lstm, changes=None):
    """Our defaults for cartpole-novel (8 envs x 25 steps = 200 per update) with `changes`: an eval every
    10,000 steps."""
    args = ppo_puffer_async.args_for("cartpole-novel", **(changes or {}))
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
                ppo_puffer_async.args_for(
                    env_id="cartpole-novel",
                    seed=seed,
                    lstm=lstm,
                    total_timesteps=TOTAL,
                    eval_freq=EVAL_EVERY // batch,
                    eval_episodes=EVAL_EPISODES,
                    checkpoint_freq=0,
                    **(changes or {}),
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


def summary(evals):
    first = next((s for s, v in evals if v >= 475), None)
    stable = next((s for i, (s, v) in enumerate(evals) if all(w >= 475 for _, w in evals[i:])), None)
    return first, stable, evals[-1][1] if evals else float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--learners", nargs="+", default=["lstm", "sb3-contrib", "mlp"])
    parser.add_argument(
        "--set",
        nargs="+",
        default=[],
        metavar="NAME=VALUE",
        help="our flags changed from the cartpole-novel defaults, e.g. learning_rate=1e-3 gamma=0.99",
    )
    opts = parser.parse_args()
    changes = {}
    for item in opts.set:
        name, _, value = item.partition("=")
        if name not in ppo_puffer_async.Args.__dataclass_fields__ or not value:
            raise SystemExit(f"--set {item}: expected NAME=VALUE with NAME a field of ppo_puffer_async.Args")
        if name in FIXED:
            raise SystemExit(f"--set {name}: the benchmark sets it itself (the seed: --seeds; the LSTM: --learners)")
        try:
            changes[name] = ast.literal_eval(value)  # numbers, True/False, None
        except (ValueError, SyntaxError):
            changes[name] = value  # a word, e.g. advantage=lambda-return
    print(
        f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, torch {torch.__version__}, {TOTAL:,} steps per run"
        + (f"; ours with {changes}" if changes else "")
    )
    print("| learner | seed | first eval >= 475 | stable solve | final eval | train SPS |")
    print("|---|---|---|---|---|---|")
    for seed in opts.seeds:
        for learner in opts.learners:
            evals, sps, _ = sb3_contrib(seed) if learner == "sb3-contrib" else ours(seed, learner == "lstm", changes)
            first, stable, final = summary(evals)
            cells = [f"{x:,}" if x is not None else "-" for x in (first, stable)]
            print(f"| {learner} | {seed} | {cells[0]} | {cells[1]} | {final:.0f} | {sps:,.0f} |", flush=True)


if __name__ == "__main__":
    main()
