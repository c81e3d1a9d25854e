"""PufferLib-style PPO (seed 002: PufferLib 3.0's trainer loop) in one file, correct where PufferLib is not.

Read top to bottom: Args, network, experience buffer, rollout, advantages, prioritized sampling, loss,
evaluation, data parallel, train(), main(). What it teaches, from PufferLib:
  * async double buffering: the envs are split into --async-factor groups; the loop is
    recv(group) -> policy -> store -> send(actions), so one group steps while the policy runs on another;
  * a (segments x horizon) buffer: each agent fills a row of --horizon consecutive steps, then takes the
    next free row; rows are the unit of sampling and of an LSTM's sequences, and a multi-agent env is just
    more agents, each owning rows;
  * prioritized minibatches of whole rows, sampled by the size of their advantages.
Where PufferLib 3.0's `PuffeRL` (pufferl.py) goes wrong and this file does not (the README has the table):
truncation is bootstrapped with V(final observation); emulated envs' reset steps never enter the buffer;
a row's last step bootstraps from the agent's next observation; rewards are not clamped unless asked;
absent agents carry no loss; rows are tracked per agent id, whatever order the groups come back in;
importance weights are normalized and beta reaches 1; workers sleep and a dead one ends the run
(common/vector.py); --lstm rows are replayed from the state the rollout stored, reset where it reset it.

    python ppo_puffer_async.py                                   # Tetris
    python ppo_puffer_async.py --env-id mpe-spread               # 3 agents per env, async workers
    python ppo_puffer_async.py --env-id CartPole-v1
    python ppo_puffer_async.py --env-id cartpole-novel --lstm    # velocities hidden: memory needed
    python ppo_puffer_async.py --eval-checkpoint runs/<run>/ppo_puffer_async.pt
    torchrun --standalone --nproc-per-node 2 ppo_puffer_async.py   # data-parallel: 2 ranks, each its own envs
"""

import dataclasses
import os
import signal
import time
from dataclasses import dataclass
from typing import Literal, Optional

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import tyro

from common.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from common.envs import make_puffer_vecenv
from common.logs import Progress, make_run_name, make_writer
from common.tetris import Tetris
from common.vector import WorkerError


@dataclass
class Args:
    exp_name: str = "ppo_puffer_async"
    """the name of this experiment (part of the run name)"""
    env_id: str = "tetris"
    """tetris (our native Tetris), mpe-spread (PettingZoo MPE simple_spread, 3 agents per env), the memory envs
    cartpole-novel and repeat-previous-easy (use --lstm), or a Gymnasium id with a flat Box observation and
    Discrete actions (e.g. CartPole-v1)"""
    seed: int = 1
    """seed of the experiment (torch, envs)"""
    device: Literal["cpu", "cuda", "auto"] = "cpu"
    """where the network runs (auto: cuda if available)"""
    torch_threads: int = 1
    """torch CPU threads of the learner; on 2 shared cores one is fastest"""
    total_timesteps: Optional[int] = None
    """agent steps of training, as PufferLib counts them, all ranks together (default per env; on --resume: the
    saved total)"""
    num_envs: Optional[int] = None
    """envs per rank (Tetris: games; mpe-spread: envs of 3 agents); under torchrun every rank has this many
    (default per env)"""
    async_factor: Optional[int] = None
    """K groups of envs: the policy runs on one group while the others step; 1 = synchronous (default per env)"""
    backend: Optional[Literal["Serial", "Multiprocessing"]] = None
    """Serial: envs step in this process; Multiprocessing: --num-workers sleeping worker processes (default per env)"""
    num_workers: Optional[int] = None
    """worker processes with --backend Multiprocessing (default per env)"""
    horizon: Optional[int] = None
    """steps per buffer row (a segment); rows are the unit of minibatches and of LSTM sequences (default per env)"""
    batch_size: Optional[int] = None
    """agent steps per update = segments x horizon; segments must be a multiple of the agents (default: one row per agent)"""
    num_minibatches: Optional[int] = None
    """minibatches per update epoch, each of segments / num_minibatches whole rows (default per env)"""
    update_epochs: Optional[int] = None
    """passes over each rollout (default per env)"""
    learning_rate: Optional[float] = None
    """Adam's learning rate, annealed linearly to 0 (default per env)"""
    anneal_lr: bool = True
    """linearly anneal the learning rate to 0 at --total-timesteps"""
    gamma: Optional[float] = None
    """the discount factor (default per env)"""
    gae_lambda: Optional[float] = None
    """the GAE lambda (default per env)"""
    clip_coef: Optional[float] = None
    """the surrogate clipping coefficient (default per env)"""
    vf_clip_coef: Optional[float] = None
    """the value may move at most this far from the rollout's estimate (default per env)"""
    vf_coef: Optional[float] = None
    """the value-loss coefficient (default per env)"""
    ent_coef: Optional[float] = None
    """the entropy-bonus coefficient (default per env)"""
    max_grad_norm: float = 0.5
    """the maximum global gradient norm (clipping)"""
    target_kl: Optional[float] = None
    """stop the update's epochs early once approx_kl exceeds this (None: never); under torchrun the ranks'
    mean decides, so all stop together"""
    prio_alpha: Optional[float] = None
    """prioritized rows: P(row) ~ (sum of |advantage| over the row) ** alpha; 0 = uniform without replacement (default per env)"""
    prio_beta0: float = 0.2
    """importance-weight exponent at the start, annealed linearly to exactly 1 at the last update"""
    reward_scale: Optional[float] = None
    """multiply rewards by this for learning (returns are logged unscaled); an LSTM's bounded output needs
    values near unit scale (default per env)"""
    reward_clamp: Optional[float] = None
    """clamp rewards to [-x, x] for learning (PufferLib always clamps to 1; we never do unless asked)"""
    hidden_size: Optional[int] = None
    """width of the two hidden layers of the encoder (default per env)"""
    lstm: bool = False
    """an LSTM between the encoder and the heads (for the memory envs: cartpole-novel, repeat-previous-easy)"""
    lstm_hidden_size: int = 64
    """width of the LSTM's state"""
    burn_in: int = 0
    """with --lstm: the first K steps of each row only advance the state (no gradient, no loss)"""
    tbptt: Optional[int] = None
    """with --lstm: detach the state every L steps of a row (truncated BPTT; default: --horizon, no detach)"""
    advantage: Literal["gae", "lambda-return"] = "gae"
    """GAE, or seed 003's recursive lambda-return R_t = r_t + gamma((1 - lambda)V(s_t+1) + lambda R_t+1), A = R - V"""
    max_ticks: int = 10_000
    """Tetris: a game is truncated (and bootstrapped) after this many steps"""
    eval_freq: int = 0
    """evaluate every this many updates during training (0: never)"""
    eval_episodes: int = 10
    """episodes per evaluation (per agent for multi-agent envs)"""
    eval_actions: Literal["per-env", "greedy", "sampled"] = "per-env"
    """evaluate with the most likely action or by sampling (per-env: greedy for Gymnasium ids and the memory
    envs, sampled for tetris and mpe-spread, as in training)"""
    checkpoint_freq: int = 50
    """save runs/<run>/ppo_puffer_async.pt every this many updates (0: only at the end and on Ctrl-C)"""
    resume: Optional[str] = None
    """continue the run saved in this checkpoint (its flags, except --total-timesteps and --device)"""
    eval_checkpoint: Optional[str] = None
    """load this checkpoint and only evaluate it over --eval-episodes episodes"""
    render: bool = False
    """with --eval-checkpoint on Tetris: watch one game in the terminal"""
    render_fps: float = 10.0
    """board redraws per second with --render"""
    dist_backend: Literal["auto", "gloo", "nccl"] = "auto"
    """torch.distributed backend under torchrun (auto: nccl with --device cuda, gloo on CPU)"""


# Where one size cannot fit. Measured on the 2-core development machine (see README):
#   tetris: the network, not the env (6% of the time in a profile), is the cost, so envs step in-process;
#   mpe-spread: the env is the bottleneck (~70 us per env step), so 2 sleeping workers step one group
#   each while the learner runs the policy on the other;
#   Gymnasium ids (CartPole): small and fast; vf_coef 0.1 because CartPole's values (~100) otherwise swamp
#   the policy gradient in the shared encoder (greedy eval after 60k steps, seeds 1-5: 444-500 with 0.1;
#   seed 1 at 260 with 0.5). 100k steps: 5 of 5 seeds at 500 by 80k.
ENV_DEFAULTS = {
    "tetris": dict(horizon=64, total_timesteps=60_000_000, num_envs=512, async_factor=1, backend="Serial", num_workers=1,
                   num_minibatches=8, update_epochs=2, learning_rate=1e-3, gamma=0.99, gae_lambda=0.95,
                   clip_coef=0.2, vf_clip_coef=0.2, vf_coef=0.5, ent_coef=0.03, prio_alpha=0.0, hidden_size=128,
                   greedy_eval=False, reward_scale=1.0),
    "mpe-spread": dict(horizon=64, total_timesteps=7_500_000, num_envs=128, async_factor=2, backend="Multiprocessing",
                       num_workers=2, num_minibatches=8, update_epochs=1, learning_rate=1e-3, gamma=0.977,
                       gae_lambda=0.916, clip_coef=0.1, vf_clip_coef=0.1, vf_coef=0.44, ent_coef=0.01,
                       prio_alpha=0.0, hidden_size=128, greedy_eval=False, reward_scale=1.0),
    "gymnasium": dict(horizon=64, total_timesteps=100_000, num_envs=8, async_factor=1, backend="Serial", num_workers=1,
                      num_minibatches=4, update_epochs=4, learning_rate=2.5e-3, gamma=0.99, gae_lambda=0.95,
                      clip_coef=0.2, vf_clip_coef=10.0, vf_coef=0.1, ent_coef=0.0, prio_alpha=0.0, hidden_size=64,
                      greedy_eval=True, reward_scale=1.0),
    # Memory envs (for --lstm): short rows. cartpole-novel: RL Zoo's CartPoleNoVel sizes (8 envs, gamma 0.98)
    # in rows of 25 (200 steps per update: evals at whole 10k steps), 10 epochs of one minibatch; rewards x 0.1,
    # since the LSTM's output is bounded and its value head could not reach CartPole's returns (~50): without
    # it the LSTM did not even learn CartPole-v1. lambda 0.95 and lr 5e-4, not RL Zoo's 0.8 and 1e-3: with
    # those, solved policies kept collapsing (5 seeds: 5 of 5 stably solved vs 1 of 3). A sweep of single changes
    # on seeds 11-18 (lr, lambda, gamma, epochs, minibatches, widths, clips, reward scale) found none better (README).
    "cartpole-novel": dict(horizon=25, total_timesteps=100_000, num_envs=8, async_factor=1, backend="Serial",
                           num_workers=1, num_minibatches=1, update_epochs=10, learning_rate=5e-4, gamma=0.98,
                           gae_lambda=0.95, clip_coef=0.2, vf_clip_coef=10.0, vf_coef=0.5, ent_coef=0.0,
                           prio_alpha=0.0, hidden_size=64, greedy_eval=True, reward_scale=0.1),
    "repeat-previous-easy": dict(horizon=32, total_timesteps=1_000_000, num_envs=32, async_factor=1,
                                 backend="Serial", num_workers=1, num_minibatches=4, update_epochs=4,
                                 learning_rate=1e-3, gamma=0.99, gae_lambda=0.95, clip_coef=0.2, vf_clip_coef=10.0,
                                 vf_coef=0.5, ent_coef=0.01, prio_alpha=0.0, hidden_size=64, greedy_eval=True, reward_scale=1.0),
}


def with_env_defaults(args: Args) -> Args:
    """Fills every flag left at None with its env's default (one worker when the backend is Serial)."""
    defaults = dict(ENV_DEFAULTS.get(args.env_id, ENV_DEFAULTS["gymnasium"]))
    if args.backend == "Serial":
        defaults["num_workers"] = 1
    greedy = defaults.pop("greedy_eval")
    if args.eval_actions == "per-env":
        defaults["eval_actions"] = "greedy" if greedy else "sampled"
    return dataclasses.replace(args, **{k: v for k, v in defaults.items()
                                        if k == "eval_actions" or getattr(args, k) is None})


def validate_args(args: Args, num_agents: Optional[int] = None) -> None:
    """Bad flags fail here, before any network is built, naming the flag to change. With num_agents
    (known once the env is built) the buffer layout is checked too."""
    for flag, value in [("--num-envs", args.num_envs), ("--num-workers", args.num_workers),
                        ("--async-factor", args.async_factor), ("--horizon", args.horizon),
                        ("--num-minibatches", args.num_minibatches), ("--update-epochs", args.update_epochs),
                        ("--eval-episodes", args.eval_episodes), ("--max-ticks", args.max_ticks),
                        ("--torch-threads", args.torch_threads), ("--hidden-size", args.hidden_size)]:
        if value < 1:
            raise ValueError(f"{flag} must be at least 1 (got {value})")
    for flag, value in [("--learning-rate", args.learning_rate), ("--clip-coef", args.clip_coef),
                        ("--vf-clip-coef", args.vf_clip_coef), ("--render-fps", args.render_fps)]:
        if value <= 0:
            raise ValueError(f"{flag} must be positive (got {value})")
    if args.lstm and not 0 <= args.burn_in < args.horizon:
        raise ValueError(f"--burn-in {args.burn_in} must be in [0, --horizon {args.horizon}): the rest of each row "
                         "is what trains")
    if args.tbptt is not None and args.tbptt < 1:
        raise ValueError(f"--tbptt must be at least 1 (got {args.tbptt})")
    if (args.burn_in or args.tbptt) and not args.lstm:
        raise ValueError("--burn-in and --tbptt apply to the LSTM: add --lstm")
    if not 0 <= args.prio_beta0 <= 1:
        raise ValueError(f"--prio-beta0 must be in [0, 1] (got {args.prio_beta0})")
    if args.target_kl is not None and args.target_kl <= 0:
        raise ValueError(f"--target-kl must be positive (got {args.target_kl}); leave it out to never stop early")
    if args.prio_alpha < 0:
        raise ValueError(f"--prio-alpha must be >= 0 (got {args.prio_alpha})")
    if args.reward_scale <= 0:
        raise ValueError(f"--reward-scale must be positive (got {args.reward_scale})")
    if args.reward_clamp is not None and args.reward_clamp <= 0:
        raise ValueError(f"--reward-clamp must be positive (got {args.reward_clamp})")
    if args.checkpoint_freq < 0 or args.eval_freq < 0:
        raise ValueError("--checkpoint-freq and --eval-freq must be >= 0")
    if args.render and not args.eval_checkpoint:
        raise ValueError("--render needs --eval-checkpoint PATH (the agent to watch)")
    if args.render and args.env_id != "tetris":
        raise ValueError("--render draws Tetris only; drop --render or use --env-id tetris")
    if args.resume and args.eval_checkpoint:
        raise ValueError("--resume and --eval-checkpoint exclude each other: evaluate with --eval-checkpoint alone")
    if args.backend == "Serial" and args.num_workers != 1:
        raise ValueError(f"--num-workers {args.num_workers} needs --backend Multiprocessing (Serial steps envs in "
                         "this process)")
    if num_agents is None:
        return
    batch_size = args.batch_size or num_agents * args.horizon
    if batch_size % args.horizon:
        raise ValueError(f"--batch-size {batch_size} must be a multiple of --horizon {args.horizon}")
    segments = batch_size // args.horizon
    if segments % num_agents:
        raise ValueError(f"--batch-size {batch_size} / --horizon {args.horizon} = {segments} rows must be a multiple "
                         f"of the {num_agents} agents (--num-envs x agents per env), so every agent fills whole rows")
    if segments % args.num_minibatches:
        raise ValueError(f"--num-minibatches {args.num_minibatches} must divide the {segments} rows "
                         f"(--batch-size / --horizon)")


# ----- network -----

def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Policy(nn.Module):
    """Encoder MLP (2 hidden layers), optionally an LSTM, then a policy head and a value head.

    `step` acts for a batch of agents (one observation each, with their recurrent state); `unroll` replays
    rows of `horizon` steps from each row's stored initial state, resetting the state where the rollout
    did, so the update sees exactly what the rollout saw. Without an LSTM both are the same MLP.
    """

    def __init__(self, obs_dim: int, num_actions: int, hidden_size: int, lstm_hidden_size: int = 0):
        super().__init__()
        self.encoder = nn.Sequential(
            layer_init(nn.Linear(obs_dim, hidden_size)), nn.ReLU(),
            layer_init(nn.Linear(hidden_size, hidden_size)), nn.ReLU(),
        )
        # nn.LSTM, not a loop of LSTMCells: a whole stretch of a row is one fused call (cartpole-novel trains
        # ~1.7x faster for it, README); `step` runs it on sequences of length 1.
        self.lstm = nn.LSTM(hidden_size, lstm_hidden_size, batch_first=True) if lstm_hidden_size else None
        head_size = lstm_hidden_size or hidden_size
        # Small policy-head init keeps the first policy near uniform; value head at unit scale.
        self.actor = layer_init(nn.Linear(head_size, num_actions), std=0.01)
        self.critic = layer_init(nn.Linear(head_size, 1), std=1.0)

    def initial_state(self, n: int, device: torch.device):
        return None if self.lstm is None else tuple(torch.zeros(n, self.lstm.hidden_size, device=device)
                                                    for _ in range(2))

    def step(self, obs: torch.Tensor, state=None):
        """(logits, value, next state) for one observation per agent."""
        hidden = self.encoder(obs)
        if self.lstm is not None:
            out, (h, c) = self.lstm(hidden.unsqueeze(1), None if state is None else tuple(x.unsqueeze(0) for x in state))
            hidden, state = out[:, 0], (h[0], c[0])
        return self.actor(hidden), self.critic(hidden).squeeze(-1), state

    def unroll(self, obs: torch.Tensor, state=None, starts=None, burn_in: int = 0, tbptt: int = 0):
        """(logits, values) for rows (rows, horizon, obs) from their initial `state`. `starts[:, t]` marks
        the steps before which the rollout reset the state (an episode began); the first `burn_in` steps only
        advance the state, without gradient; the state is detached every `tbptt` steps."""
        hidden = self.encoder(obs)
        if self.lstm is not None:
            # The rows are cut only where something happens to the state between two steps: an episode
            # begins in some row (its state is zeroed), burn-in ends, or tbptt detaches. Each stretch
            # between cuts is one nn.LSTM call. (The stored initial state is already reset where t = 0
            # began an episode.)
            horizon = obs.shape[1]
            cuts = set() if starts is None else set((starts[:, 1:].any(0).nonzero().flatten() + 1).tolist())
            if burn_in:
                cuts.add(burn_in)
            if tbptt:
                cuts.update(range(tbptt, horizon, tbptt))
            bounds = [0] + sorted(cuts) + [horizon]
            h, c = (x.unsqueeze(0) for x in state)
            outputs = []
            for t, end in zip(bounds[:-1], bounds[1:]):
                if t > 0:
                    if starts is not None:
                        keep = (~starts[:, t]).to(h.dtype)[None, :, None]
                        h, c = h * keep, c * keep
                    if tbptt and t % tbptt == 0:
                        h, c = h.detach(), c.detach()
                with torch.set_grad_enabled(torch.is_grad_enabled() and t >= burn_in):
                    out, (h, c) = self.lstm(hidden[:, t:end], (h, c))
                outputs.append(out)
            hidden = torch.cat(outputs, 1)
        return self.actor(hidden), self.critic(hidden).squeeze(-1)


def sample_actions(logits: torch.Tensor):
    """Sample from the categorical policy; returns (actions, logprobs)."""
    logprobs_all = torch.log_softmax(logits, dim=-1)
    actions = torch.multinomial(logprobs_all.exp(), 1).squeeze(-1)
    return actions, logprobs_all.gather(-1, actions.unsqueeze(-1)).squeeze(-1)


def logprob_and_entropy(logits: torch.Tensor, actions: torch.Tensor):
    logprobs_all = torch.log_softmax(logits, dim=-1)
    entropy = -(logprobs_all.exp() * logprobs_all).sum(-1)
    return logprobs_all.gather(-1, actions.unsqueeze(-1)).squeeze(-1), entropy


# ----- experience buffer and rollout -----

class Experience:
    """The (segments, horizon) buffer and the per-agent bookkeeping that fills it.

    Each agent owns a current row and a position in it. A step's observation, action, logprob and value
    are stored when the policy acts; its reward and end flags when the agent's next observation arrives.
    A full row is handed over and the agent takes the next free row; once none is free the agent keeps
    playing without storing, and the rollout ends when every row is full. `next_row[s]` links a row to
    the same agent's following row (-1: the rollout ended first) and `next_value[s]` is V of the
    observation after the row's last step, so no step lacks its bootstrap.
    With an LSTM (`state_size` > 0) it also keeps each agent's current (h, c), each row's initial (h, c),
    and `starts[s, t]`: the rollout reset the state before step t (an episode began there).
    """

    def __init__(self, segments: int, horizon: int, num_agents: int, obs_dim: int, device: torch.device,
                 state_size: int = 0):
        self.segments, self.horizon, self.num_agents = segments, horizon, num_agents
        shape = (segments, horizon)
        self.obs = torch.zeros(shape + (obs_dim,), device=device)
        self.actions = torch.zeros(shape, dtype=torch.long, device=device)
        self.logprobs, self.values, self.rewards, self.terminals, self.truncations = (
            torch.zeros(shape, device=device) for _ in range(5))
        self.masks = torch.zeros(shape, dtype=torch.bool, device=device)
        self.next_value = torch.zeros(segments, device=device)
        self.next_row = torch.full((segments,), -1, dtype=torch.long, device=device)
        self.row = np.zeros(num_agents, dtype=np.int64)        # -1: no free row left this rollout
        self.pos = np.zeros(num_agents, dtype=np.int64)
        self.pending = np.zeros(num_agents, dtype=bool)         # a stored step awaits its reward
        if state_size:  # carried across rollouts, like the episodes themselves
            self.state = tuple(torch.zeros(num_agents, state_size, device=device) for _ in range(2))
            self.initial_state = tuple(torch.zeros(segments, state_size, device=device) for _ in range(2))
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

    def store_steps(self, agents, obs, actions, logprobs, values, masks, starts=None, state=None) -> None:
        """Stores the steps the policy just took; with an LSTM, `state` is the (h, c) each step started from."""
        rows, pos = torch.as_tensor(self.row[agents]), torch.as_tensor(self.pos[agents])
        self.obs[rows, pos] = obs
        self.actions[rows, pos] = actions
        self.logprobs[rows, pos] = logprobs
        self.values[rows, pos] = values
        self.masks[rows, pos] = masks
        if state is not None:
            self.starts[rows, pos] = starts
            first = pos == 0  # a row starts here: it is replayed from this state
            for stored, now in zip(self.initial_state, state):
                stored[rows[first]] = now[first]
        self.pending[agents] = True


class EpisodeStats:
    """Per-agent episode bookkeeping for every env kind: return and length, counted by the learner, and
    which observations begin an episode (where an LSTM's state restarts from zeros).

    Episode ends: with "same_step" autoreset (our Tetris) the observation after an end is already the next
    episode's (the true last one is in `vecenv.final_observations`); with "next_step" (PufferLib's emulation)
    the observation after an end IS the last one, the action on it is ignored, and the next recv brings the
    reset observation with reward 0, which is no transition and is not counted.
    """

    def __init__(self, num_agents: int, autoreset: str):
        self.next_step_reset = autoreset == "next_step"
        self.ep_return = np.zeros(num_agents)
        self.ep_length = np.zeros(num_agents, dtype=np.int64)
        self.acting = np.zeros(num_agents, dtype=bool)  # the last action sent was a real step
        self.ended = np.zeros(num_agents, dtype=bool)   # the last observation ended an episode
        self.returns, self.lengths = [], []

    def update(self, agents, rewards, dones, masks):
        """Counts this recv's rewards. Returns (the agents whose episode ended, a bool per agent: this
        observation begins an episode)."""
        acting = self.acting[agents]
        acted = agents[acting]
        self.ep_return[acted] += rewards[acting]
        self.ep_length[acted] += 1
        ended = acted[dones[acting]]
        self.returns.extend(self.ep_return[ended])
        self.lengths.extend(self.ep_length[ended])
        self.ep_return[ended], self.ep_length[ended] = 0.0, 0
        starting = self.ended[agents] if self.next_step_reset else dones
        self.ended[agents] = dones
        # The observation that ends an emulated episode is its last, not a state to act in. Absent agents
        # (mask False) act on nothing either.
        self.acting[agents] = masks & ~dones if self.next_step_reset else masks
        return ended, starting

    def pop(self):
        returns, lengths, self.returns, self.lengths = self.returns, self.lengths, [], []
        return returns, lengths


def merge_infos(infos: list) -> dict:
    """Tetris reports means over the games ended since its last report and their count n: weight by n."""
    total = sum(info["n"] for info in infos)
    return {key: sum(info[key] * info["n"] for info in infos) / total for key in infos[0] if key != "n"}


def rollout(vecenv, policy: Policy, experience: Experience, stats: EpisodeStats, gamma: float,
            reward_scale: float, reward_clamp: Optional[float], device: torch.device, timers: dict) -> list:
    """recv(group) -> policy -> store -> send until every row of `experience` is full. Returns env infos.

    Whatever order the groups come back in, each agent's steps go to its own row, in order. A truncated
    step's reward gets gamma * V(final observation): the episode could have gone on (episode ends of either
    autoreset kind: see EpisodeStats).
    """
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
            obs_t = torch.as_tensor(obs, device=device)
            carried = state = None
            if policy.lstm is not None:  # each agent's state after its last step, zeroed where an episode begins
                agents_t, starting = torch.as_tensor(agents, device=device), torch.as_tensor(starting, device=device)
                carried = tuple(x[agents_t] for x in experience.state)
                state = tuple(x * (~starting).unsqueeze(-1) for x in carried)
            logits, values, next_state = policy.step(obs_t, state)
            actions, logprobs = sample_actions(logits)
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
                    ended = torch.as_tensor(np.flatnonzero(pending)[truncated])
                    with torch.inference_mode():
                        final_values = policy.step(torch.as_tensor(final_obs, device=device),
                                                   carried and tuple(x[ended] for x in carried))[1]
                rewards_t[torch.as_tensor(truncated)] += gamma * final_values
            experience.finish_steps(agents[pending], rewards_t,
                                    torch.as_tensor(terminals[pending], device=device, dtype=torch.float32),
                                    torch.as_tensor(truncations[pending], device=device, dtype=torch.float32),
                                    values[torch.as_tensor(pending)])

        # The observation that ends an emulated episode is not acted on, so it is no step. Absent agents'
        # steps (mask False) are stored, flagged, and carry no loss.
        store = experience.row[agents] >= 0
        if next_step_reset:
            store &= ~(dones & masks)
        if store.any():
            store_t = torch.as_tensor(store)
            experience.store_steps(agents[store], obs_t[store_t], actions[store_t], logprobs[store_t],
                                   values[store_t], torch.as_tensor(masks[store], device=device),
                                   starting[store_t] if state else None, state and tuple(x[store_t] for x in state))
        actions_np = actions.cpu().numpy().astype(np.int32)
        timers["inference"] += time.perf_counter() - start

        start = time.perf_counter()
        vecenv.send(actions_np)
        timers["env"] += time.perf_counter() - start
    return infos


# ----- advantages -----

def compute_gae(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, next_value: torch.Tensor,
                gamma: float, gae_lambda: float, next_row: Optional[torch.Tensor] = None):
    """Generalized Advantage Estimation per row, on (segments, horizon) tensors: the other scripts'
    compute_gae transposed.

    `dones[s, t]` = 1 when the transition at (s, t) ended the episode (terminal: nothing is bootstrapped;
    truncation: gamma * V(final obs) is already in the reward), `next_value[s]` = V of the observation after
    row s's last step. With `next_row` (the same agent's following row, -1 for none) the lambda-chain also
    runs on into that row, so the advantages equal plain GAE over each agent's whole trajectory; without it
    each row is cut at its end (bootstrapped by next_value alone). Returns (advantages, returns).
    """
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
        # A row's first advantage depends on its successor's: resolve the chains from their ends, one
        # link per pass (at most rows-per-agent passes), then add each successor's share to every step.
        linked, successor = next_row >= 0, next_row.clamp(min=0)
        first = advantages[:, 0].clone()
        while True:
            updated = advantages[:, 0] + decays[:, 0] * torch.where(linked, first[successor], 0.0)
            if torch.equal(updated, first):
                break
            first = updated
        advantages = advantages + decays * torch.where(linked, first[successor], 0.0)[:, None]
    return advantages, advantages + values


def compute_lambda_returns(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor,
                           next_value: torch.Tensor, gamma: float, gae_lambda: float,
                           next_row: Optional[torch.Tensor] = None):
    """Seed 003's TD(lambda) returns, by their own recursion (Daley & Amato 2019, eq. 3), on the same
    (segments, horizon) layout: R_t = r_t + gamma * (1 - done_t) * ((1 - lambda) V(s_t+1) + lambda R_t+1),
    with R beyond a row's end = next_value (or, with `next_row`, the successor row's return). A = R - V.
    For a state-value critic this is GAE written another way: the advantages agree (a test checks it).
    Returns (advantages, returns)."""
    segments, horizon = rewards.shape
    returns = torch.zeros_like(rewards)
    linked, successor = (next_row >= 0, next_row.clamp(min=0)) if next_row is not None else (None, None)
    beyond = next_value.clone()  # R just past each row's end; chains resolve one link per pass
    while True:
        next_return, next_values = beyond, next_value
        for t in reversed(range(horizon)):
            nonterminal = 1.0 - dones[:, t]
            returns[:, t] = rewards[:, t] + gamma * nonterminal * ((1 - gae_lambda) * next_values
                                                                  + gae_lambda * next_return)
            next_return, next_values = returns[:, t], values[:, t]
        if linked is None:
            break
        updated = torch.where(linked, returns[:, 0][successor], next_value)
        if torch.equal(updated, beyond):
            break
        beyond = updated
    return returns - values, returns


# ----- prioritized minibatches -----

def prio_beta(beta0: float, update: int, num_updates: int) -> float:
    """Importance-weight exponent: beta0 at the first update, exactly 1 at the last (PufferLib's
    beta0 + (1 - beta0) * alpha * progress stops short of 1 whenever alpha < 1)."""
    return 1.0 if num_updates <= 1 else beta0 + (1.0 - beta0) * (update - 1) / (num_updates - 1)


def sample_minibatches(advantages: torch.Tensor, masks: torch.Tensor, num_minibatches: int, alpha: float,
                       beta: float):
    """A list of (rows, weights) minibatches of whole rows.

    alpha == 0: a random permutation split into minibatches, every row once, weights None. alpha > 0: rows
    drawn WITH replacement with P(s) ~ (sum_t |A[s, t]|) ** alpha, so the frequencies are exactly those
    probabilities and the importance weights (N * P(s)) ** -beta undo the bias exactly at beta = 1; they are
    divided by the minibatch's largest so they only ever shrink a step (as in prioritized replay).
    """
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


# ----- loss -----

def ppo_loss(new_logprobs, old_logprobs, advantages, new_values, old_values, returns, entropy, masks, weights,
             clip_coef: float, vf_clip_coef: float, vf_coef: float, ent_coef: float):
    """The clipped PPO objective on a minibatch of rows (all tensors (rows, horizon); advantages already
    normalized; masks 1 for real agent steps; weights (rows,) importance weights or None).

    The importance weights multiply the policy and value terms, the two estimates of an expectation over
    the rollout that prioritized sampling biases; the entropy bonus is a regularizer, not an estimate, and
    stays unweighted. The value loss is seed 002's (no 1/2 factor; vf_coef 0.44 there).
    Returns (loss, pg_loss, v_loss, entropy, approx_kl, clipfrac); only `loss` needs gradients.
    """
    logratio = new_logprobs - old_logprobs
    ratio = logratio.exp()
    pg = torch.max(-advantages * ratio, -advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef))
    v_clipped = old_values + torch.clamp(new_values - old_values, -vf_clip_coef, vf_clip_coef)
    v = torch.max((new_values - returns) ** 2, (v_clipped - returns) ** 2)
    if weights is not None:
        pg, v = pg * weights[:, None], v * weights[:, None]
    count = masks.sum().clamp(min=1.0)
    pg_loss, v_loss, entropy_mean = (pg * masks).sum() / count, (v * masks).sum() / count, (entropy * masks).sum() / count
    loss = pg_loss + vf_coef * v_loss - ent_coef * entropy_mean
    with torch.no_grad():
        approx_kl = (((ratio - 1) - logratio) * masks).sum() / count
        clipfrac = (((ratio - 1.0).abs() > clip_coef).float() * masks).sum() / count
    return loss, pg_loss, v_loss, entropy_mean, approx_kl, clipfrac


def normalize_advantages(advantages: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """Zero mean, unit std over the minibatch's real steps."""
    count = masks.sum().clamp(min=2.0)
    mean = (advantages * masks).sum() / count
    std = ((((advantages - mean) * masks) ** 2).sum() / (count - 1)).sqrt()
    return (advantages - mean) / (std + 1e-8)


# ----- evaluation -----

def evaluate(policy: Policy, args: Args, episodes: int, seed: int, device: torch.device) -> dict:
    """Plays until every agent of a fresh in-process env has finished one episode; per-agent returns and
    lengths of those first episodes (Tetris: `episodes` games; mpe-spread: `episodes` envs of 3 agents).
    Tetris's own stats are means over all games that ended meanwhile."""
    vecenv = make_puffer_vecenv(args.env_id, "Serial", episodes, 1, 1, seed, max_ticks=args.max_ticks, log_interval=1)
    stats, infos = EpisodeStats(vecenv.num_agents, vecenv.autoreset), []
    first_return, first_length = np.full(vecenv.num_agents, np.nan), np.zeros(vecenv.num_agents)
    state = policy.initial_state(vecenv.num_agents, device)
    try:
        vecenv.async_reset(seed)
        while np.isnan(first_return).any():
            obs, rewards, terminals, truncations, step_infos, agents, masks = vecenv.recv()
            infos.extend(step_infos)
            ended_before = len(stats.returns)
            ended, starting = stats.update(np.asarray(agents), rewards, terminals | truncations, masks)
            for agent, ret, length in zip(ended, stats.returns[ended_before:], stats.lengths[ended_before:]):
                if np.isnan(first_return[agent]):
                    first_return[agent], first_length[agent] = ret, length
            with torch.inference_mode():  # the LSTM state carried through each episode, reset as in training
                if state is not None:
                    keep = torch.as_tensor(~starting, device=device).unsqueeze(-1)
                    state = tuple(x * keep for x in state)
                logits, _, state = policy.step(torch.as_tensor(obs, device=device), state)
                actions = logits.argmax(-1) if args.eval_actions == "greedy" else sample_actions(logits)[0]
            vecenv.send(actions.cpu().numpy().astype(np.int32))
    finally:
        vecenv.close()
    tetris = merge_infos(infos) if infos else {}
    return {"return": first_return, "length": first_length,
            **{key: np.array([tetris[key]]) for key in ("lines_deleted", "score") if key in tetris}}


def watch_tetris(policy: Policy, args: Args, seed: int, device: torch.device) -> None:
    """One Tetris game drawn in the terminal, its last position included (from the final observation: the
    env starts the next game in the step that ends one)."""
    game = Tetris(num_envs=1, seed=seed, max_ticks=args.max_ticks, log_interval=1)
    game.reset(seed=seed)
    state = policy.initial_state(1, device)
    while True:
        print("\033[H\033[2J" + game.render(), flush=True)  # home + clear screen
        time.sleep(1.0 / args.render_fps)
        with torch.inference_mode():
            logits, _, state = policy.step(torch.as_tensor(game.observations, device=device), state)
            action = logits.argmax(-1) if args.eval_actions == "greedy" else sample_actions(logits)[0]
        _, _, terminated, truncated, infos = game.step(action.cpu().numpy().astype(np.int32))
        if terminated[0] or truncated[0]:
            end = "game over" if terminated[0] else f"truncated at --max-ticks {args.max_ticks}"
            info = infos[0]
            print("\033[H\033[2J" + game.render_final() + f"\n{end}: {info['ep_length']:.0f} steps, score "
                  f"{info['score']:.0f}, lines {info['lines_deleted']:.0f}, return {info['ep_return']:.2f}", flush=True)
            return


# ----- checkpoints -----

def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was asked for but torch sees no CUDA GPU; use --device cpu")
    return torch.device(name)


def load(path: str, flag: str) -> dict:
    try:
        return load_checkpoint(path, required_keys=("model", "optimizer", "args", "global_step", "update", "run_name",
                                                    "obs_dim", "num_actions", "lr_anchor", "torch_rng_state"))
    except CheckpointError as e:
        raise ValueError(f"{flag}: {e}; pass a runs/<run>/ppo_puffer_async.pt that this script saved") from None


def build_policy(ckpt: dict, flag: str, args: Args, device: torch.device) -> Policy:
    policy = Policy(ckpt["obs_dim"], ckpt["num_actions"], args.hidden_size,
                    args.lstm_hidden_size if args.lstm else 0).to(device)
    try:
        policy.load_state_dict(ckpt["model"])
    except RuntimeError as e:
        raise ValueError(f"{flag}: the weights do not fit this script's network: {str(e).splitlines()[0]}") from None
    return policy


def evaluate_checkpoint(args: Args, device: torch.device) -> dict:
    ckpt = load(args.eval_checkpoint, "--eval-checkpoint")
    saved = with_env_defaults(Args(**ckpt["args"]))
    args = dataclasses.replace(saved, eval_episodes=args.eval_episodes, render=args.render,
                               render_fps=args.render_fps, eval_actions=args.eval_actions,
                               eval_checkpoint=args.eval_checkpoint)
    args = with_env_defaults(args)
    policy = build_policy(ckpt, "--eval-checkpoint", args, device)
    if args.render:
        watch_tetris(policy, args, args.seed + 10_000, device)
        return {}
    stats = evaluate(policy, args, args.eval_episodes, args.seed + 10_000, device)
    print(f"{args.eval_checkpoint} (step {ckpt['global_step']:,}), {len(stats['return'])} episodes "
          f"({args.eval_actions} actions):")
    for key, values in stats.items():
        print(f"  {key:<14} {values.mean():10.2f}" + (f" +/- {values.std():.2f}" if len(values) > 1 else ""))
    return stats


# ----- data parallel (torchrun) -----

# Rank r's envs are seeded seed + RANK_SEED_OFFSET * r + i: every rank plays its own games (PufferLib's
# ranks all play the same ones).
RANK_SEED_OFFSET = 100_000


@dataclass
class World:
    """This process's place in a torchrun job. A plain `python` run is rank 0 of 1 and never calls
    torch.distributed."""
    rank: int = 0
    size: int = 1


def init_world(args: Args, device: torch.device) -> tuple:
    """(World, device) from torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, ...)."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size == 1:
        return World(), device
    if device.type == "cuda":  # one GPU per rank on each node
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
    backend = args.dist_backend if args.dist_backend != "auto" else ("nccl" if device.type == "cuda" else "gloo")
    if backend == "nccl" and device.type != "cuda":
        raise ValueError("--dist-backend nccl needs --device cuda (NCCL reduces GPU tensors); on CPU use gloo")
    dist.init_process_group(backend)
    return World(dist.get_rank(), size), device


def allreduce_mean(params, extras: torch.Tensor, world: World) -> torch.Tensor:
    """Averages the gradients of `params` over the ranks in one flat all_reduce, with `extras`, scalars every
    rank must decide on alike, in the same message (DDP overlaps its all_reduce with backward and was 7% faster
    per minibatch in benchmarks/bench_distributed.py, but it cannot carry those scalars or see `unroll`).
    Returns the averaged extras. Every rank then holds the same bits, so the same Adam step keeps the parameters identical."""
    grads = [p.grad for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads] + [extras.to(grads[0].dtype)])
    dist.all_reduce(flat)
    flat /= world.size
    for grad, mean in zip(grads, flat[:-len(extras)].split([g.numel() for g in grads])):
        grad.copy_(mean.view_as(grad))
    return flat[-len(extras):]


def gather(world: World, local):
    """Every rank's `local` (any picklable), in rank order: episode stats, SPS and stop requests are
    combined from these before rank 0 logs them. One rank: [local], no copy."""
    if world.size == 1:
        return [local]
    everyone = [None] * world.size
    dist.all_gather_object(everyone, local)
    return everyone


class StopRequest:
    """Under torchrun, Ctrl-C (SIGINT to every rank, then torchrun's own SIGINT or SIGTERM) only sets a flag.
    The ranks agree on it at the end of each update, so all stop after the same update and none is left
    waiting in a collective; rank 0 saves. (A single process takes KeyboardInterrupt at once instead.)"""

    def __init__(self):
        self.requested = False
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self.request)

    def request(self, signum, frame) -> None:
        self.requested = True


# ----- training -----

# The exit code of a run stopped by Ctrl-C (128 + SIGINT), so a calling script can tell it from a finished one.
EXIT_INTERRUPTED = 130


def annealed_lr(anchor_lr: float, anchor_step: int, step: int, end_step: int) -> float:
    """The learning rate at `step`: linear from `anchor_lr` at `anchor_step` down to 0 at `end_step`.

    A fresh run anchors at (step 0, --learning-rate). The anchor is saved in the checkpoint, so a resume with
    the same total replays the schedule exactly; a resume with a new total re-anchors at the saved step with
    the last update's learning rate, so the rate goes on from there without a jump and reaches 0 at the new end.
    """
    return anchor_lr * (1.0 - (step - anchor_step) / (end_step - anchor_step))


def train(args: Args) -> dict:
    world, device = init_world(args, resolve_device(args.device))
    main_rank = world.rank == 0  # rank 0 alone prints, logs, evaluates and saves
    ckpt = load(args.resume, "--resume") if args.resume else None
    if ckpt:  # the saved run's flags, so the run continues as it started
        saved = Args(**ckpt["args"])
        total_given = args.total_timesteps is not None
        # No --total-timesteps: finish the saved run's budget, not the env's default.
        args = dataclasses.replace(saved, total_timesteps=args.total_timesteps if total_given else saved.total_timesteps,
                                   device=args.device, resume=args.resume)
        if ckpt.get("world_size", 1) != world.size:  # an update is every rank's batch: it must not change size
            raise ValueError(f"--resume: that run had {ckpt.get('world_size', 1)} rank(s) and this one has "
                             f"{world.size}; resume it with torchrun and {ckpt.get('world_size', 1)} ranks in all")
        update_size = saved.batch_size * world.size
        if args.total_timesteps // update_size <= ckpt["update"]:
            own = "" if total_given else " (the checkpoint's own: that run is finished)"
            raise ValueError(f"--total-timesteps {args.total_timesteps:,}{own} adds no update to the checkpoint's "
                             f"{ckpt['global_step']:,} steps (an update is {update_size:,}); pass "
                             f"--total-timesteps {(ckpt['update'] + 1) * update_size:,} or more to train on")
    args = with_env_defaults(args)
    validate_args(args)
    torch.set_num_threads(args.torch_threads)
    torch.manual_seed(args.seed)  # the same initial weights on every rank (and rank 0's are broadcast below)

    writer = None
    vecenv = make_puffer_vecenv(args.env_id, args.backend, args.num_envs, args.num_workers, args.async_factor,
                                args.seed + RANK_SEED_OFFSET * world.rank, max_ticks=args.max_ticks,
                                log_interval=args.horizon)
    try:
        num_agents = vecenv.num_agents
        validate_args(args, num_agents)
        batch_size = args.batch_size or num_agents * args.horizon  # per rank
        args = dataclasses.replace(args, batch_size=batch_size)
        segments = batch_size // args.horizon
        update_size = batch_size * world.size  # agent steps per update, all ranks together
        if args.total_timesteps < update_size:
            ranks = f": {world.size} ranks x {batch_size:,}" if world.size > 1 else ""
            raise ValueError(f"--total-timesteps {args.total_timesteps:,} is less than one update ({update_size:,} agent "
                             f"steps{ranks}); pass at least {update_size:,}")
        num_updates = args.total_timesteps // update_size  # whole updates; said below when it rounds
        end_step = num_updates * update_size
        obs_dim, num_actions = vecenv.single_observation_space.shape[0], int(vecenv.single_action_space.n)
        policy = (build_policy(ckpt, "--resume", args, device) if ckpt
                  else Policy(obs_dim, num_actions, args.hidden_size, args.lstm_hidden_size if args.lstm else 0).to(device))
        optimizer = torch.optim.Adam(policy.parameters(), lr=args.learning_rate, eps=1e-5)
        global_step, start_update, run_name = 0, 1, make_run_name(args.env_id, args.exp_name, args.seed)
        lr_anchor = {"step": 0, "lr": args.learning_rate}  # see annealed_lr
        if ckpt:  # every rank loads the same checkpoint: weights and optimizer state alike
            optimizer.load_state_dict(ckpt["optimizer"])
            torch.set_rng_state(ckpt["torch_rng_state"])
            global_step, start_update, run_name = ckpt["global_step"], ckpt["update"] + 1, ckpt["run_name"]
            lr_anchor = ckpt["lr_anchor"]
            saved_end = (saved.total_timesteps // update_size) * update_size
            if end_step != saved_end and ckpt["update"] > 0:  # a new budget: on from the last update's rate
                last_lr = annealed_lr(lr_anchor["lr"], lr_anchor["step"], global_step - update_size, saved_end)
                lr_anchor = {"step": global_step, "lr": last_lr}
        if world.size > 1:
            for tensor in policy.state_dict().values():  # identical from the start, whatever the devices did
                dist.broadcast(tensor, src=0)
            run_name = gather(world, run_name)[0]
            # Each rank its own actions and minibatch order (rank 0 keeps the stream a plain run has).
            if not main_rank:
                torch.manual_seed(args.seed + RANK_SEED_OFFSET * world.rank + start_update)

        run_dir = os.path.join("runs", run_name)
        writer = make_writer(run_dir, args) if main_rank else None
        checkpoint_path = os.path.join(run_dir, f"{args.exp_name}.pt")
        experience = Experience(segments, args.horizon, num_agents, obs_dim, device,
                                state_size=args.lstm_hidden_size if args.lstm else 0)
        stats = EpisodeStats(num_agents, vecenv.autoreset)
        if main_rank:
            ranks = f"{world.size} ranks x " if world.size > 1 else ""
            print(f"run {run_name}: {args.env_id}, {num_agents} agents in {args.async_factor} group(s), {args.backend}"
                  f"{' per rank' if ranks else ''}; updates {start_update}..{num_updates} of {update_size:,} agent "
                  f"steps ({ranks}{segments} rows x {args.horizon}); tensorboard --logdir runs", flush=True)
        if end_step != args.total_timesteps and main_rank:
            print(f"training to step {end_step:,}: {num_updates:,} updates of {update_size:,} agent steps "
                  f"(--total-timesteps {args.total_timesteps:,} rounded down to whole updates)", flush=True)

        def save(update: int) -> None:
            # The games themselves are not saved: a resumed run starts fresh ones.
            if main_rank:
                save_checkpoint(checkpoint_path, {
                    "model": policy.state_dict(), "optimizer": optimizer.state_dict(), "global_step": global_step,
                    "update": update, "args": dataclasses.asdict(args), "run_name": run_name, "obs_dim": obs_dim,
                    "num_actions": num_actions, "lr_anchor": lr_anchor, "torch_rng_state": torch.get_rng_state(),
                    "world_size": world.size})

        vecenv.async_reset(args.seed + RANK_SEED_OFFSET * world.rank + 1_000_000 * (start_update - 1))
        timers = dict(env=0.0, inference=0.0, learn=0.0)
        completed, recent, episode_means, interrupted = start_update - 1, {}, {}, False
        progress = Progress(args.total_timesteps, start_step=global_step)
        stop = StopRequest() if world.size > 1 else None
        try:
            for update in range(start_update, num_updates + 1):
                lr = (annealed_lr(lr_anchor["lr"], lr_anchor["step"], global_step, end_step) if args.anneal_lr
                      else args.learning_rate)
                optimizer.param_groups[0]["lr"] = lr
                infos = rollout(vecenv, policy, experience, stats, args.gamma, args.reward_scale, args.reward_clamp,
                                device, timers)
                global_step += update_size

                start = time.perf_counter()
                masks = experience.masks.float()
                dones = torch.maximum(experience.terminals, experience.truncations)
                estimate = compute_gae if args.advantage == "gae" else compute_lambda_returns
                advantages, returns = estimate(experience.rewards, experience.values, dones, experience.next_value,
                                               args.gamma, args.gae_lambda, experience.next_row)
                beta = prio_beta(args.prio_beta0, update, num_updates)
                initial_state, starts = ((experience.initial_state, experience.starts) if args.lstm else (None, None))
                for epoch in range(args.update_epochs):
                    for rows, weights in sample_minibatches(advantages, masks, args.num_minibatches,
                                                            args.prio_alpha, beta):
                        logits, new_values = policy.unroll(
                            experience.obs[rows], initial_state and tuple(x[rows] for x in initial_state),
                            None if starts is None else starts[rows], args.burn_in, args.tbptt or 0)
                        new_logprobs, entropy = logprob_and_entropy(logits, experience.actions[rows])
                        mb_masks = masks[rows]
                        if args.burn_in:  # burn-in steps only warm the state up
                            mb_masks[:, :args.burn_in] = 0.0
                        loss, pg_loss, v_loss, entropy_mean, approx_kl, clipfrac = ppo_loss(
                            new_logprobs, experience.logprobs[rows], normalize_advantages(advantages[rows], mb_masks),
                            new_values, experience.values[rows], returns[rows], entropy, mb_masks, weights,
                            args.clip_coef, args.vf_clip_coef, args.vf_coef, args.ent_coef)
                        optimizer.zero_grad(set_to_none=True)
                        loss.backward()
                        # Every rank must take the same branches below, or one waits forever in the next
                        # collective: they read the non-finite flag and approx_kl averaged with the gradients.
                        checks = torch.stack([(~torch.isfinite(loss)).float(), approx_kl])
                        if world.size > 1:
                            checks = allreduce_mean(policy.parameters(), checks, world)
                        if checks[0] > 0:
                            raise FloatingPointError(
                                f"loss became {loss.item() if not torch.isfinite(loss) else 'non-finite on a rank'} "
                                f"at update {update} (step {global_step:,}); lower --learning-rate or --max-grad-norm")
                        approx_kl = checks[1]
                        grad_norm = nn.utils.clip_grad_norm_(policy.parameters(), args.max_grad_norm)
                        optimizer.step()
                    if args.target_kl is not None and approx_kl > args.target_kl:
                        break
                timers["learn"] += time.perf_counter() - start

                # Episodes, Tetris stats and SPS of every rank; and whether any rank was asked to stop.
                total_time = sum(timers.values())
                returns_, lengths = stats.pop()
                everyone = gather(world, dict(returns=returns_, lengths=lengths, infos=infos, stop=stop and stop.requested,
                                              sps=(global_step - progress.start_step) / world.size / total_time))
                if any(rank["stop"] for rank in everyone):
                    interrupted = True
                if not main_rank:
                    completed = update
                    if interrupted:
                        break
                    continue
                returns_, lengths, infos = ([x for rank in everyone for x in rank[key]]
                                            for key in ("returns", "lengths", "infos"))
                valid = experience.masks
                y, v = returns[valid], experience.values[valid]
                explained_var = float("nan") if y.var() == 0 else (1 - (y - v).var() / y.var()).item()
                scalars = {
                    "charts/learning_rate": lr, "charts/SPS": sum(rank["sps"] for rank in everyone),
                    "losses/policy_loss": pg_loss.item(), "losses/value_loss": v_loss.item(),
                    "losses/entropy": entropy_mean.item(), "losses/approx_kl": approx_kl.item(),
                    "losses/clipfrac": clipfrac.item(), "losses/explained_variance": explained_var,
                    "losses/grad_norm": grad_norm.item(), "charts/prio_beta": beta,
                    **{f"perf/{key}_time_frac": value / total_time for key, value in timers.items()},
                }
                if vecenv.agents_per_env > 1:
                    scalars["charts/agent_steps"] = global_step
                    scalars["charts/env_steps"] = global_step / vecenv.agents_per_env
                if returns_:
                    episode_means = {"return": float(np.mean(returns_)), "length": float(np.mean(lengths))}
                    scalars["charts/episodic_return"] = episode_means["return"]
                    scalars["charts/episodic_length"] = episode_means["length"]
                if infos:  # Tetris's own stats
                    recent = merge_infos(infos)
                    scalars.update({f"tetris/{key}": value for key, value in recent.items()})
                if args.eval_freq and update % args.eval_freq == 0:
                    result = evaluate(policy, args, args.eval_episodes, args.seed + 10_000 + update, device)
                    scalars["eval/return_mean"] = float(result["return"].mean())
                    scalars["eval/return_std"] = float(result["return"].std())
                for tag, value in scalars.items():
                    writer.add_scalar(tag, value, global_step)
                if args.checkpoint_freq and update % args.checkpoint_freq == 0:
                    save(update)
                progress.update(global_step, update=update, ret=episode_means.get("return"),
                                len=episode_means.get("length"), lines=recent.get("lines_deleted"))
                completed = update
                if interrupted:
                    global_step = completed * update_size
                    break
        except KeyboardInterrupt:
            # A half-done update is dropped: the checkpoint's step count is whole updates.
            interrupted, global_step = True, completed * update_size
        except WorkerError:
            global_step = completed * update_size
            save(completed)  # the network is intact: keep what was learned
            raise
        except RuntimeError as e:  # under torchrun: another rank died (its collective broke), say so, not a trace
            if world.size == 1:
                raise
            global_step = completed * update_size
            save(completed)
            raise ConnectionError(f"rank {world.rank} of {world.size}: lost the other ranks in a collective "
                                  f"({str(e).splitlines()[0][:120]}); torchrun's report names the rank that failed"
                                  + (f"; saved {checkpoint_path}" if main_rank else "")) from None
        save(completed)
    finally:
        vecenv.close()
        if writer is not None:
            writer.close()
        if world.size > 1:
            dist.destroy_process_group()
    sps = (global_step - progress.start_step) / max(sum(timers.values()), 1e-9)
    if interrupted and main_rank:
        print(f"interrupted at step {global_step:,}: saved {checkpoint_path}, envs closed; "
              f"continue with --resume {checkpoint_path}", flush=True)
    elif main_rank:
        print(f"done: step {global_step:,}, SPS {sps:,.0f}, "
              + (f"return {episode_means['return']:.2f}, length {episode_means['length']:.1f}" if episode_means
                 else "no finished episodes") + f"; saved {checkpoint_path}")
    return {"global_step": global_step, "update": completed, "sps": sps, "run_dir": run_dir, "interrupted": interrupted,
            "checkpoint": checkpoint_path, "episode_stats": episode_means, "tetris_stats": recent, "timers": timers,
            "policy": policy, "args": args}


def main(argv=None) -> None:
    args = tyro.cli(Args, args=argv)
    try:
        if args.eval_checkpoint:
            validate_args(with_env_defaults(args))
            torch.set_num_threads(args.torch_threads)
            evaluate_checkpoint(args, resolve_device(args.device))
        elif train(args)["interrupted"]:  # train() saved, closed the envs and said so
            raise SystemExit(EXIT_INTERRUPTED)
    except (ValueError, FloatingPointError, WorkerError, ConnectionError) as e:
        raise SystemExit(f"error: {e}") from None
    except KeyboardInterrupt:  # while starting up or evaluating: there is nothing to save
        print("\ninterrupted: nothing to save", flush=True)
        raise SystemExit(EXIT_INTERRUPTED) from None


if __name__ == "__main__":
    main()
