"""PufferLib 3.0-style PPO (the loop of PufferLib's pufferl.py) in one file, correct where PufferLib is not.

Read top to bottom: Args and per-env defaults, network, experience buffer, rollout, advantages, prioritized
rows, loss, evaluation, train(). From PufferLib: async env groups (recv(group) -> policy -> send(actions)), a
(segments x horizon) buffer whose rows are the unit of sampling and of LSTM sequences (a multi-agent env is just
more agents), prioritized minibatches of whole rows. Where pufferl.py goes wrong and this file does not
(docs/ppo_puffer_async.md): truncation bootstrapped with V(final observation); no reset step in the buffer; a
row's last step bootstrapped; rewards clamped only if asked; absent agents carry no loss; rows tracked per agent
whatever order groups come back in; normalized importance weights, beta reaching 1; LSTM rows replay the rollout.

    python ppo_puffer_async.py                # Tetris: 90M steps, 15-17 min on 2 cores, return 10.2-11.2, 4.8-6.1 lines
    python ppo_puffer_async.py --env-id HalfCheetah-v5           # Box actions: the continuous defaults, 1M steps
    python ppo_puffer_async.py --env-id mpe-spread               # 3 agents per env (or: any PettingZoo module)
    python ppo_puffer_async.py --env-id cartpole-novel --lstm    # velocities hidden: memory needed
    python ppo_puffer_async.py --eval-checkpoint runs/<run>/ppo_puffer_async.pt
    torchrun --standalone --nproc-per-node 2 ppo_puffer_async.py   # data-parallel: 2 ranks, each its own envs
"""

import dataclasses
import os
import time
from dataclasses import dataclass
from typing import Literal, Optional

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Categorical, Normal

from common import distributed, logs, puffer_envs, run
from common.logs import Progress, announce, log_eval, make_run_name, print_end, report, save_video, video_paths
from common.normalize import RewardScaler, RunningMeanStd
from common.puffer_envs import EpisodeLog, NormalizedObservations, is_pettingzoo, make_puffer_vecenv
from common.tetris import merge_infos, watch
from common.vector import WorkerError


@dataclass
class Args(run.RunArgs):
    """PufferLib-style PPO. Default: Tetris, 90M agent steps, 15-17 min on 2 cores, return 10.2-11.2, 4.8-6.1 lines."""

    env_id: str = "tetris"
    """tetris, mpe-spread, cartpole-novel or repeat-previous-easy (add --lstm), a Gymnasium id or a PettingZoo module"""
    env_kwargs: str = ""
    """keyword arguments of a Gymnasium or PettingZoo env, e.g. N=2,max_cycles=50 (for mpe2.simple_spread_v3)"""
    total_timesteps: Optional[int] = None
    """agent steps of training, all ranks together (varies by env; on --resume: the saved total)"""
    num_envs: Optional[int] = None
    """envs per rank (Tetris: games; mpe-spread: envs of 3 agents) (varies by env)"""
    async_factor: Optional[int] = None
    """K groups of envs: the policy runs on one group while the others step; 1 = synchronous (varies by env)"""
    backend: Optional[Literal["Serial", "Multiprocessing"]] = None
    """Serial: envs step in this process; Multiprocessing: in --num-workers sleeping processes (varies by env)"""
    num_workers: Optional[int] = None
    """worker processes with --backend Multiprocessing (varies by env)"""
    horizon: Optional[int] = None
    """steps per buffer row (a segment), the unit of minibatches and of LSTM sequences (varies by env)"""
    batch_size: Optional[int] = None
    """agent steps per update and rank = segments x horizon, segments a multiple of the agents (None: a row each)"""
    num_minibatches: Optional[int] = None
    """minibatches per update epoch, each of segments / num_minibatches whole rows (varies by env)"""
    update_epochs: Optional[int] = None
    """passes over each rollout (varies by env)"""
    learning_rate: Optional[float] = None
    """Adam's learning rate (varies by env)"""
    anneal_lr: bool = True
    """linearly anneal the learning rate to 0 at --total-timesteps"""
    gamma: Optional[float] = None
    """the discount factor (varies by env)"""
    gae_lambda: Optional[float] = None
    """the GAE lambda (varies by env)"""
    clip_coef: Optional[float] = None
    """the surrogate clipping coefficient (varies by env)"""
    vf_clip_coef: Optional[float] = None
    """the value may move at most this far from the rollout's estimate (varies by env)"""
    vf_coef: Optional[float] = None
    """the value-loss coefficient (varies by env)"""
    ent_coef: Optional[float] = None
    """the entropy-bonus coefficient (varies by env)"""
    anneal_ent: Optional[bool] = None
    """linearly anneal the entropy coefficient to 0 at the last update (varies by env)"""
    max_grad_norm: float = 0.5
    """the maximum global gradient norm (clipping)"""
    target_kl: Optional[float] = None
    """stop the update's epochs once approx_kl exceeds this (None: never); under torchrun the ranks' mean decides"""
    prio_alpha: Optional[float] = None
    """prioritized rows: P(row) ~ (sum of |advantage| over the row) ** alpha; 0 = uniform (varies by env)"""
    prio_beta0: float = 0.2
    """importance-weight exponent at the start, annealed linearly to exactly 1 at the last update"""
    norm_obs: Optional[bool] = None
    """scale observations by their running mean and std, frozen for evaluation and saved (varies by env)"""
    norm_reward: Optional[bool] = None
    """divide rewards by the running std of the discounted return, as SB3's VecNormalize (varies by env)"""
    reward_scale: Optional[float] = None
    """multiply rewards by this for learning (returns are logged unscaled) (varies by env)"""
    reward_clamp: Optional[float] = None
    """clamp rewards to [-x, x] for learning (PufferLib always clamps to 1; we never do unless asked)"""
    hidden_size: Optional[int] = None
    """width of the two hidden layers of the encoder (varies by env)"""
    activation: Optional[Literal["tanh", "relu"]] = None
    """the encoder's nonlinearity (varies by env)"""
    separate_critic: Optional[bool] = None
    """the value head gets an encoder of its own, as CleanRL's MuJoCo agent (varies by env; with --lstm: off)"""
    BEFORE_FLAG = dict(activation="relu", anneal_ent=False, separate_critic=False)  # runs saved before these flags
    lstm: bool = False
    """an LSTM between the encoder and the heads (for the memory envs: cartpole-novel, repeat-previous-easy)"""
    lstm_hidden_size: int = 64
    """width of the LSTM's state"""
    burn_in: int = 0
    """with --lstm: the first K steps of each row only advance the state (no gradient, no loss)"""
    tbptt: Optional[int] = None
    """with --lstm: detach the state every L steps of a row (truncated BPTT; default: --horizon, no detach)"""
    advantage: Literal["gae", "lambda-return"] = "gae"
    """GAE, or the recursive lambda-return R_t = r_t + gamma((1 - lambda)V(s_t+1) + lambda R_t+1), A = R - V"""
    max_ticks: int = 10_000
    """Tetris: a game is truncated (and bootstrapped) after this many steps"""
    eval_actions: Optional[Literal["greedy", "sampled"]] = None
    """evaluate with the most likely action (a Gaussian's mean) or by sampling (varies by env)"""
    eval_max_steps: int = 1_000
    """evaluation episodes of an env with no time limit of its own (CliffWalking) are truncated at this many steps"""
    render: bool = False
    """with --eval-checkpoint of a Tetris run: watch one game in the terminal"""
    render_fps: float = 10.0
    """board redraws per second with --render"""


# Per-env defaults: DEFAULTS, then what each env changes and why. `--env-id X --help` shows the result for X.
# fmt: off
DEFAULTS = dict(total_timesteps=100_000, num_envs=8, async_factor=1, backend="Serial", num_workers=1, horizon=64,
                num_minibatches=4, update_epochs=4, learning_rate=1e-3, gamma=0.99, gae_lambda=0.95, clip_coef=0.2,
                vf_clip_coef=10.0, vf_coef=0.5, ent_coef=0.01, anneal_ent=False, prio_alpha=0.0, hidden_size=64,
                activation="relu", reward_scale=1.0, norm_obs=False, norm_reward=False, eval_actions="greedy",
                separate_critic=False)
ENV_DEFAULTS = {
    # Any Gymnasium id (one set for CartPole, Acrobot, MountainCar, LunarLander; docs/classic_control.md): tanh encoder
    # over normalized observations, lambda 1, rewards x 0.1, no entropy bonus. With ReLU, MountainCar stays at -200.
    "gymnasium": dict(activation="tanh", gae_lambda=1.0, reward_scale=0.1, norm_obs=True, ent_coef=0.0),
    # Any Gymnasium id with Box actions, one set as CleanRL's ppo_continuous_action.py has (chosen on MuJoCo, seed 11;
    # docs/ppo_puffer_async.md): its learning (2048 steps, 10 epochs, Adam 3e-4, normalized observations and rewards,
    # separate 64-wide tanh networks), from 8 envs, in minibatches of 256 steps (16 rows of 16): 1.96x the SPS of 64.
    "continuous": dict(total_timesteps=1_000_000, num_envs=8, horizon=16, batch_size=2048, num_minibatches=8,
                       update_epochs=10, learning_rate=3e-4, vf_clip_coef=0.2, ent_coef=0.0, activation="tanh",
                       norm_obs=True, norm_reward=True, separate_critic=True),
    # The network is the cost: envs step in this process, torch gets both cores (1.5x one thread). ppo_tetris.py's batch
    # and loss, 128 wide (1.8x the SPS of 256), Adam 3e-3, entropy bonus 0.1 annealed to 0 (docs/ppo_puffer_async.md).
    "tetris": dict(total_timesteps=90_000_000, num_envs=512, num_minibatches=8, update_epochs=2, hidden_size=128,
                   vf_clip_coef=0.2, ent_coef=0.1, anneal_ent=True, learning_rate=3e-3, eval_actions="sampled",
                   torch_threads=2),
    # mpe-spread and any PettingZoo env: the env is the cost (~70 us a step for MPE), so 2 sleeping workers step one
    # group each while the policy runs on the other. pufferl.py's MPE settings, with a larger entropy bonus.
    "pettingzoo": dict(total_timesteps=7_500_000, num_envs=128, async_factor=2, backend="Multiprocessing",
                       num_workers=2, num_minibatches=8, update_epochs=1, learning_rate=1e-3, gamma=0.977,
                       gae_lambda=0.916, clip_coef=0.1, vf_clip_coef=0.1, vf_coef=0.44, ent_coef=0.01,
                       hidden_size=128, eval_actions="sampled"),
    # Memory envs, for --lstm. cartpole-novel: rows of 25 (evaluations on whole 10k steps), 10 epochs of one
    # minibatch, rewards x 0.1 (the LSTM's output is bounded: its value head could not reach CartPole's returns).
    "cartpole-novel": dict(horizon=25, num_minibatches=1, update_epochs=10, learning_rate=5e-4, gamma=0.98,
                           vf_coef=0.5, ent_coef=0.0, reward_scale=0.1),
    "repeat-previous-easy": dict(total_timesteps=1_000_000, num_envs=32, horizon=32),
}
# fmt: on


def env_defaults(env_id: str, env_kwargs: str = "") -> dict:
    kind = "pettingzoo" if is_pettingzoo(env_id) else env_id if env_id in ENV_DEFAULTS else "gymnasium"
    if kind == "gymnasium" and puffer_envs.box_actions(env_id, env_kwargs):
        kind = "continuous"
    return {**DEFAULTS, **ENV_DEFAULTS[kind]}


def with_env_defaults(args: Args) -> Args:
    """Every flag left at None gets its env's default (one worker when the backend is Serial; with --lstm, the critic
    reads the LSTM's memory too)."""
    defaults = env_defaults(args.env_id, args.env_kwargs)
    if args.backend == "Serial":
        defaults["num_workers"] = 1
    if args.lstm:
        defaults["separate_critic"] = False
    return dataclasses.replace(args, **{k: v for k, v in defaults.items() if getattr(args, k) is None})


def validate_args(args: Args, num_agents: Optional[int] = None) -> None:
    """Bad flags fail before any network is built, naming the flag; with num_agents, the buffer layout too."""
    run.check_flags(
        args,
        at_least_one="num_envs num_workers async_factor horizon num_minibatches update_epochs max_ticks hidden_size",
        positive="learning_rate clip_coef vf_clip_coef reward_scale render_fps",
        positive_or_none="reward_clamp target_kl tbptt",
        non_negative="prio_alpha burn_in",
    )
    if args.lstm and not 0 <= args.burn_in < args.horizon:
        raise ValueError(f"--burn-in {args.burn_in} must be in [0, --horizon {args.horizon}): the rest of a row trains")
    if (args.burn_in or args.tbptt) and not args.lstm:
        raise ValueError("--burn-in and --tbptt apply to the LSTM: add --lstm")
    if not 0 <= args.prio_beta0 <= 1:
        raise ValueError(f"--prio-beta0 must be in [0, 1] (got {args.prio_beta0})")
    if (args.capture_video or args.gif) and args.env_id in puffer_envs.MEMORY_ENVS:
        raise ValueError(f"--capture-video and --gif record Tetris, PettingZoo and Gymnasium envs, not {args.env_id}")
    if args.backend == "Serial" and args.num_workers != 1:
        raise ValueError(f"--num-workers {args.num_workers} needs --backend Multiprocessing (Serial steps in-process)")
    if num_agents is None:
        return
    batch_size = args.batch_size or num_agents * args.horizon
    rows = batch_size // args.horizon
    if batch_size % args.horizon or rows % num_agents:
        raise ValueError(f"--batch-size {batch_size} must be --horizon x a multiple of the {num_agents} agents (rows)")
    if rows % args.num_minibatches:
        raise ValueError(f"--num-minibatches {args.num_minibatches} must divide the {rows} rows (batch / horizon)")


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


def take(x, index):
    """x[index] for a tensor, or for each tensor of an LSTM state (h, c); None (no LSTM) stays None."""
    if x is None:
        return None
    return tuple(t[index] for t in x) if isinstance(x, tuple) else x[index]


def action_head(space) -> tuple:
    """(num_actions, continuous) for Policy: Discrete's n, MultiDiscrete's nvec, or a 1-D Box's size and True."""
    box, multi = isinstance(space, gym.spaces.Box), isinstance(space, gym.spaces.MultiDiscrete)
    return (int(space.shape[0]) if box else space.nvec.tolist() if multi else int(space.n)), box


class Policy(nn.Module):
    """Encoder MLP (2 hidden layers), optionally an LSTM, then a policy head and a value head. `step` acts for a
    batch of agents (one observation each, with their recurrent state); `unroll` replays rows from each row's stored
    state, reset where the rollout reset it. The policy head's output is the logits of a Categorical (Discrete: n =
    `num_actions`), of one per dimension (MultiDiscrete: `num_actions` = nvec), or the mean of a diagonal Gaussian
    (`continuous`: Box actions of that size) whose log-std is a parameter, independent of the state, as in CleanRL's
    ppo_continuous_action.py and SB3."""

    def __init__(self, obs_dim, num_actions, hidden_size, lstm_hidden_size=0, activation="relu", continuous=False,
                 separate_critic=False):  # fmt: skip
        super().__init__()
        act = nn.Tanh if activation == "tanh" else nn.ReLU

        def encoder():
            linear = (layer_init(nn.Linear(obs_dim, hidden_size)), layer_init(nn.Linear(hidden_size, hidden_size)))
            return nn.Sequential(linear[0], act(), linear[1], act())

        self.encoder = encoder()
        # nn.LSTM, not a loop of LSTMCells: a whole stretch of a row is one fused call (cartpole-novel trains
        # ~1.7x faster for it); `step` runs it on sequences of length 1.
        self.lstm = nn.LSTM(hidden_size, lstm_hidden_size, batch_first=True) if lstm_hidden_size else None
        head_size = lstm_hidden_size or hidden_size
        # Small policy-head init keeps the first policy near uniform; value head at unit scale.
        self.nvec = num_actions if isinstance(num_actions, list) else None
        self.actor = layer_init(nn.Linear(head_size, sum(self.nvec or [num_actions])), std=0.01)
        self.critic = layer_init(nn.Linear(head_size, 1), std=1.0)
        self.log_std = nn.Parameter(torch.zeros(num_actions)) if continuous else None  # std 1 at the start
        # --separate-critic: the value loss shapes only the critic's own features (as in CleanRL's and SB3's MuJoCo
        # agents). Drawn last, so a shared policy's initial weights are what they were before the flag.
        self.critic_encoder = encoder() if separate_critic else None

    def initial_state(self, n: int, device: torch.device):
        return None if self.lstm is None else tuple(torch.zeros(n, self.lstm.hidden_size, device=device) for _ in "hc")

    def step(self, obs: torch.Tensor, state=None):
        """(policy head's output, value, next state) for one observation per agent."""
        hidden = self.encoder(obs)
        if self.lstm is not None:
            out, (h, c) = self.lstm(hidden.unsqueeze(1), None if state is None else tuple(x[None] for x in state))
            hidden, state = out[:, 0], (h[0], c[0])
        return self.actor(hidden), self.value(obs, hidden), state

    def value(self, obs: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        return self.critic(hidden if self.critic_encoder is None else self.critic_encoder(obs)).squeeze(-1)

    def unroll(self, obs: torch.Tensor, state=None, starts=None, burn_in: int = 0, tbptt: int = 0):
        """(policy head's outputs, values) for rows (rows, horizon, obs) from their initial `state`, reset before the
        steps `starts[:, t]` marks; the first `burn_in` steps only advance the state; it is detached every `tbptt`."""
        hidden = self.encoder(obs)
        if self.lstm is not None:
            # The rows are cut only where something happens to the state between two steps: an episode begins
            # in some row (its state is zeroed), burn-in ends, or tbptt detaches. Each stretch between cuts is
            # one nn.LSTM call. (The stored initial state is already reset where t = 0 began an episode.)
            horizon = obs.shape[1]
            cuts = set() if starts is None else set((starts[:, 1:].any(0).nonzero().flatten() + 1).tolist())
            cuts |= ({burn_in} if burn_in else set()) | (set(range(tbptt, horizon, tbptt)) if tbptt else set())
            bounds = [0] + sorted(cuts) + [horizon]
            h, c = (x.unsqueeze(0) for x in state)
            outputs = []
            for t, end in zip(bounds[:-1], bounds[1:]):
                if t > 0 and starts is not None:
                    keep = (~starts[:, t]).to(h.dtype)[None, :, None]
                    h, c = h * keep, c * keep
                if t > 0 and tbptt and t % tbptt == 0:
                    h, c = h.detach(), c.detach()
                with torch.set_grad_enabled(torch.is_grad_enabled() and t >= burn_in):
                    out, (h, c) = self.lstm(hidden[:, t:end], (h, c))
                outputs.append(out)
            hidden = torch.cat(outputs, 1)
        return self.actor(hidden), self.value(obs, hidden)

    def logits(self, out: torch.Tensor) -> torch.Tensor:
        """Discrete: the head's output; MultiDiscrete: (..., dimensions, widest n), each padded with -inf."""
        if self.nvec is None:
            return out
        width = max(self.nvec)
        return torch.stack(
            [nn.functional.pad(x, (0, width - x.shape[-1]), value=-torch.inf) for x in out.split(self.nvec, -1)], -2
        )

    def distribution(self, out: torch.Tensor):
        if self.log_std is not None:
            return Normal(out, self.log_std.exp(), validate_args=False)
        return Categorical(logits=self.logits(out), validate_args=False)

    def logprob_and_entropy(self, out: torch.Tensor, actions: torch.Tensor):
        """Of whole actions: a MultiDiscrete's or a Box's dimensions are independent, so their terms add up."""
        dist = self.distribution(out)
        logprobs, entropy = dist.log_prob(actions), dist.entropy()
        return (logprobs, entropy) if logprobs.dim() < out.dim() else (logprobs.sum(-1), entropy.sum(-1))

    def sample(self, out: torch.Tensor):
        """(actions, their logprobs). A Gaussian's logprob is that of the action as drawn; only the env sees it
        clipped to the bounds (to_env): the update must score the same action the rollout scored."""
        dist = self.distribution(out)
        actions = dist.sample()
        logprobs = dist.log_prob(actions)
        return actions, logprobs if logprobs.dim() < out.dim() else logprobs.sum(-1)

    def choose(self, out: torch.Tensor, eval_actions="greedy") -> torch.Tensor:
        """Evaluation's action: the most likely one (the Gaussian's mean, each categorical's argmax), or sampled."""
        if eval_actions == "sampled":
            return self.sample(out)[0]
        return out if self.log_std is not None else self.logits(out).argmax(-1)


def to_env(actions: torch.Tensor, space) -> np.ndarray:
    """What the env is sent: Box actions clipped to its bounds, integer actions as int32."""
    actions = actions.cpu().numpy()
    return np.clip(actions, space.low, space.high) if isinstance(space, gym.spaces.Box) else actions.astype(np.int32)


class Experience:
    """The (segments, horizon) buffer and the per-agent bookkeeping that fills it. Each agent owns a row and a
    position in it. A step's observation, action, logprob and value are stored when the policy acts; its reward and
    end flags when the agent's next observation arrives. A full row is handed over and the agent takes the next free
    one; once none is free it plays on without storing, until every row is full. `next_row[s]`: the same agent's
    next row (-1: none); `next_value[s]`: V of the observation after the row's last step. With an LSTM: each agent's
    (h, c), each row's initial (h, c), and `starts[s, t]`: the state was reset before t."""

    def __init__(self, segments, horizon, num_agents, obs_dim, device, state_size=0, actions=((), torch.long)):
        self.segments, self.horizon, self.num_agents = segments, horizon, num_agents
        shape = (segments, horizon)
        self.obs = torch.zeros(shape + (obs_dim,), device=device)
        self.actions = torch.zeros(shape + actions[0], dtype=actions[1], device=device)  # one agent's: shape, dtype
        self.logprobs, self.values, self.rewards, self.terminals, self.truncations = (
            torch.zeros(shape, device=device) for _ in range(5)
        )
        self.masks = torch.zeros(shape, dtype=torch.bool, device=device)
        self.next_value = torch.zeros(segments, device=device)
        self.next_row = torch.full((segments,), -1, dtype=torch.long, device=device)
        self.row = np.zeros(num_agents, dtype=np.int64)  # -1: no free row left this rollout
        self.pos = np.zeros(num_agents, dtype=np.int64)
        self.pending = np.zeros(num_agents, dtype=bool)  # a stored step awaits its reward
        self.state = self.initial_state = self.starts = None
        if state_size:  # carried across rollouts, like the episodes themselves
            self.state = tuple(torch.zeros(num_agents, state_size, device=device) for _ in "hc")
            self.initial_state = tuple(torch.zeros(segments, state_size, device=device) for _ in "hc")
            self.starts = torch.zeros(shape, dtype=torch.bool, device=device)
        self.reset()

    def reset(self) -> None:
        """Start a rollout: agent a fills row a first (segments is a multiple of num_agents)."""
        self.row[:] = np.arange(self.num_agents)
        self.pos[:] = 0
        self.pending[:] = False
        self.free_row, self.full_rows = self.num_agents, 0
        self.next_row.fill_(-1)

    @property
    def full(self) -> bool:
        return self.full_rows == self.segments

    def finish_steps(self, agents, rewards, terminals, truncations, next_values) -> None:
        """Writes the outcome of each agent's pending step; full rows are handed over."""
        rows, pos = torch.as_tensor(self.row[agents]), torch.as_tensor(self.pos[agents])
        self.rewards[rows, pos] = rewards
        self.terminals[rows, pos] = terminals
        self.truncations[rows, pos] = truncations
        self.pos[agents] += 1
        done = self.pos[agents] == self.horizon
        if done.any():
            filled, done_t = agents[done], torch.as_tensor(done)
            n = len(filled)
            self.next_value[rows[done_t]] = next_values[done_t]
            new_rows = self.free_row + np.arange(n)
            new_rows[new_rows >= self.segments] = -1  # none left: play on without storing
            self.next_row[rows[done_t]] = torch.as_tensor(new_rows, device=self.next_row.device)
            self.row[filled], self.pos[filled] = new_rows, 0
            self.free_row += n
            self.full_rows += n
        self.pending[agents] = False

    def store_steps(self, agents, store, obs, actions, logprobs, values, masks, starts=None, state=None) -> None:
        """Stores the steps just taken by the agents where `store` is True (LSTM: the (h, c) each started from)."""
        agents, store_t = agents[store], torch.as_tensor(store)
        rows, pos = torch.as_tensor(self.row[agents]), torch.as_tensor(self.pos[agents])
        self.obs[rows, pos] = obs[store_t]
        self.actions[rows, pos] = actions[store_t]
        self.logprobs[rows, pos] = logprobs[store_t]
        self.values[rows, pos] = values[store_t]
        self.masks[rows, pos] = torch.as_tensor(masks[store], device=self.masks.device)
        if state is not None:
            self.starts[rows, pos] = starts[store_t]
            first = pos == 0  # a row starts here: it is replayed from this state
            for stored, now in zip(self.initial_state, take(state, store_t)):
                stored[rows[first]] = now[first]
        self.pending[agents] = True


class EpisodeStats:
    """Which steps are real transitions (only those are counted and stored) and which observations begin an
    episode (an LSTM's state restarts there). With "same_step" autoreset (our Tetris) the observation after an end
    is already the next episode's (the last one is in `vecenv.final_observations`); with "next_step" (PufferLib's
    emulation) it IS the last one, the action on it is ignored, and the next recv brings the reset observation with
    reward 0, no transition. With `gamma`, `reward_scaler` tracks each agent's discounted return (for its std)."""

    def __init__(self, num_agents: int, autoreset: str, gamma=None):
        self.next_step_reset = autoreset == "next_step"
        self.reward_scaler = RewardScaler(num_agents, gamma) if gamma is not None else None
        self.log = EpisodeLog(num_agents)
        self.acting = np.zeros(num_agents, dtype=bool)  # the last action sent was a real step
        self.ended = np.zeros(num_agents, dtype=bool)  # the last observation ended an episode

    def update(self, agents, rewards, dones, masks):
        """Counts this recv's rewards; (the agents whose episode ended, per agent: this observation starts one)."""
        acting = self.acting[agents]
        acted = agents[acting]
        ended = self.log.add(acted, rewards[acting], dones[acting])
        if self.reward_scaler is not None and len(acted):
            self.reward_scaler.track(acted, rewards[acting], dones[acting])
        starting = self.ended[agents] if self.next_step_reset else dones
        self.ended[agents] = dones
        # An emulated episode's last observation is no state to act in; absent agents (mask False) act on nothing.
        self.acting[agents] = masks & ~dones if self.next_step_reset else masks
        return ended, starting


def rollout(vecenv, policy, experience, stats, gamma, reward_scale, reward_clamp, device, timers: dict) -> list:
    """recv(group) -> policy -> store -> send until every row of `experience` is full, each agent's steps in its own
    rows whatever order the groups come back in; returns env infos. A truncated step's reward gets gamma *
    V(final observation): the episode could have gone on (episode ends: see EpisodeStats)."""
    next_step_reset = vecenv.autoreset == "next_step"
    infos = []
    experience.reset()
    while not experience.full:
        start = time.perf_counter()
        obs, rewards, terminals, truncations, step_infos, agents, masks = vecenv.recv()
        timers["env"] += time.perf_counter() - start

        start = time.perf_counter()
        infos.extend(step_infos)
        agents = np.asarray(agents)
        dones = terminals | truncations
        _, starting = stats.update(agents, rewards, dones, masks)
        with torch.inference_mode():
            obs_t = torch.as_tensor(obs, device=device, dtype=torch.float32)
            carried = state = None
            if policy.lstm is not None:  # each agent's state after its last step, zeroed where an episode begins
                agents_t, starting = torch.as_tensor(agents, device=device), torch.as_tensor(starting, device=device)
                carried = take(experience.state, agents_t)
                state = tuple(x * (~starting).unsqueeze(-1) for x in carried)
            out, values, next_state = policy.step(obs_t, state)
            actions, logprobs = policy.sample(out)
            if policy.lstm is not None:
                for stored, new in zip(experience.state, next_state):
                    stored[agents_t] = new

        pending = experience.pending[agents]
        if pending.any():
            rewards_t = torch.as_tensor(rewards[pending], device=device) * reward_scale
            if reward_clamp is not None:
                rewards_t = rewards_t.clamp(-reward_clamp, reward_clamp)
            truncated = truncations[pending]
            if truncated.any():
                if next_step_reset:  # this recv's observation is the final one: its value is already here
                    final_values = values[torch.as_tensor(pending)][torch.as_tensor(truncated)]
                else:  # from the final observation, with the memory of the episode it ended
                    final_obs = vecenv.final_observations[agents[pending][truncated]]
                    final_obs = torch.as_tensor(final_obs, device=device, dtype=torch.float32)
                    ended = torch.as_tensor(np.flatnonzero(pending)[truncated])
                    with torch.inference_mode():
                        final_values = policy.step(final_obs, take(carried, ended))[1]
                rewards_t[torch.as_tensor(truncated)] += gamma * final_values
            ends = (torch.as_tensor(x[pending], device=device, dtype=torch.float32) for x in (terminals, truncations))
            experience.finish_steps(agents[pending], rewards_t, *ends, values[torch.as_tensor(pending)])

        # The observation that ends an emulated episode is not acted on, so it is no step. Absent agents'
        # steps (mask False) are stored, flagged, and carry no loss.
        store = experience.row[agents] >= 0
        if next_step_reset:
            store &= ~(dones & masks)
        if store.any():
            experience.store_steps(agents, store, obs_t, actions, logprobs, values, masks, starting, state)
        actions_np = to_env(actions, vecenv.single_action_space)
        timers["inference"] += time.perf_counter() - start

        start = time.perf_counter()
        vecenv.send(actions_np)
        timers["env"] += time.perf_counter() - start
    return infos


def compute_gae(rewards, values, dones, next_value, gamma: float, gae_lambda: float, next_row=None):
    """GAE per row of (segments, horizon) tensors. `dones[s, t]` = 1 where the transition ended the episode
    (truncation: gamma * V(final obs) is already in the reward), `next_value[s]` = V of the observation after row
    s's last step. With `next_row` (the same agent's next row, -1 for none) the lambda-chain runs on into that row:
    the advantages equal plain GAE over each agent's whole trajectory. Returns (advantages, returns)."""
    advantages = torch.zeros_like(rewards)
    last_advantage = torch.zeros_like(next_value)
    decay = torch.ones_like(next_value)  # prod over u >= t of gamma * lambda * (1 - done_u): next row's share
    decays = torch.empty_like(rewards)
    for t in reversed(range(rewards.shape[1])):
        next_values = next_value if t == rewards.shape[1] - 1 else values[:, t + 1]
        next_nonterminal = 1.0 - dones[:, t]
        delta = rewards[:, t] + gamma * next_values * next_nonterminal - values[:, t]
        last_advantage = delta + gamma * gae_lambda * next_nonterminal * last_advantage
        advantages[:, t] = last_advantage
        decay = decay * gamma * gae_lambda * next_nonterminal
        decays[:, t] = decay
    if next_row is not None and (next_row >= 0).any():
        # A row's first advantage depends on its successor's: resolve the chains from their ends, one link per
        # pass (at most rows-per-agent passes), then add each successor's share to every step.
        linked, successor = next_row >= 0, next_row.clamp(min=0)
        first = advantages[:, 0].clone()
        while True:
            updated = advantages[:, 0] + decays[:, 0] * torch.where(linked, first[successor], 0.0)
            if torch.equal(updated, first):
                break
            first = updated
        advantages = advantages + decays * torch.where(linked, first[successor], 0.0)[:, None]
    return advantages, advantages + values


def compute_lambda_returns(rewards, values, dones, next_value, gamma: float, gae_lambda: float, next_row=None):
    """TD(lambda) returns by their own recursion (Daley & Amato 2019, eq. 3), on the same layout: R_t = r_t + gamma *
    (1 - done_t) * ((1 - lambda) V(s_t+1) + lambda R_t+1), R past a row's end = next_value (or the next row's return).
    A = R - V: GAE written another way for a state-value critic (a test checks it). Returns (advantages, returns)."""
    returns = torch.zeros_like(rewards)
    linked, successor = (next_row >= 0, next_row.clamp(min=0)) if next_row is not None else (None, None)
    beyond = next_value.clone()  # R just past each row's end; chains resolve one link per pass
    while True:
        next_return, next_values = beyond, next_value
        for t in reversed(range(rewards.shape[1])):
            nonterminal = 1.0 - dones[:, t]
            mixed = (1 - gae_lambda) * next_values + gae_lambda * next_return
            returns[:, t] = rewards[:, t] + gamma * nonterminal * mixed
            next_return, next_values = returns[:, t], values[:, t]
        if linked is None:
            break
        updated = torch.where(linked, returns[:, 0][successor], next_value)
        if torch.equal(updated, beyond):
            break
        beyond = updated
    return returns - values, returns


def prio_beta(beta0: float, update: int, num_updates: int) -> float:
    """Importance-weight exponent: beta0 at the first update, exactly 1 at the last (PufferLib's
    beta0 + (1 - beta0) * alpha * progress stops short of 1 whenever alpha < 1)."""
    return 1.0 if num_updates <= 1 else beta0 + (1.0 - beta0) * (update - 1) / (num_updates - 1)


def sample_minibatches(advantages, masks, num_minibatches: int, alpha: float, beta: float):
    """(rows, weights) minibatches of whole rows. alpha == 0: a random permutation of the rows, weights None. alpha > 0:
    rows drawn with replacement, P(s) ~ (sum_t |A[s, t]|) ** alpha, importance weights (N * P(s)) ** -beta (unbiased
    at beta = 1) divided by the minibatch's largest, so they only ever shrink a step (as in prioritized replay)."""
    segments = advantages.shape[0]
    rows_per_minibatch = segments // num_minibatches
    if alpha == 0:
        return [(rows, None) for rows in torch.randperm(segments, device=advantages.device).split(rows_per_minibatch)]
    priority = ((advantages.abs() * masks).sum(1)) ** alpha
    total = priority.sum()
    probs = priority / total if total > 0 else torch.full_like(priority, 1.0 / segments)
    minibatches = []
    for _ in range(num_minibatches):
        rows = torch.multinomial(probs, rows_per_minibatch, replacement=True)
        weights = (segments * probs[rows]) ** -beta
        minibatches.append((rows, weights / weights.max()))
    return minibatches


def ppo_loss(new_logprobs, new_values, entropy, mb: dict, weights, coefs):
    """The clipped PPO objective on a minibatch of rows; all tensors (rows, horizon): the new logprobs, values,
    entropies, and the rollout's `mb` logprobs, values, returns, advantages (normalized), masks (1: a real step).
    The importance `weights` (rows,) multiply the policy and value terms, the estimates prioritized sampling biases;
    the entropy bonus, a regularizer, stays unweighted. No 1/2 in the value loss (pufferl.py 3.0's --vf-coef x is
    our x / 2). coefs: (clip_coef, vf_clip_coef, vf_coef, ent_coef). Returns (loss, the logged losses)."""
    clip_coef, vf_clip_coef, vf_coef, ent_coef = coefs
    advantages, masks = mb["advantages"], mb["masks"]
    logratio = new_logprobs - mb["logprobs"]
    ratio = logratio.exp()
    pg = torch.max(-advantages * ratio, -advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef))
    v_clipped = mb["values"] + torch.clamp(new_values - mb["values"], -vf_clip_coef, vf_clip_coef)
    v = torch.max((new_values - mb["returns"]) ** 2, (v_clipped - mb["returns"]) ** 2)
    if weights is not None:
        pg, v = pg * weights[:, None], v * weights[:, None]
    count = masks.sum().clamp(min=1.0)
    pg_loss, v_loss = (pg * masks).sum() / count, (v * masks).sum() / count
    entropy_mean = (entropy * masks).sum() / count
    loss = pg_loss + vf_coef * v_loss - ent_coef * entropy_mean
    with torch.no_grad():
        approx_kl = (((ratio - 1) - logratio) * masks).sum() / count
        clipfrac = (((ratio - 1.0).abs() > clip_coef).float() * masks).sum() / count
    losses = dict(policy_loss=pg_loss, value_loss=v_loss, entropy=entropy_mean, approx_kl=approx_kl, clipfrac=clipfrac)
    return loss, {key: value.detach() for key, value in losses.items()}


def normalize_advantages(advantages: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """Zero mean, unit std over the minibatch's real steps."""
    count = masks.sum().clamp(min=2.0)
    mean = (advantages * masks).sum() / count
    std = ((((advantages - mean) * masks) ** 2).sum() / (count - 1)).sqrt()
    return (advantages - mean) / (std + 1e-8)


def evaluate(policy: Policy, args: Args, episodes: int, seed: int, device, obs_rms=None, videos=()) -> dict:
    """Plays until every agent of a fresh in-process env has finished one episode (`episodes` envs; Tetris's stats:
    over all games ended), observations scaled by the training's statistics, frozen; per-agent returns and lengths.
    `videos`: paths (.mp4, .gif) to record the first episode to; recording changes nothing that is played."""
    env = dict(env_kwargs=args.env_kwargs, render=bool(videos), step_cap=args.eval_max_steps)
    vecenv = make_puffer_vecenv(args.env_id, episodes, seed, args.max_ticks, log_interval=1, **env)
    vecenv = NormalizedObservations(vecenv, obs_rms, frozen=True) if obs_rms is not None else vecenv
    stats, infos, frames = EpisodeStats(vecenv.num_agents, vecenv.autoreset), [], []
    first_return, first_length = np.full(vecenv.num_agents, np.nan), np.zeros(vecenv.num_agents)
    state = policy.initial_state(vecenv.num_agents, device)
    try:
        vecenv.async_reset(seed)
        while np.isnan(first_return).any():
            obs, rewards, terminals, truncations, step_infos, agents, masks = vecenv.recv()
            infos.extend(step_infos)
            ended_before = len(stats.log.returns)
            ended, starting = stats.update(np.asarray(agents), rewards, terminals | truncations, masks)
            for agent, ret, length in zip(ended, stats.log.returns[ended_before:], stats.log.lengths[ended_before:]):
                if np.isnan(first_return[agent]):
                    first_return[agent], first_length[agent] = ret, length
            if videos and np.isnan(first_return[0]):
                frames.append(puffer_envs.first_frame(vecenv))
            with torch.inference_mode():  # the LSTM state carried through each episode, reset as in training
                if state is not None:
                    keep = torch.as_tensor(~starting, device=device).unsqueeze(-1)
                    state = tuple(x * keep for x in state)
                out, _, state = policy.step(torch.as_tensor(obs, device=device, dtype=torch.float32), state)
            vecenv.send(to_env(policy.choose(out, args.eval_actions), vecenv.single_action_space))
        save_video(frames, videos, puffer_envs.frame_rate(vecenv))
    finally:
        vecenv.close()
    tetris = merge_infos(infos) if infos else {}
    extra = {key: np.array([tetris[key]]) for key in ("lines_deleted", "score") if key in tetris}
    return {"return": first_return, "length": first_length, **extra}


def evaluate_checkpoint(args: Args) -> dict:
    """--eval-checkpoint: --eval-episodes episodes (or, with --render, one Tetris game drawn in the terminal)."""
    ckpt, args, device = run.open_checkpoint("ppo_puffer_async", Args, args, required=("obs_dim", "num_actions"))
    if args.render and args.env_id != "tetris":
        raise ValueError(f"--render draws Tetris games; {args.eval_checkpoint} is a {args.env_id} run: drop --render")
    args = with_env_defaults(args)
    state_size = args.lstm_hidden_size if args.lstm else 0
    head = (ckpt["num_actions"], args.hidden_size, state_size, args.activation, ckpt.get("continuous", False))
    policy = Policy(ckpt["obs_dim"], *head, args.separate_critic)
    run.load_weights(policy.to(device), ckpt, "--eval-checkpoint", args.eval_checkpoint)
    if args.render:
        state = policy.initial_state(1, device)

        def act(obs):
            nonlocal state
            with torch.inference_mode():
                out, _, state = policy.step(torch.as_tensor(obs, device=device), state)
            return policy.choose(out, args.eval_actions).cpu().numpy()

        return watch(act, args.seed + 10_000, args.max_ticks, args.render_fps)
    obs_rms = RunningMeanStd.from_state(ckpt.get("obs_rms"))
    name = f"checkpoint-step{ckpt['global_step']}"
    videos = video_paths(os.path.dirname(args.eval_checkpoint), name, args.capture_video, args.gif)
    stats = evaluate(policy, args, args.eval_episodes, args.seed + 10_000, device, obs_rms, videos)
    episodes = f"{len(stats['return'])} episodes ({args.eval_actions} actions)"
    report(f"{args.eval_checkpoint} (step {ckpt['global_step']:,}), {episodes}:", stats)
    return stats


def train(args: Args) -> dict:
    # One process, or a rank of a torchrun job; --resume: the saved run's flags, and its state as plain data.
    world, device = distributed.init_world(args.dist_backend, run.resolve_device(args.device))
    args, resumed = run.flags(args, "ppo_puffer_async", world, required=("obs_dim", "num_actions"))
    args = with_env_defaults(args)
    validate_args(args)
    seed = args.seed + distributed.RANK_SEED_OFFSET * world.rank  # each rank of a torchrun job plays its own episodes
    torch.set_num_threads(1)  # initial weights drawn on one thread: the same bits whatever the thread count
    torch.manual_seed(args.seed)  # and on every rank

    env = dict(env_kwargs=args.env_kwargs, max_ticks=args.max_ticks, log_interval=args.horizon)
    vec = dict(backend=args.backend, num_workers=args.num_workers, async_factor=args.async_factor)
    vecenv = make_puffer_vecenv(args.env_id, args.num_envs, seed, **env, **vec)
    vecenv = NormalizedObservations(vecenv) if args.norm_obs else vecenv  # running mean/std, frozen for evaluation
    obs_rms = vecenv.obs_rms if args.norm_obs else None
    num_agents = vecenv.num_agents
    validate_args(args, num_agents)
    args = dataclasses.replace(args, batch_size=args.batch_size or num_agents * args.horizon)  # per rank
    segments = args.batch_size // args.horizon
    obs_dim, action_space = vecenv.single_observation_space.shape[0], vecenv.single_action_space
    num_actions, continuous = action_head(action_space)
    state_size = args.lstm_hidden_size if args.lstm else 0
    head = (num_actions, args.hidden_size, state_size, args.activation, continuous, args.separate_critic)
    policy = Policy(obs_dim, *head).to(device)
    optimizer = torch.optim.Adam(policy.parameters(), lr=args.learning_rate, eps=1e-5)
    stats = EpisodeStats(num_agents, vecenv.autoreset, args.gamma if args.norm_reward else None)

    torch.set_num_threads(args.torch_threads or 1)  # (the Tetris default gives torch both cores)
    # The run in whole updates; a resumed run goes on from its saved update, weights, statistics and schedule.
    update_size = args.batch_size * world.size  # agent steps per update, all ranks together
    num_updates = run.count_updates(args.total_timesteps, update_size, world.size, resumed)
    end_step = num_updates * update_size
    lr_anchor = run.schedule_anchor(args.learning_rate, update_size, end_step, resumed)
    start_update, run_name = 1, make_run_name(args.env_id, args.exp_name, args.seed)
    if resumed is not None:
        run.restore(resumed, args.resume, policy, optimizer, obs_rms=obs_rms, return_rms=stats.reward_scaler)
        start_update, run_name = resumed["update"] + 1, resumed["run_name"]
    if world.size > 1:  # torchrun: rank 0's weights and run name on every rank
        run_name = distributed.join_ranks(world, policy, run_name, seed + start_update)
    # What each checkpoint holds besides the flags and the step (objects: their state_dict() at each save).
    saved = dict(lr_anchor=lr_anchor, model=policy, optimizer=optimizer, obs_dim=obs_dim, num_actions=num_actions)
    saved.update(continuous=continuous, obs_rms=obs_rms, return_rms=stats.reward_scaler)
    writer, checkpoint = run.open_run("ppo_puffer_async", args, run_name, update_size, world, resumed, **saved)
    if world.rank == 0:
        describe = f"{args.env_id}, {num_agents} agents, {args.async_factor} group(s), {segments} rows x {args.horizon}"
        announce(run_name, describe, start_update, num_updates, update_size, world, device, args.total_timesteps)
    stop, progress = distributed.StopRequest(world), Progress(end_step, start_step=(start_update - 1) * update_size)

    actions = (action_space.shape, torch.float32 if continuous else torch.long)
    experience = Experience(segments, args.horizon, num_agents, obs_dim, device, state_size, actions)
    vecenv.async_reset(seed + 1_000_000 * (start_update - 1))  # a resumed run plays fresh episodes
    timers, episode_means, tetris = dict(env=0.0, inference=0.0, learn=0.0), {}, {}
    last_eval, eval_text, completed, interrupted = None, "", start_update - 1, False
    try:
        for update in range(start_update, num_updates + 1):
            global_step = update * update_size  # once this update is done
            ent_coef = args.ent_coef
            if args.anneal_ent:  # from --ent-coef at the first update to 0 at the last
                ent_coef -= args.ent_coef * (update - 1) / max(num_updates - 1, 1)
            coefs = (args.clip_coef, args.vf_clip_coef, args.vf_coef, ent_coef)
            if args.anneal_lr:
                optimizer.param_groups[0]["lr"] = run.annealed_lr(lr_anchor, global_step - update_size, end_step)
            scale = args.reward_scale / stats.reward_scaler.std() if args.norm_reward else args.reward_scale
            infos = rollout(vecenv, policy, experience, stats, args.gamma, scale, args.reward_clamp, device, timers)

            start = time.perf_counter()
            masks = experience.masks.float()
            dones = torch.maximum(experience.terminals, experience.truncations)
            estimate = compute_gae if args.advantage == "gae" else compute_lambda_returns
            rewards, values, next_value = experience.rewards, experience.values, experience.next_value
            advantages, returns = estimate(
                rewards, values, dones, next_value, args.gamma, args.gae_lambda, experience.next_row
            )
            beta = prio_beta(args.prio_beta0, update, num_updates)
            for epoch in range(args.update_epochs):
                for rows, weights in sample_minibatches(advantages, masks, args.num_minibatches, args.prio_alpha, beta):
                    state, starts = take(experience.initial_state, rows), take(experience.starts, rows)
                    obs = experience.obs[rows]
                    out, new_values = policy.unroll(obs, state, starts, args.burn_in, args.tbptt or 0)
                    new_logprobs, entropy = policy.logprob_and_entropy(out, experience.actions[rows])
                    mb = dict(logprobs=experience.logprobs[rows], values=values[rows], returns=returns[rows])
                    mb["masks"] = masks[rows]
                    if args.burn_in:  # burn-in steps only warm the state up
                        mb["masks"][:, : args.burn_in] = 0.0
                    mb["advantages"] = normalize_advantages(advantages[rows], mb["masks"])
                    loss, losses = ppo_loss(new_logprobs, new_values, entropy, mb, weights, coefs)
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    # Under torchrun: the gradients averaged over the ranks, and approx_kl with them, so every
                    # rank stops at the same epoch; a non-finite loss stops the run.
                    losses["approx_kl"] = distributed.allreduce_gradients(
                        world, policy.parameters(), loss, losses["approx_kl"], update=update, step=global_step
                    )
                    losses["grad_norm"] = nn.utils.clip_grad_norm_(policy.parameters(), args.max_grad_norm)
                    optimizer.step()
                if args.target_kl is not None and losses["approx_kl"] > args.target_kl:
                    break
            timers["learn"] += time.perf_counter() - start

            # Every rank's episodes and Tetris stats, and whether any rank saw a Ctrl-C (torchrun).
            returns_, lengths, infos, stops = distributed.pool(world, *stats.log.pop(), infos, [stop.requested])
            scalars = {f"losses/{key}": value.item() for key, value in losses.items()}
            scalars["losses/explained_variance"] = logs.explained_variance(values[masks > 0], returns[masks > 0])
            scalars["charts/learning_rate"] = optimizer.param_groups[0]["lr"]
            scalars.update({"charts/prio_beta": beta, "charts/ent_coef": ent_coef})
            if continuous:  # the Gaussian's std, mean over the action's dimensions: how much the policy still explores
                scalars["charts/action_std"] = policy.log_std.exp().mean().item()
            scalars.update({f"perf/{key}_time_frac": value / sum(timers.values()) for key, value in timers.items()})
            scalars["charts/SPS"] = progress.sps(global_step)
            if vecenv.agents_per_env > 1:
                scalars["charts/agent_steps"] = global_step
                scalars["charts/env_steps"] = global_step / vecenv.agents_per_env
            if returns_:
                episode_means = {"return": float(np.mean(returns_)), "length": float(np.mean(lengths))}
                scalars.update({f"charts/episodic_{key}": value for key, value in episode_means.items()})
            if infos:  # Tetris's own stats
                tetris = merge_infos(infos)
                scalars.update({f"tetris/{key}": value for key, value in tetris.items()})
            if world.rank == 0 and (args.eval_freq and update % args.eval_freq == 0 or update == num_updates):
                videos = video_paths(checkpoint.run_dir, f"eval-step{global_step}", args.capture_video)
                eval_seed = args.seed + 10_000 + update  # the evaluation's own episodes and random stream
                with progress.paused(), run.seeded_rng(eval_seed, device):
                    result = evaluate(policy, args, args.eval_episodes, eval_seed, device, obs_rms, videos)
                last_eval, eval_text = log_eval(writer, result["return"], global_step, result.get("lines_deleted"))
            if writer is not None:
                for tag, value in scalars.items():
                    writer.add_scalar(tag, value, global_step)
                ret, length = episode_means.get("return"), episode_means.get("length")
                lines = tetris.get("lines_deleted")
                progress.update(global_step, update=update, ret=ret, len=length, lines=lines, eval=last_eval)
            completed = update
            if args.checkpoint_freq and update % args.checkpoint_freq == 0:
                checkpoint.save(update)  # a periodic save that fails warns; training goes on
            if any(stops):  # torchrun: a Ctrl-C every rank agreed on; all stop after this update
                interrupted = True
                break
    except KeyboardInterrupt:  # Ctrl-C: the half-done update is dropped, the last whole one saved below
        interrupted = True
    except WorkerError as e:  # an env worker died; the network is intact, so keep what it learned
        raise run.worker_lost(e, checkpoint, completed) from None
    except RuntimeError as e:  # torchrun: another rank died in a collective; rank 0 saves what was learned
        raise run.rank_lost(e, world, checkpoint, completed) from None
    finally:
        run.close(world, vecenv, writer)  # the envs and their workers, the writer, the torchrun group
    checkpoint.save(completed, final=True)  # fails with one line naming the checkpoint that was kept
    if world.rank == 0:
        print_end(interrupted, checkpoint, progress, completed * update_size, eval_text)
    extra = dict(policy=policy, args=args, obs_rms=obs_rms, episode_stats=episode_means, tetris_stats=tetris)
    return run.summary(checkpoint, progress, completed, interrupted, **extra)


def main(argv=None) -> None:
    args = run.parse_args(Args, argv, help_defaults=env_defaults)
    try:
        if args.eval_checkpoint:
            evaluate_checkpoint(args)
        elif train(args)["interrupted"]:  # train() saved and said how to resume
            raise SystemExit(run.EXIT_INTERRUPTED)
    except (KeyboardInterrupt, WorkerError, *run.ONE_LINE_ERRORS) as e:  # Ctrl-C starting up or evaluating; bad flags
        raise run.exit_for(e) from None


if __name__ == "__main__":
    main()
