"""Synchronous A2C (Mnih et al. 2016; as in Stable-Baselines3's a2c/a2c.py and skrl's A2C) on any Gymnasium env.

Read top to bottom: Args and defaults, network, rollout, GAE, loss, evaluation, train(). The run's plumbing
(checkpoints, --resume, Ctrl-C, torchrun) is common/run.py's; everything that learns is here. Actions: Discrete,
MultiDiscrete (a categorical per dimension) or Box (a diagonal Gaussian); observations: any space that flattens
into a vector (common/gym_envs.py); --lstm adds memory (an LSTM, or a GRU, after the MLP). Episode ends, evaluation
and Box actions:
  * Gymnasium 1.x vector envs reset on the *next* step by default; ours (common/gym_envs.py) resets in the same
    step, as gymnasium's SAME_STEP mode does, and hands over the true final observation;
  * time-limit truncation is not termination: the truncated step's reward gets `gamma * V(final_obs)`
    folded in (as SB3's common/on_policy_algorithm.py does), termination bootstraps nothing;
  * evaluation uses the training run's observation statistics, frozen, never its own;
  * a Gaussian's log-probability is that of the action it sampled; only the env sees it clipped to bounds, and
    its mean stays inside them (tanh), so a saturated policy still tries actions on both sides of its bound.

    python a2c_cartpole.py                        # trains CartPole-v1, evaluates as it goes
    python a2c_cartpole.py --env-id Acrobot-v1 --total-timesteps 500000
    python a2c_cartpole.py --env-id HalfCheetah-v5                 # Box actions: the continuous defaults
    python a2c_cartpole.py --eval-checkpoint runs/<run>/a2c_cartpole.pt --eval-episodes 20

Other projects named in this file are read at: Stable-Baselines3 (SB3) 2.9.2, skrl 1.4.3 (its A2C:
skrl/agents/torch/a2c/a2c.py), CleanRL at commit fe8d8a03, RL Zoo (rl-baselines3-zoo) at commit 22e3ff24,
PufferLib 3.0.0.
"""

import contextlib
import os
import random
import sys
from dataclasses import dataclass
from typing import Literal, Optional

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import tyro
from torch.distributions import Categorical, Normal

from common import distributed, logs, presets, run
from common.gym_envs import finished_episodes, make_gym_vector_env
from common.logs import Progress, log_eval, print_end, report, save_video, video_paths
from common.normalize import RewardScaler, RunningMeanStd, normalize_obs

ACTIONS = (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.Box)


@dataclass
class Args(run.RunArgs):
    # The run's flags (--seed, --device, --checkpoint-freq, --resume, --eval-checkpoint, ...) are RunArgs's. The
    # defaults below are CartPole-v1's preset; every other env's is in common/presets.py, and `--env-id X --help`
    # shows X's.
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment, part of the run name"""
    env_id: str = "CartPole-v1"
    """a Gymnasium id: Discrete, MultiDiscrete or Box actions; observations flattened (Box, Dict, Discrete...)"""
    total_timesteps: int = 100_000
    """environment steps of training (on --resume: the saved total unless given)"""
    num_envs: int = 16
    """the number of parallel environments, per rank under torchrun"""
    num_steps: int = 5
    """the rollout length: steps per env per update, SB3's n_steps (a2c/a2c.py)"""
    learning_rate: float = 1e-3
    """the learning rate of the optimizer"""
    optimizer: Literal["rmsprop", "adam"] = "rmsprop"
    """RMSprop(alpha=0.99, eps=1e-5) as in SB3's a2c/a2c.py, or Adam(eps=1e-5)"""
    anneal_lr: bool = True
    """linearly anneal the learning rate to 0 over the run"""
    gamma: float = 0.99
    """the discount factor"""
    gae_lambda: float = 1.0
    """the GAE lambda; 1.0: n-step returns, as in classic A2C"""
    vf_coef: float = 1.0
    """the value-loss coefficient, on half the squared error as in CleanRL's ppo.py: SB3's vf_coef 0.5 on plain MSE
    is our 1.0; skrl's A2C (plain MSE at weight 1, no coefficient) is our 2.0"""
    ent_coef: float = 0.0
    """the entropy-bonus coefficient"""
    max_grad_norm: float = 0.5
    """the maximum global gradient norm (clipping)"""
    norm_adv: bool = False
    """normalize advantages per mini-batch"""
    norm_obs: bool = True
    """normalize observations by their running mean/std, clipped to +-10 (frozen for evaluation, saved)"""
    norm_reward: bool = False
    """divide rewards by the running std of the discounted return, clipped to +-10, as SB3's VecNormalize does"""
    reward_scale: float = 0.1
    """multiply rewards by this for learning; episode returns are logged unscaled"""
    mini_batches: int = 1
    """gradient steps per update, each on a 1/mini_batches share of the rollout (skrl's mini_batches)"""
    hidden_size: int = 64
    """width of the two shared hidden layers, and of the LSTM's state with --lstm"""
    lstm: bool = False
    """an LSTM between the shared MLP and the heads: a policy with memory, for partially observed tasks (POPGym)"""
    rnn_type: Literal["lstm", "gru"] = "lstm"
    """with --lstm: its recurrent cell, an LSTM or a GRU (one state vector, three quarters of the weights)"""
    log_std_init: float = -1.0
    """Box actions: the Gaussian's initial log standard deviation (a parameter, not a function of the state)"""
    amp: bool = False
    """mixed precision: bfloat16 autocast on the CPU, float16 with a gradient scaler on CUDA; float32 weights"""
    episode_points: Literal["each", "mean"] = "each"
    """charts/episodic_return and charts/episodic_length: a point per finished episode, as CleanRL's (each), or the
    mean of the episodes finished in each log interval (mean: where a point each would cost more than 3% of the run's
    speed, as Tetris's many games do: docs/design.md)"""
    log_freq: int = 10
    """write the loss scalars every this many updates, with a point per episode finished since (at its update's step)"""
    eval_freq: int = 50
    """evaluate (--eval-actions, frozen observation statistics) every this many updates and after the last"""
    eval_episodes: int = 10
    """episodes per evaluation, on the envs seeded seed + 10,000 + i: the same episodes at every evaluation"""
    eval_actions: Literal["greedy", "sampled"] = "greedy"
    """evaluate with the most likely action (a Gaussian's mean) or by sampling, from a random stream of its own"""
    eval_max_steps: int = 1_000
    """evaluation episodes of an env with no time limit of its own (CliffWalking) are truncated at this many steps"""
    checkpoint_freq: int = 500
    """save runs/<run>/a2c_cartpole.pt every this many updates (0: only at the end and on Ctrl-C)"""


# Args is the Discrete and MultiDiscrete set (docs/classic_control.md has it on Acrobot-v1 and MountainCar-v0 too).
# --reward-scale 0.1: CartPole's discounted returns reach ~100, and with a shared backbone a value loss on targets
# that large swamps the policy gradient. Box actions, POPGym's memory tasks, LunarLander-v3 and Pendulum-v1 have
# presets of their own: A2C_CARTPOLE in common/presets.py (docs/a2c.md, "Defaults, and why").


def validate_args(args: Args) -> None:
    """Bad flags fail here, before any network is built, naming the flag to change."""
    run.check_flags(args, at_least_one="num_envs num_steps mini_batches hidden_size log_freq", positive="learning_rate")
    if args.lstm and args.num_envs % args.mini_batches:  # a mini-batch of whole env sequences
        raise ValueError(f"--mini-batches {args.mini_batches} must divide --num-envs {args.num_envs} with --lstm")
    if (args.num_envs * args.num_steps) % args.mini_batches:
        rows = args.num_envs * args.num_steps
        raise ValueError(f"--mini-batches {args.mini_batches} must divide num_envs * num_steps = {rows}")
    if args.rnn_type == "gru" and not args.lstm:  # alone it would silently train a policy without memory
        raise ValueError("--rnn-type gru picks the cell of the recurrent policy: add --lstm")


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    """Shared MLP backbone (with --lstm, then an LSTM or GRU) with a policy head and a value head. The policy is a
    categorical per action dimension (Discrete: one; MultiDiscrete: one per dimension, log-probabilities and
    entropies summed) or, for Box actions, a diagonal Gaussian whose log-std is a parameter of its own, not a
    function of the state (as SB3's common/distributions.py and CleanRL's cleanrl/ppo_continuous_action.py)."""

    def __init__(self, obs_dim: int, action_space, args: Args):
        super().__init__()
        self.backbone = nn.Sequential(
            layer_init(nn.Linear(obs_dim, args.hidden_size)),
            nn.Tanh(),
            layer_init(nn.Linear(args.hidden_size, args.hidden_size)),
            nn.Tanh(),
        )
        box = isinstance(action_space, gym.spaces.Box)
        if isinstance(action_space, gym.spaces.Discrete):
            self.nvec = [int(action_space.n)]  # the categoricals' sizes: one for Discrete,
        else:  # one per dimension for MultiDiscrete, none for Box
            self.nvec = [] if box else action_space.nvec.tolist()
        outputs = action_space.shape[0] if box else sum(self.nvec)
        # Small policy-head init keeps the first policy near uniform (or the Gaussian near its mean of 0); value
        # head at unit scale: SB3's orthogonal gains (common/policies.py).
        self.policy_head = layer_init(nn.Linear(args.hidden_size, outputs), std=0.01)
        self.value_head = layer_init(nn.Linear(args.hidden_size, 1), std=1.0)
        self.log_std = nn.Parameter(torch.full((outputs,), args.log_std_init)) if box else None
        # A bounded Box's mean is kept inside its bounds, mid + half * tanh, as in skrl's Pendulum examples (2 * tanh,
        # docs/source/examples/gymnasium/torch_gymnasium_pendulum_ppo.py): a mean far outside clips every sample to
        # one action, and learning stops (docs/a2c.md, "Why the mean is bounded").
        low = action_space.low if box else np.inf
        high = action_space.high if box else np.inf
        self.bounded = bool(np.isfinite(low).all() and np.isfinite(high).all())
        if self.bounded:  # not saved: the env's action space gives them
            self.register_buffer("action_mid", torch.as_tensor((high + low) / 2), persistent=False)
            self.register_buffer("action_half", torch.as_tensor((high - low) / 2), persistent=False)
        # Built last, so the layers above draw the same initial weights with --lstm as without.
        cell = nn.GRUCell if args.rnn_type == "gru" else nn.LSTMCell
        self.lstm = cell(args.hidden_size, args.hidden_size) if args.lstm else None

    def initial_state(self, n: int, device: torch.device):
        """The recurrent state (h, c) of n fresh episodes: zeros; None without --lstm."""
        if self.lstm is None:
            return None
        return tuple(torch.zeros(n, self.lstm.hidden_size, device=device) for _ in range(2))

    def forward(self, x: torch.Tensor, state=None, dones=None):
        """(policy output: logits, or the Gaussian's mean; V(x); the recurrent state after x, None without --lstm).

        With --lstm, x is one step (envs, obs_dim) or a rollout (envs, steps, obs_dim), run a cell step at a time from
        `state` (h, c), zeroed after step t where dones[:, t] = 1 as the rollout zeroes it (forget()): the update
        replays what the rollout saw, through each whole (short) rollout from its first state: no burn-in, no TBPTT."""
        hidden = self.backbone(x)
        if self.lstm is not None:
            steps = hidden if x.dim() == 3 else hidden[:, None]  # (envs, steps, hidden)
            h, c = state
            outputs = []
            for t in range(steps.shape[1]):
                if isinstance(self.lstm, nn.GRUCell):  # a GRU's state is h alone: it keeps (h, c) with c zero
                    h = self.lstm(steps[:, t], h)
                else:
                    h, c = self.lstm(steps[:, t], (h, c))
                outputs.append(h)
                if dones is not None:  # the episode ended after step t: the next one starts from zeros
                    h = h * (1 - dones[:, t, None])
                    c = c * (1 - dones[:, t, None])
            hidden = torch.stack(outputs, 1) if x.dim() == 3 else h
            state = (h, c)
        out = self.policy_head(hidden)
        if self.bounded:
            out = self.action_mid + self.action_half * torch.tanh(out)
        return out, self.value_head(hidden).squeeze(-1), state

    def sample(self, out: torch.Tensor) -> torch.Tensor:
        if self.log_std is not None:
            return out + self.log_std.exp() * torch.randn_like(out)
        # Gumbel-max sampling, argmax(logits + Gumbel noise), draws from softmax(logits) (a test checks it) without
        # building a Categorical at every rollout step, which the default run pays for in speed (docs/benchmarks.md,
        # "The speed tricks the scripts keep").
        noisy = out - torch.empty_like(out).exponential_().log()
        if len(self.nvec) == 1:
            return noisy.argmax(dim=-1)
        return torch.stack([chunk.argmax(dim=-1) for chunk in noisy.split(self.nvec, dim=-1)], dim=-1)

    def greedy(self, out: torch.Tensor) -> torch.Tensor:
        if self.log_std is not None:
            return out
        if len(self.nvec) == 1:
            return out.argmax(dim=-1)
        return torch.stack([chunk.argmax(dim=-1) for chunk in out.split(self.nvec, dim=-1)], dim=-1)

    def get_logprob_entropy_value(self, x: torch.Tensor, action: torch.Tensor, state=None, dones=None):
        # validate_args=False: a non-finite output reaches the loss, which stops the run with its own message.
        out, value, _ = self(x, state, dones)
        if self.log_std is not None:  # diagonal Gaussian: independent dimensions, so the sums
            dist = Normal(out, self.log_std.exp().expand_as(out), validate_args=False)
            return dist.log_prob(action).sum(-1), dist.entropy().sum(-1), value
        if len(self.nvec) == 1:
            dist = Categorical(logits=out, validate_args=False)
            return dist.log_prob(action), dist.entropy(), value
        dists = [Categorical(logits=chunk, validate_args=False) for chunk in out.split(self.nvec, dim=-1)]
        logprob = sum(dist.log_prob(a) for dist, a in zip(dists, action.unbind(-1)))
        return logprob, sum(dist.entropy() for dist in dists), value


def make_optimizer(agent: nn.Module, name: str, learning_rate: float) -> torch.optim.Optimizer:
    if name == "rmsprop":  # RMSprop(alpha=0.99, eps=1e-5): SB3's (a2c/a2c.py)
        return torch.optim.RMSprop(agent.parameters(), lr=learning_rate, alpha=0.99, eps=1e-5)
    return torch.optim.Adam(agent.parameters(), lr=learning_rate, eps=1e-5)


def mixed_precision(device: torch.device, enabled: bool):
    """(autocast context, gradient scaler) for --amp: the forward passes and the loss in bfloat16 (CPU) or float16
    (CUDA, whose small range needs the scaler); the weights, their gradients and the optimizer stay float32."""
    half = torch.float16 if device.type == "cuda" else torch.bfloat16
    autocast = (lambda: torch.autocast(device.type, dtype=half)) if enabled else contextlib.nullcontext
    return autocast, torch.amp.GradScaler("cuda", enabled=enabled and device.type == "cuda")


def take(state, index):
    """The recurrent state (h, c) of the envs `index`; None (no --lstm) stays None."""
    return None if state is None else tuple(x[index] for x in state)


def forget(state, done: np.ndarray):
    """The recurrent state zeroed where an episode ended (its env has reset); None (no --lstm) stays None."""
    return None if state is None else tuple(x * torch.as_tensor(~done, device=x.device)[:, None] for x in state)


def to_env(actions: np.ndarray, space) -> np.ndarray:
    """What the env is sent: a Gaussian's sample clipped to the action bounds (its log-probability is that of
    the sample as drawn, which the update recomputes; only the env sees the clip), other actions as they are."""
    return np.clip(actions, space.low, space.high) if isinstance(space, gym.spaces.Box) else actions


@torch.inference_mode()  # no autograd bookkeeping while acting: the update recomputes what it needs
def collect_rollout(envs, agent, storage, next_obs, state, args, *, obs_rms, reward_norm, device, autocast):
    """Fills `storage` (numpy arrays shaped (num_steps, num_envs, ...): obs, actions, values, rewards, dones) by
    stepping every env num_steps times with the current policy, from the recurrent `state` (None: no --lstm).

    Observations join the running statistics (`obs_rms`, if given) and are scaled by them; rewards are divided by
    the running return's std (`reward_norm`, if given), then multiplied by --reward-scale. `dones[t]` = 1 when the
    transition at step t ended its episode (terminated or truncated). On truncation the step's reward already
    contains `gamma * V(final_obs)`, so GAE can treat every episode end as a hard stop. Returns (next_obs, the state
    after, finished episodes' returns, their lengths).
    """
    episode_returns = []
    episode_lengths = []
    for step in range(storage["obs"].shape[0]):
        storage["obs"][step] = next_obs
        with autocast():
            out, value, next_state = agent(torch.as_tensor(next_obs, device=device), state)
        action = agent.sample(out).cpu().numpy()
        storage["values"][step] = value.float().cpu().numpy()
        storage["actions"][step] = action
        raw_obs, reward, terminated, truncated, infos = envs.step(to_env(action, envs.single_action_space))
        if obs_rms is not None:
            obs_rms.update(raw_obs)
        next_obs = normalize_obs(raw_obs, obs_rms)
        if reward_norm is not None:
            reward_norm.track(slice(None), reward, terminated | truncated)
            reward = np.clip(reward / reward_norm.std(), -10.0, 10.0)
        storage["rewards"][step] = reward * args.reward_scale
        storage["dones"][step] = terminated | truncated
        # Truncated, not terminated: the episode could have gone on, so its value is V(final_obs),
        # not 0. The env was reset in this same step; info["final_obs"] holds its pre-reset observation.
        bootstrap = np.flatnonzero(truncated & ~terminated)
        if len(bootstrap):
            final_obs = torch.as_tensor(normalize_obs(np.stack(infos["final_obs"][bootstrap]), obs_rms), device=device)
            with autocast():  # --lstm: one more step of the ended episode's state, not of the reset one
                final_values = agent(final_obs, take(next_state, bootstrap))[1].float().cpu().numpy()
            storage["rewards"][step, bootstrap] += args.gamma * final_values
        state = forget(next_state, terminated | truncated)
        ep_returns, ep_lengths = finished_episodes(infos)
        episode_returns.extend(ep_returns.tolist())
        episode_lengths.extend(ep_lengths.tolist())
    return next_obs, state, episode_returns, episode_lengths


def make_storage(num_steps: int, num_envs: int, obs_dim: int, action_space) -> dict:
    """Rollout arrays, allocated once, in numpy: the rollout writes a few numbers per env step, which numpy does several
    times faster than torch on tensors this small (the update views them as tensors once per rollout)."""
    box = isinstance(action_space, gym.spaces.Box)
    return dict(
        obs=np.zeros((num_steps, num_envs, obs_dim), np.float32),
        actions=np.zeros((num_steps, num_envs, *action_space.shape), np.float32 if box else np.int64),
        values=np.zeros((num_steps, num_envs), np.float32),
        rewards=np.zeros((num_steps, num_envs), np.float32),
        dones=np.zeros((num_steps, num_envs), np.float32),
    )


def update_rows(batch: dict, advantages, returns, lstm: bool):
    """The update's rows, which mini-batches are drawn from: (obs, actions, advantages, returns, dones). Single
    steps, in any order; with --lstm, whole env sequences (envs, steps, ...), each replayed in order from the
    rollout's first state, which is why a mini-batch is then a share of the envs."""
    rows = (batch["obs"], batch["actions"], advantages, returns, batch["dones"])
    if lstm:
        return tuple(x.transpose(0, 1) for x in rows)
    return tuple(x.reshape(-1, *x.shape[2:]) for x in rows)


def compute_gae(rewards, values, dones, next_value, gamma: float, gae_lambda: float):
    """Generalized Advantage Estimation on (T, N) tensors.

    `dones[t]` = 1 when the transition at step t ended the episode (truncation already bootstrapped into
    `rewards[t]`), `values[t]` = V(s_t), `next_value` = V(s_T) after the last step. An ended episode contributes
    neither V(next) nor later advantages: both are masked by (1 - dones[t]).
    Returns (advantages, returns) with returns = advantages + values, the value-function target.
    """
    next_values = torch.cat([values[1:], next_value[None]])
    next_nonterminal = 1.0 - dones
    deltas = rewards + gamma * next_values * next_nonterminal - values  # all TD errors at once
    # A_t = delta_t + gamma * lambda * (1 - dones[t]) * A_{t+1}, from the last step back (A_{T-1} = delta_{T-1}).
    advantages = deltas.clone()
    for t in reversed(range(rewards.shape[0] - 1)):
        advantages[t] += gamma * gae_lambda * next_nonterminal[t] * advantages[t + 1]
    return advantages, advantages + values


def a2c_loss(logprobs, advantages, new_values, returns):
    """(policy loss, value loss) of the A2C objective: -E[A * log pi(a|s)] and E[(R - V(s))^2] / 2. train() adds the
    entropy bonus: loss = policy_loss + vf_coef * value_loss - ent_coef * E[H].

    The value loss is half the mean squared error, as in CleanRL's cleanrl/ppo.py and PufferLib's pufferlib/pufferl.py,
    so `losses/value_loss` compares across scripts; SB3's vf_coef 0.5 with plain MSE (a2c/a2c.py) is our 1.0 with the
    1/2, and skrl's A2C, plain MSE at weight 1 with no coefficient, is our 2.0.
    Advantages and returns are constants here (computed from the rollout), so only log pi and V carry
    gradients.
    """
    policy_loss = -(advantages * logprobs).mean()
    value_loss = 0.5 * nn.functional.mse_loss(new_values, returns)
    return policy_loss, value_loss


def evaluate(
    agent: Agent, args: Args, obs_rms: Optional[RunningMeanStd], *, episodes: int, seed: int, device, videos=()
):
    """Returns and lengths of `episodes` episodes, the training's observation statistics frozen, with actions by
    --eval-actions: greedy (argmax, or the Gaussian's mean) or sampled (from torch's RNG, which the caller seeds).
    They are played side by side in one vector env (env i seeded seed + i, each counted until its first episode ends),
    so each step is one forward pass for all of them. `videos`: paths (.mp4, .gif) to record env 0's episode to;
    rendering changes nothing that is played. An env with no time limit of its own is truncated at --eval-max-steps,
    so that every evaluation ends."""
    cap = args.eval_max_steps
    envs = make_gym_vector_env(args.env_id, episodes, actions=ACTIONS, render_first=bool(videos), step_cap=cap)
    returns = np.full(episodes, np.nan)
    lengths = np.zeros(episodes)
    frames = []
    try:
        obs, _ = envs.reset(seed=seed)
        state = agent.initial_state(episodes, device)  # --lstm: carried through each episode, zeroed when it ends
        while np.isnan(returns).any():
            if videos and np.isnan(returns[0]):
                frames.append(envs.envs[0].render())
            with torch.inference_mode():
                out, _, state = agent(torch.as_tensor(normalize_obs(obs, obs_rms), device=device), state)
            chosen = agent.greedy(out) if args.eval_actions == "greedy" else agent.sample(out)
            actions = to_env(chosen.cpu().numpy(), envs.single_action_space)
            obs, _, terminated, truncated, infos = envs.step(actions)
            state = forget(state, terminated | truncated)
            if "episode" in infos:
                first = infos["_episode"] & np.isnan(returns)
                returns[first] = infos["episode"]["r"][first]
                lengths[first] = infos["episode"]["l"][first]
        save_video(frames, videos, envs.envs[0].metadata.get("render_fps", 30))
    finally:
        envs.close()
    return {"return": returns, "length": lengths}


def evaluate_checkpoint(args: Args) -> dict:
    """--eval-checkpoint: --eval-episodes episodes (those of the run's evaluations: seed + 10,000, --eval-actions)
    with the run's frozen observation statistics."""
    ckpt, args, device = run.open_checkpoint("a2c_cartpole", Args, args, required=("obs_rms",))
    probe = make_gym_vector_env(args.env_id, 1, actions=ACTIONS)
    agent = Agent(probe.single_observation_space.shape[0], probe.single_action_space, args).to(device)
    probe.close()
    run.load_weights(agent, ckpt, "--eval-checkpoint", args.eval_checkpoint)
    obs_rms = RunningMeanStd.from_state(ckpt["obs_rms"])
    run_dir = os.path.dirname(args.eval_checkpoint)
    videos = video_paths(run_dir, f"checkpoint-step{ckpt['global_step']}", args.capture_video, args.gif)
    with run.seeded_rng(args.seed + 10_000, device):  # as the run's evaluations: the same episodes and draws
        stats = evaluate(
            agent, args, obs_rms, episodes=args.eval_episodes, seed=args.seed + 10_000, device=device, videos=videos
        )
    episodes = f"{args.eval_episodes} episode{'s' if args.eval_episodes > 1 else ''}"
    title = f"{args.eval_checkpoint} ({args.env_id}, step {ckpt['global_step']:,}), {episodes}"
    report(f"{title} ({args.eval_actions} actions):", stats)
    return stats


def train(args: Args) -> dict:
    # One process or a torchrun rank; --resume: the saved run's flags (with this --total-timesteps) and its state.
    world, device, args, resumed = run.start(args, "a2c_cartpole", required=("obs_rms",))
    validate_args(args)
    seed = args.seed + distributed.RANK_SEED_OFFSET * world.rank  # each rank of a torchrun job plays its own episodes
    random.seed(seed)
    np.random.seed(seed)
    torch.set_num_threads(1)  # initial weights drawn on one thread: the same bits whatever the thread count
    torch.manual_seed(args.seed)  # and on every rank

    envs = make_gym_vector_env(args.env_id, args.num_envs, actions=ACTIONS)
    obs_dim = envs.single_observation_space.shape[0]
    action_space = envs.single_action_space
    agent = Agent(obs_dim, action_space, args).to(device)
    optimizer = make_optimizer(agent, args.optimizer, args.learning_rate)
    obs_rms = RunningMeanStd((obs_dim,)) if args.norm_obs else None
    reward_norm = RewardScaler(args.num_envs, args.gamma) if args.norm_reward else None
    torch.set_num_threads(args.torch_threads)
    update_size = args.num_envs * args.num_steps * world.size  # agent steps per update, all ranks together
    num_updates = run.count_updates(args.total_timesteps, update_size, world.size, resumed)
    # What a checkpoint holds (objects: their state_dict() at each save); --resume loads it and goes on from there.
    rates = {"learning_rate": args.learning_rate}  # the schedule's value now: an extended run goes on from it
    state = dict(model=agent, optimizer=optimizer, obs_rms=obs_rms, reward_norm=reward_norm, rates=rates)
    start_update, schedule = run.restore(resumed, args, state, num_updates, world)
    about = f"{args.env_id}, {args.num_envs} envs x {args.num_steps} steps on {device}"
    writer, checkpoint = run.open_run(
        "a2c_cartpole",
        args,
        world,
        resumed,
        dict(state, schedule=schedule),
        update_size=update_size,
        done=start_update,
        about=about,
    )
    progress = Progress(num_updates * update_size, start_update * update_size)
    stop = distributed.StopRequest(world)
    autocast, scaler = mixed_precision(device, args.amp)
    storage = make_storage(args.num_steps, args.num_envs, obs_dim, action_space)
    raw_obs, _ = envs.reset(seed=seed + start_update)  # a resumed run plays fresh episodes
    if obs_rms is not None:
        obs_rms.update(raw_obs)
    obs = normalize_obs(raw_obs, obs_rms)  # the next observation of each env
    lstm_state = agent.initial_state(args.num_envs, device)  # --lstm: zeros, on --resume too (fresh episodes)
    episodes = []  # (global_step, return, length) of each episode finished since the last write
    solved_at = None
    eval_history = []
    last_eval = None
    eval_text = ""
    interrupted = False
    try:
        for update in range(start_update + 1, num_updates + 1):
            global_step = update * update_size  # once this update is done
            if args.anneal_lr:  # cleanrl/ppo.py's linear anneal to 0, from where this run's line starts (run.restore)
                frac = 1.0 - (update - 1 - schedule["update"]) / (num_updates - schedule["update"])
                rates["learning_rate"] = frac * schedule["learning_rate"]
                optimizer.param_groups[0]["lr"] = rates["learning_rate"]
            # --lstm: the update replays the rollout from here (a copy: inference tensors cannot enter autograd)
            first_state = None if lstm_state is None else tuple(x.clone() for x in lstm_state)
            obs, lstm_state, ep_returns, ep_lengths = collect_rollout(
                envs,
                agent,
                storage,
                obs,
                lstm_state,
                args,
                obs_rms=obs_rms,
                reward_norm=reward_norm,
                device=device,
                autocast=autocast,
            )
            batch = {key: torch.as_tensor(array, device=device) for key, array in storage.items()}  # CPU: no copy
            with torch.inference_mode(), autocast():
                next_value = agent(torch.as_tensor(obs, device=device), lstm_state)[1].float()
            advantages, returns = compute_gae(
                batch["rewards"],
                batch["values"],
                batch["dones"],
                next_value,
                gamma=args.gamma,
                gae_lambda=args.gae_lambda,
            )
            b_obs, b_actions, b_advantages, b_returns, b_dones = update_rows(batch, advantages, returns, args.lstm)
            # One mini-batch is the whole rollout, in any order: no need to shuffle and gather it.
            minibatches = [slice(None)]
            if args.mini_batches > 1:
                minibatches = torch.randperm(len(b_obs), device=device).chunk(args.mini_batches)
            for indices in minibatches:
                mb_advantages = b_advantages[indices]
                if args.norm_adv and mb_advantages.numel() > 1:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
                with autocast():
                    logprobs, entropy, new_values = agent.get_logprob_entropy_value(
                        b_obs[indices], b_actions[indices], take(first_state, indices), b_dones[indices]
                    )
                    policy_loss, value_loss = a2c_loss(logprobs, mb_advantages, new_values, b_returns[indices])
                    entropy_loss = entropy.mean()
                    loss = policy_loss + args.vf_coef * value_loss - args.ent_coef * entropy_loss
                optimizer.zero_grad(set_to_none=True)
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)  # (no-ops unless float16 on CUDA)
                # Under torchrun: the gradients averaged over the ranks, and with them the loss and whether a rank saw
                # a Ctrl-C, so all stop alike (at a non-finite loss; after this update) with no collective of their own.
                mean_loss, stopping = distributed.average_gradients(
                    world, agent.parameters(), loss.detach(), loss.new_tensor(float(stop.requested))
                )
                if not torch.isfinite(mean_loss):
                    raise run.non_finite_loss_error(mean_loss, update, global_step)
                grad_norm = nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                scaler.step(optimizer)
                scaler.update()

            episodes += [(global_step, ret, length) for ret, length in zip(ep_returns, ep_lengths)]
            if update % args.log_freq == 0 or update == num_updates or stopping > 0:
                episodes = sorted(distributed.pool(world, episodes)[0], key=lambda episode: episode[0])  # all ranks'
                if writer is not None:
                    if args.episode_points == "each":  # as CleanRL's ppo.py, at the step of the update it finished in
                        for step, ret, length in episodes:
                            writer.add_scalar("charts/episodic_return", ret, step)
                            writer.add_scalar("charts/episodic_length", length, step)
                    elif episodes:  # the mean of the episodes finished since the last log
                        writer.add_scalar("charts/episodic_return", np.mean([e[1] for e in episodes]), global_step)
                        writer.add_scalar("charts/episodic_length", np.mean([e[2] for e in episodes]), global_step)
                    writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
                    writer.add_scalar("losses/policy_loss", policy_loss.item(), global_step)
                    writer.add_scalar("losses/value_loss", value_loss.item(), global_step)
                    writer.add_scalar("losses/entropy", entropy_loss.item(), global_step)
                    explained_var = logs.explained_variance(batch["values"].flatten(), returns.flatten())
                    writer.add_scalar("losses/explained_variance", explained_var, global_step)
                    writer.add_scalar("losses/grad_norm", grad_norm.item(), global_step)
                    writer.add_scalar("charts/SPS", progress.sps(global_step), global_step)  # wall time, evaluations in
                    writer.add_scalar("perf/train_SPS", progress.train_sps(global_step), global_step)
                    if agent.log_std is not None:
                        writer.add_scalar("charts/action_std", agent.log_std.exp().mean().item(), global_step)
                    ret = float(np.mean([episode[1] for episode in episodes])) if episodes else None  # since the last
                    length = float(np.mean([episode[2] for episode in episodes])) if episodes else None  # write
                    progress.update(global_step, update=update, ret=ret, len=length, eval=last_eval)
                episodes = []
            if world.rank == 0 and (args.eval_freq and update % args.eval_freq == 0 or update == num_updates):
                videos = video_paths(checkpoint.run_dir, f"eval-step{global_step}", args.capture_video)
                # the same episodes at every evaluation and in --eval-checkpoint: the points differ by the policy alone
                with progress.paused(), run.seeded_rng(args.seed + 10_000, device):  # its own random stream
                    stats = evaluate(
                        agent,
                        args,
                        obs_rms,
                        episodes=args.eval_episodes,
                        seed=args.seed + 10_000,
                        device=device,
                        videos=videos,
                    )
                last_eval, eval_text = log_eval(writer, stats, global_step)
                eval_history.append((global_step, last_eval))
                threshold = gym.spec(args.env_id).reward_threshold
                if solved_at is None and threshold is not None and last_eval >= threshold:
                    solved_at = global_step
                    print(f"solved: eval return {last_eval:.1f} >= {threshold} at step {solved_at:,}")
            if args.checkpoint_freq and update % args.checkpoint_freq == 0:
                checkpoint.save(update)  # a periodic save that fails warns; training goes on
            if stopping > 0:  # Ctrl-C (on any rank): this update is whole; save it and stop
                interrupted = True
                break
    except KeyboardInterrupt:  # a second Ctrl-C: stop at once; the half-done update is dropped, nothing saved
        raise KeyboardInterrupt(checkpoint.kept(hint=True)) from None
    except RuntimeError as e:  # torchrun: another rank died in a collective; the last save holds the run
        raise run.lost_error(e, world, checkpoint) from None
    finally:
        run.close(world, envs, writer, stop)  # the envs, the writer, Ctrl-C's handler, the torchrun group
    checkpoint.save(update, final=True)  # fails with one line naming the checkpoint that was kept
    print_end(interrupted, checkpoint, progress, global_step, eval_text)
    return run.summary(
        checkpoint,
        progress,
        update,
        interrupted,
        policy=agent,
        args=args,
        eval_history=eval_history,
        solved_at=solved_at,
    )


def main(argv=None) -> None:
    try:
        # each flag's default: --env-id's preset (common/presets.py), or the saved run's (--resume, --eval-checkpoint)
        default = run.defaults(Args, "a2c_cartpole", presets.a2c_cartpole, argv)
        args = tyro.cli(Args, args=argv, default=default)
        if args.eval_checkpoint:
            evaluate_checkpoint(args)
        elif train(args)["interrupted"]:
            sys.exit(run.EXIT_INTERRUPTED)  # Ctrl-C: the run saved; 130, as a shell reports a SIGINT
    except run.ONE_LINE_ERRORS as e:  # bad flags, a non-finite loss, a dead worker or rank, a failed save, Ctrl-C
        sys.exit(run.exit_for(e))


if __name__ == "__main__":
    main()
