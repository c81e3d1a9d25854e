"""Stable-Baselines3's A2C and sb3-contrib's RecurrentPPO at RL Zoo's settings, writing TensorBoard events
with our scripts' tag names, so that benchmarks/launch.py runs them beside ours and benchmarks/compare.py reads both.

    python benchmarks/anchors/sb3.py --algo a2c --env-id CartPole-v1 --seed 1 --total-timesteps 100000
    python benchmarks/anchors/sb3.py --algo recurrentppo --env-id cartpole-novel --seed 1 --total-timesteps 100000

The settings are RL Zoo's (rl-baselines3-zoo's hyperparams/<algo>.yml at commit 22e3ff24) on SB3 2.9.2's defaults;
--total-timesteps replaces RL Zoo's budget (a linear schedule then runs over the given budget). Every --eval-every env
steps, and at the end: our scripts' evaluation (--eval-episodes episodes, each in its own env seeded seed + 10,000 + i,
deterministic actions, observation statistics frozen) as eval/return_mean and eval/return_std; each finished training
episode as charts/episodic_return and charts/episodic_length; training speed as perf/train_SPS (evaluation time left
out). Events go to runs/<env>__sb3_<algo>__<seed>__<time>/ under the working folder, as CleanRL's do.
Needs `pip install -e ".[bench]"`.
"""

import argparse
import os
import sys
import time

import numpy as np
import torch
from torch.utils.tensorboard import SummaryWriter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from random_play import make_env  # noqa: E402


def linear(rate: float):
    """RL Zoo's lin_<rate>: SB3 calls it with the progress remaining, 1 -> 0."""
    return lambda progress_remaining: rate * progress_remaining


# {(algo, env): (n_envs, normalize (observations, rewards), the algorithm's keyword arguments)}: RL Zoo's settings
SETTINGS = {
    ("a2c", "CartPole-v1"): (8, False, dict(ent_coef=0.0)),
    ("a2c", "Pendulum-v1"): (
        8,
        True,
        dict(
            n_steps=8,
            gae_lambda=0.9,
            vf_coef=0.4,
            gamma=0.9,
            ent_coef=0.0,
            max_grad_norm=0.5,
            use_rms_prop=True,
            normalize_advantage=False,
            learning_rate=linear(7e-4),
            use_sde=True,
            policy_kwargs=dict(log_std_init=-2, ortho_init=False),
        ),
    ),
    ("a2c", "HalfCheetah-v5"): (1, True, {}),  # RL Zoo's MuJoCo defaults: normalize, SB3's A2C defaults
    ("a2c", "LunarLander-v3"): (8, False, dict(n_steps=5, gamma=0.995, ent_coef=1e-5, learning_rate=linear(8.3e-4))),
}
# RL Zoo's CartPoleNoVel-v1 RecurrentPPO (hyperparams/ppo_lstm.yml), on every memory task: 8 envs, n_steps 32, batch
# 256, 20 epochs, gamma 0.98, lambda 0.8, lr and clip linear to 0, VecNormalize, LSTM 64 (the critic's too), ReLU
RECURRENT = dict(
    n_steps=32,
    batch_size=256,
    n_epochs=20,
    gamma=0.98,
    gae_lambda=0.8,
    ent_coef=0.0,
    learning_rate=linear(1e-3),
    clip_range=linear(0.2),
    policy_kwargs=dict(
        ortho_init=False,
        activation_fn=torch.nn.ReLU,
        lstm_hidden_size=64,
        enable_critic_lstm=True,
        net_arch=dict(pi=[64], vf=[64]),
    ),
)


def make_model(algo: str, env_id: str, seed: int):
    from stable_baselines3 import A2C
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    if algo == "recurrentppo":
        from sb3_contrib import RecurrentPPO

        env = make_vec_env(lambda: make_env(env_id), n_envs=8, seed=seed)
        box = len(env.observation_space.shape) == 1  # VecNormalize scales Box observations only
        env = VecNormalize(env, gamma=0.98, norm_obs=box)
        return RecurrentPPO("MlpLstmPolicy", env, seed=seed, device="cpu", verbose=0, **RECURRENT), env
    if (algo, env_id) not in SETTINGS:
        known = ", ".join(f"{a} {e}" for a, e in SETTINGS)
        raise SystemExit(f"error: --algo {algo} --env-id {env_id}: no RL Zoo settings here (known: {known})")
    n_envs, normalize, hyper = SETTINGS[(algo, env_id)]
    env = make_vec_env(env_id, n_envs=n_envs, seed=seed)
    if normalize:
        env = VecNormalize(env, gamma=hyper.get("gamma", 0.99))
    model = A2C("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **hyper)
    return model, env


def evaluate(model, env, env_id: str, episodes: int, seed: int) -> np.ndarray:
    """Our scripts' protocol: episode i in its own env seeded seed + i, deterministic actions, frozen statistics, a
    recurrent policy's state carried through the episode."""
    from stable_baselines3.common.vec_env import VecNormalize

    returns = []
    for i in range(episodes):
        eval_env = make_env(env_id)
        obs, _ = eval_env.reset(seed=seed + i)
        state = None
        start = np.ones(1, dtype=bool)
        total = 0.0
        done = False
        while not done:
            if isinstance(env, VecNormalize):
                obs = env.normalize_obs(obs)
            action, state = model.predict(obs, state=state, episode_start=start, deterministic=True)
            start = np.zeros(1, dtype=bool)
            obs, reward, terminated, truncated, _ = eval_env.step(action)
            total += float(reward)
            done = terminated or truncated
        eval_env.close()
        returns.append(total)
    return np.array(returns)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", choices=["a2c", "recurrentppo"], required=True)
    parser.add_argument("--env-id", required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--total-timesteps", type=int, required=True)
    parser.add_argument("--eval-every", type=int, default=10_000, help="env steps between evaluations")
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--torch-threads", type=int, default=1)
    args = parser.parse_args()
    from stable_baselines3.common.callbacks import BaseCallback

    torch.set_num_threads(args.torch_threads)
    model, env = make_model(args.algo, args.env_id, args.seed)
    run_name = f"{args.env_id}__sb3_{args.algo}__{args.seed}__{int(time.time())}"
    writer = SummaryWriter(os.path.join("runs", run_name))
    rows = "\n".join(f"|{key}|{value}|" for key, value in vars(args).items())
    writer.add_text("hyperparameters", f"|param|value|\n|-|-|\n{rows}")

    class Log(BaseCallback):
        def __init__(self):
            super().__init__()
            self.next_eval = args.eval_every
            self.eval_seconds = 0.0
            self.start = time.perf_counter()

        def write_eval(self):
            start = time.perf_counter()
            returns = evaluate(self.model, env, args.env_id, args.eval_episodes, args.seed + 10_000)
            writer.add_scalar("eval/return_mean", float(returns.mean()), self.num_timesteps)
            writer.add_scalar("eval/return_std", float(returns.std()), self.num_timesteps)
            self.eval_seconds += time.perf_counter() - start
            train_seconds = time.perf_counter() - self.start - self.eval_seconds
            writer.add_scalar("perf/train_SPS", self.num_timesteps / train_seconds, self.num_timesteps)
            print(f"step {self.num_timesteps:,}: eval/return_mean {returns.mean():.1f}", flush=True)

        def _on_step(self):
            for info in self.locals["infos"]:
                if "episode" in info:
                    writer.add_scalar("charts/episodic_return", info["episode"]["r"], self.num_timesteps)
                    writer.add_scalar("charts/episodic_length", info["episode"]["l"], self.num_timesteps)
            if self.num_timesteps >= self.next_eval:
                self.write_eval()
                self.next_eval += args.eval_every
            return True

    callback = Log()
    model.learn(args.total_timesteps, callback=callback)
    if callback.num_timesteps % args.eval_every:  # the budget's end, where the last evaluation did not fall
        callback.write_eval()
    writer.close()
    env.close()


if __name__ == "__main__":
    main()
