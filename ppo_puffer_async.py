"""PufferLib 3.0-style PPO (the loop of PufferLib's pufferl.py) in one file.

Other projects named in this file, as read: PufferLib 3.0.0 (pufferlib/pufferl.py), pufferlib-core 3.0.5
(pufferlib/vector.py, pufferlib/emulation.py), CleanRL at commit fe8d8a03, SB3 2.9.2.

Read top to bottom: Args (Tetris's preset), network, experience buffer, rollout, advantages, prioritized rows,
evaluation, train(). From PufferLib: async env groups (recv(group) -> policy -> send(actions)), a (segments x
horizon) buffer whose rows are the unit of sampling and of LSTM sequences (a multi-agent env is just more agents),
prioritized minibatches of whole rows. Where it differs from pufferl.py (docs/ppo_puffer_async.md says why):
truncation bootstrapped with V(final observation); no reset step in the buffer; a row's last step bootstrapped;
rewards clamped only if asked; absent agents carry no loss; rows tracked per agent whatever order groups come back
in; normalized importance weights, beta reaching 1; LSTM rows replay the rollout.

The script knows no env family: common/puffer_envs.py builds every env id behind one contract (vector or uint8
frame observations, the action space, each agent's action mask and kind, same-step resets with final observations,
which steps ended a whole game), and common/presets.py holds each family's preset.

    python ppo_puffer_async.py                # Tetris: 90M steps (docs/ppo_puffer_async.md#tetris: the result)
    python ppo_puffer_async.py --env-id HalfCheetah-v5           # Box actions: the continuous preset, 1M steps
    python ppo_puffer_async.py --env-id mpe-spread               # 3 agents per env (or: any PettingZoo module)
    python ppo_puffer_async.py --env-id cartpole-novel --lstm    # velocities hidden: memory needed
    python ppo_puffer_async.py --env-id atari-breakout           # frames, a CNN: CleanRL's ppo_atari.py settings
    python ppo_puffer_async.py --env-id CartPole-v1 --help       # the flags a run of CartPole-v1 takes
    python ppo_puffer_async.py --eval-checkpoint runs/<run>/ppo_puffer_async.pt
    torchrun --standalone --nproc-per-node 2 ppo_puffer_async.py   # data-parallel: 2 ranks, each its own envs
"""

import os
import sys
import time
from dataclasses import dataclass
from typing import Literal, Optional

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import tyro
from torch.distributions import Categorical, Normal

from common import distributed, logs, presets, puffer_envs, run
from common.logs import Progress, log_eval, print_end, report, save_video, video_paths
from common.normalize import RewardScaler
from common.puffer_envs import EpisodeLog, make_puffer_vecenv, to_env
from common.vector import WorkerError


# Tetris's preset: the network is the cost, so envs step in this process, torch gets both cores and the encoder is 128
# wide (docs/benchmarks.md has the speed of each choice). Every other env's preset is in common/presets.py.
@dataclass
class Args(run.RunArgs):
    """PufferLib-style PPO. The defaults are Tetris's preset (90M agent steps); --env-id X --help shows env X's
    (common/presets.py)"""

    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment, part of the run name"""
    eval_episodes: int = 10
    """envs per evaluation; every agent's first episode counts (so a multi-agent env gives several per env)"""
    env_id: str = "tetris"
    """tetris, mpe-spread, cartpole-novel or repeat-previous-easy (add --lstm), atari-<game> (e.g. atari-breakout),
    a Gymnasium id or a PettingZoo module"""
    env_kwargs: str = ""
    """keyword arguments of a Gymnasium or PettingZoo env, e.g. N=2,max_cycles=50 (for mpe2.simple_spread_v3)"""
    total_timesteps: int = 90_000_000
    """agent steps of training, all ranks together (on --resume: the saved total unless given)"""
    num_envs: int = 512
    """envs per rank (Tetris: games; mpe-spread: envs of 3 agents)"""
    async_factor: int = 1
    """K groups of envs: the policy runs on one group while the others step; 1 = synchronous"""
    backend: Literal["Serial", "Multiprocessing"] = "Serial"
    """Serial: envs step in this process; Multiprocessing: in --num-workers sleeping processes"""
    num_workers: int = 1
    """worker processes with --backend Multiprocessing (1 with Serial)"""
    horizon: int = 64
    """steps per buffer row (a segment), the unit of minibatches and of LSTM sequences"""
    batch_size: Optional[int] = None
    """agent steps per update and rank = segments x horizon, segments a multiple of the agents (None: a row each)"""
    num_minibatches: int = 8
    """minibatches per update epoch, each of segments / num_minibatches whole rows"""
    update_epochs: int = 2
    """passes over each rollout"""
    learning_rate: float = 3e-3
    """Adam's learning rate"""
    anneal_lr: bool = True
    """linearly anneal the learning rate to 0 at --total-timesteps"""
    gamma: float = 0.99
    """the discount factor"""
    gae_lambda: float = 0.95
    """the GAE lambda"""
    norm_adv: bool = True
    """normalize the advantages over each minibatch's real steps"""
    clip_coef: float = 0.2
    """the surrogate clipping coefficient"""
    vf_clip_coef: float = 0.2
    """the value may move at most this far from the rollout's estimate"""
    vf_coef: float = 1.0
    """the value-loss coefficient; the value loss is 0.5 x the squared error, as in CleanRL's ppo.py and pufferl.py"""
    ent_coef: float = 0.1
    """the entropy-bonus coefficient"""
    anneal_ent: bool = True
    """linearly anneal the entropy coefficient to 0 at the last update"""
    max_grad_norm: float = 0.5
    """the maximum global gradient norm (clipping)"""
    target_kl: Optional[float] = None
    """stop the update's epochs once approx_kl exceeds this (None: never); under torchrun the ranks' mean decides"""
    prio_alpha: float = 0.0
    """prioritized rows: P(row) ~ (sum of |advantage| over the row) ** alpha; 0 = uniform"""
    prio_beta0: float = 0.2
    """importance-weight exponent at the start, annealed linearly to exactly 1 at the last update"""
    norm_obs: bool = False
    """scale observations by their running mean and std, frozen for evaluation and saved"""
    norm_reward: bool = False
    """divide rewards by the running std of the discounted return, as SB3's VecNormalize"""
    reward_scale: float = 1.0
    """multiply rewards by this for learning (returns are logged unscaled)"""
    reward_clamp: Optional[float] = None
    """clamp rewards to [-x, x] for learning (pufferl.py always clamps to [-1, 1]; here only when given)"""
    hidden_size: int = 128
    """width of the MLP encoder's two hidden layers; Atari: of the CNN's last layer"""
    activation: Literal["tanh", "relu"] = "relu"
    """the encoder's nonlinearity"""
    separate_critic: bool = False
    """the value head gets an encoder of its own, as CleanRL's ppo_continuous_action.py's (--lstm: off unless given)"""
    lstm: bool = False
    """an LSTM between the encoder and the heads (for the memory envs: cartpole-novel, repeat-previous-easy)"""
    lstm_hidden_size: int = 64
    """width of the LSTM's state"""
    burn_in: int = 0
    """with --lstm: the first K steps of each row only advance the state (no gradient, no loss)"""
    tbptt: Optional[int] = None
    """with --lstm: detach the state every L steps of a row (truncated BPTT; None: --horizon, no detach)"""
    max_ticks: int = 10_000
    """Tetris: a game is truncated (and bootstrapped) after this many steps"""
    episode_points: Literal["each", "mean"] = "mean"
    """charts/episodic_return and charts/episodic_length: a point per finished episode, as CleanRL's (each), or the
    mean of the episodes finished in each log interval (mean: where a point each would cost more than 3% of the run's
    speed, as Tetris's many games do: docs/design.md)"""
    eval_actions: Literal["greedy", "sampled"] = "sampled"
    """evaluate with the most likely action (a Gaussian's mean) or by sampling"""
    eval_opponents: Literal["trained", "random"] = "trained"
    """random: each evaluation also plays each team against uniformly random teams (eval/return_vs_random/<kind>)"""
    teams: str = ""
    """agents of two or more kinds: the kinds that share one reward, e.g. a+b,c; empty: MPE's teams, else each kind
    alone"""
    eval_max_steps: int = 1_000
    """evaluation episodes of an env with no time limit of its own (CliffWalking), and Atari games, are truncated at
    this many steps"""
    render: bool = False
    """with --eval-checkpoint of a Tetris run: watch one game in the terminal"""
    render_fps: float = 10.0
    """board redraws per second with --render"""
    torch_threads: int = 2
    """torch CPU threads per process (under torchrun: 1 per rank unless given)"""


def validate_args(args: Args, vecenv=None) -> None:
    """Bad flags fail before any network is built, naming the flag; with the vecenv, its buffer layout (closing it)."""
    at_least_one = "num_envs num_workers async_factor horizon num_minibatches update_epochs max_ticks hidden_size"
    positive = "learning_rate clip_coef vf_clip_coef render_fps reward_scale"
    run.check_flags(args, at_least_one=at_least_one, positive=positive)
    run.check_flags(args, positive_or_none="reward_clamp target_kl tbptt", non_negative="prio_alpha burn_in")
    if args.lstm and not 0 <= args.burn_in < args.horizon:
        raise ValueError(f"--burn-in {args.burn_in} must be in [0, --horizon {args.horizon}): the rest of a row trains")
    if (args.burn_in or args.tbptt) and not args.lstm:
        raise ValueError("--burn-in and --tbptt apply to the LSTM: add --lstm")
    if not 0 <= args.prio_beta0 <= 1:
        raise ValueError(f"--prio-beta0 must be in [0, 1] (got {args.prio_beta0})")
    if args.lstm and args.horizon == 1:
        raise ValueError("--lstm learns from sequences and rows of --horizon 1 have none: pass e.g. --horizon 128")
    if args.lstm and args.separate_critic:
        raise ValueError("--separate-critic's encoder would not see the LSTM's memory: add --no-separate-critic")
    if (args.capture_video or args.gif) and not puffer_envs.records_video(args.env_id):
        raise ValueError(f"--capture-video and --gif: {args.env_id} has no frames to record; drop them")
    if args.backend == "Serial" and args.num_workers != 1:
        raise ValueError(
            f"--num-workers {args.num_workers} needs --backend Multiprocessing (Serial steps in-process): "
            "add --num-workers 1"
        )
    if vecenv is None:
        return
    batch_size = args.batch_size or vecenv.num_agents * args.horizon
    rows = batch_size // args.horizon
    problem = None
    if args.norm_obs and len(vecenv.single_observation_space.shape) == 3:
        problem = "--norm-obs: frames are scaled to [0, 1] by the network; drop --norm-obs"
    elif args.eval_opponents == "random" and (vecenv.kinds is None or vecenv.kinds.team_of.max() == 0):
        problem = f"--eval-opponents random plays teams against each other; {args.env_id} has one (see --teams)"
    elif batch_size % args.horizon or rows % vecenv.num_agents:
        problem = f"--batch-size {batch_size} must be --horizon x a multiple of the {vecenv.num_agents} agents (rows)"
    elif rows % args.num_minibatches:
        problem = f"--num-minibatches {args.num_minibatches} must divide the {rows} rows (batch / horizon)"
    if problem:
        vecenv.close()  # and its workers: a bad flag leaves no process behind
        raise ValueError(problem)


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


def take(x, index):
    """x[index] for a tensor, or for each tensor of an LSTM state (h, c); None (no LSTM) stays None."""
    if isinstance(x, tuple):
        return tuple(t[index] for t in x)
    return None if x is None else x[index]


def nature_cnn(channels: int, hidden_size: int, act) -> nn.Sequential:
    """The Nature DQN network (Mnih et al. 2015) of CleanRL's ppo_atari.py: 84x84 frames -> `hidden_size` features
    (CleanRL's 512). Its input is scaled to [0, 1] first (Policy.encode)."""
    return nn.Sequential(
        layer_init(nn.Conv2d(channels, 32, 8, stride=4)),
        act(),
        layer_init(nn.Conv2d(32, 64, 4, stride=2)),
        act(),
        layer_init(nn.Conv2d(64, 64, 3, stride=1)),
        act(),
        nn.Flatten(),
        layer_init(nn.Linear(64 * 7 * 7, hidden_size)),
        act(),
    )


class Policy(nn.Module):
    """An encoder, optionally an LSTM, then a policy head and a value head. The encoder is chosen by the observation's
    shape: (n,) vectors go through a two-layer MLP (--hidden-size, --activation); (4, 84, 84) Atari frames, uint8,
    through the Nature CNN. `step` acts for one observation per agent (with their recurrent state); `unroll` replays
    rows from each row's stored state. The policy head's output: a Categorical's logits (Discrete), one per dimension
    (MultiDiscrete), or a diagonal Gaussian's mean (Box), its log-std a parameter, as in CleanRL's
    ppo_continuous_action.py and SB3."""

    def __init__(self, obs_shape: tuple, action_space, args: Args):
        super().__init__()
        act = nn.Tanh if args.activation == "tanh" else nn.ReLU
        hidden_size = args.hidden_size
        self.frames = len(obs_shape) == 3  # (stack, height, width): images, stored and sent as uint8

        def encoder():
            if self.frames:
                return nature_cnn(obs_shape[0], hidden_size, act)
            linear = (
                layer_init(nn.Linear(obs_shape[0], hidden_size)),
                layer_init(nn.Linear(hidden_size, hidden_size)),
            )
            return nn.Sequential(linear[0], act(), linear[1], act())

        self.encoder = encoder()
        # nn.LSTM, not a loop of LSTMCells: a whole stretch of a row is one fused call, which trains faster
        # (docs/benchmarks.md); `step` runs it on sequences of length 1.
        self.lstm = nn.LSTM(hidden_size, args.lstm_hidden_size, batch_first=True) if args.lstm else None
        head_size = args.lstm_hidden_size if args.lstm else hidden_size
        self.nvec = action_space.nvec.tolist() if isinstance(action_space, gym.spaces.MultiDiscrete) else None
        outputs = gym.spaces.flatdim(action_space)  # the logits (of each dimension, side by side), or a Box's mean
        # Small policy-head init keeps the first policy near uniform; value head at unit scale.
        self.actor = layer_init(nn.Linear(head_size, outputs), std=0.01)
        self.critic = layer_init(nn.Linear(head_size, 1), std=1.0)
        box = isinstance(action_space, gym.spaces.Box)  # a Gaussian's log-std: std 1 at the start
        self.log_std = nn.Parameter(torch.zeros(outputs)) if box else None
        # --separate-critic: the value loss shapes only the critic's own features (as in CleanRL's
        # ppo_continuous_action.py and SB3's default MlpPolicy, net_arch pi and vf apart). Built last: the encoder,
        # the LSTM and the heads draw the same initial weights with or without it.
        self.critic_encoder = encoder() if args.separate_critic else None

    def initial_state(self, n: int, device: torch.device):
        """The recurrent state (h, c) of n fresh episodes: zeros; None without --lstm."""
        if self.lstm is None:
            return None
        return tuple(torch.zeros(n, self.lstm.hidden_size, device=device) for _ in range(2))

    def encode(self, encoder: nn.Module, obs: torch.Tensor) -> torch.Tensor:
        """`encoder`'s features of observations of any leading shape. Frames (0-255, any dtype) are scaled to [0, 1]
        here, per call: the buffer keeps them as uint8."""
        if not self.frames:
            return encoder(obs)
        images = obs.reshape(-1, *obs.shape[-3:]).float() / 255.0  # the CNN takes a batch of images
        # channels-last: the CPU's convolutions (oneDNN) run faster on this layout
        # (docs/benchmarks.md#the-speed-tricks-the-scripts-keep)
        images = images.contiguous(memory_format=torch.channels_last)
        return encoder(images).reshape(*obs.shape[:-3], -1)

    def step(self, obs: torch.Tensor, state=None):
        """(policy head's output, value, next state) for one observation per agent."""
        hidden = self.encode(self.encoder, obs)
        if self.lstm is not None:
            out, (h, c) = self.lstm(hidden.unsqueeze(1), None if state is None else tuple(x[None] for x in state))
            hidden = out[:, 0]
            state = (h[0], c[0])
        return self.actor(hidden), self.value(obs, hidden), state

    def value(self, obs: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        if self.critic_encoder is not None:
            hidden = self.encode(self.critic_encoder, obs)
        return self.critic(hidden).squeeze(-1)

    def unroll(self, obs: torch.Tensor, state=None, starts=None, burn_in: int = 0, tbptt: Optional[int] = None):
        """(policy head's outputs, values) for rows (rows, horizon, obs) from their initial `state`, reset before the
        steps `starts[:, t]` marks; the first `burn_in` steps only advance the state; it is detached every `tbptt`."""
        hidden = self.encode(self.encoder, obs)
        if self.lstm is not None:
            # The rows are cut only where something happens to the state between two steps: an episode begins
            # in some row (its state is zeroed), burn-in ends, or tbptt detaches. Each stretch between cuts is
            # one nn.LSTM call. (The stored initial state is already reset where t = 0 began an episode.)
            horizon = obs.shape[1]
            cuts = set() if starts is None else set((starts[:, 1:].any(0).nonzero().flatten() + 1).tolist())
            cuts |= ({burn_in} if burn_in else set()) | (set(range(tbptt, horizon, tbptt)) if tbptt else set())
            bounds = [0] + sorted(cuts) + [horizon]
            h = state[0].unsqueeze(0)
            c = state[1].unsqueeze(0)
            outputs = []
            for t, end in zip(bounds[:-1], bounds[1:]):
                if t > 0 and starts is not None:
                    keep = (~starts[:, t]).to(h.dtype)[None, :, None]
                    h = h * keep
                    c = c * keep
                if t > 0 and tbptt and t % tbptt == 0:
                    h = h.detach()
                    c = c.detach()
                with torch.set_grad_enabled(torch.is_grad_enabled() and t >= burn_in):
                    out, (h, c) = self.lstm(hidden[:, t:end], (h, c))
                outputs.append(out)
            hidden = torch.cat(outputs, 1)
        return self.actor(hidden), self.value(obs, hidden)

    # Agents of two or more kinds share one head: `mask` (the rows' action masks, from the env, or None: every agent
    # has every action) acts here, where the distribution is made. An agent's missing actions get -inf logits, never
    # sampled nor scored; a Gaussian's padded dimensions are left out of whole actions' terms.
    def logits(self, out: torch.Tensor, mask=None) -> torch.Tensor:
        """Discrete: the head's output; MultiDiscrete: (..., dimensions, widest n), each padded with -inf."""
        if self.nvec is None:
            return out if mask is None else out.masked_fill(~mask, -torch.inf)
        width = max(self.nvec)
        return torch.stack(
            [nn.functional.pad(x, (0, width - x.shape[-1]), value=-torch.inf) for x in out.split(self.nvec, -1)], -2
        )

    def whole(self, terms: torch.Tensor, out: torch.Tensor, mask) -> torch.Tensor:
        """Of whole actions: a MultiDiscrete's or a Box's dimensions are independent, so their terms add up."""
        if terms.dim() < out.dim():
            return terms
        return (terms if mask is None else terms * mask).sum(-1)

    def distribution(self, out: torch.Tensor, mask=None):
        """The distribution of the head's output `out` (its rows' action `mask`, or None)."""
        if self.log_std is not None:
            return Normal(out, self.log_std.exp(), validate_args=False)
        return Categorical(logits=self.logits(out, mask), validate_args=False)

    def logprob_and_entropy(self, out: torch.Tensor, actions: torch.Tensor, mask=None):
        dist = self.distribution(out, mask)
        return self.whole(dist.log_prob(actions), out, mask), self.whole(dist.entropy(), out, mask)

    def sample(self, out: torch.Tensor, mask=None):
        """(actions, their logprobs). A Gaussian's logprob is that of the action as drawn; only the env sees it
        clipped to the bounds (to_env): the update must score the same action the rollout scored."""
        dist = self.distribution(out, mask)
        actions = dist.sample()
        return actions, self.whole(dist.log_prob(actions), out, mask)

    def choose(self, out: torch.Tensor, eval_actions="greedy", mask=None) -> torch.Tensor:
        """Evaluation's action: the most likely one (the Gaussian's mean, each categorical's argmax), or sampled."""
        if eval_actions == "sampled":
            return self.sample(out, mask)[0]
        return out if self.log_std is not None else self.logits(out, mask).argmax(-1)

    def action_std(self, kind_masks=None) -> float:
        """The Gaussian's std, mean over each kind's own dimensions (`kind_masks`: kinds x dimensions, or None for
        agents of one kind): how much the policy still explores."""
        weights = torch.ones_like(self.log_std) if kind_masks is None else torch.as_tensor(kind_masks)
        return ((self.log_std.exp() * weights).sum() / weights.sum()).item()


class Experience:
    """The (segments, horizon) buffer and the per-agent bookkeeping that fills it. Each agent owns a row and a place in
    it: a step's observation, action, logprob and value are stored when the policy acts, its reward and ends when the
    agent's next observation arrives. A full row is handed over, the agent takes the next free one. The step an agent
    takes after its last row filled is kept (`carried_...`) and opens its first row of the next rollout, with the
    logprob and value of the policy that took it: every step the envs play is stored once. `next_row[s]`: the agent's
    next row (-1: none); `next_value[s]`: V after its last step. LSTM (`state_size`): each agent's (h, c), each row's
    first (h, c), `starts[s, t]`: reset before t."""

    def __init__(
        self, segments, horizon, num_agents, obs_shape, device, *, action_space=None, state_size=0, mask_size=0
    ):
        # numpy: a step writes a few numbers per agent, which numpy does faster than torch on arrays this small
        # (a2c_cartpole.py's storage too); the update views them as tensors (tensors(): on the CPU, no copy)
        self.segments = segments
        self.horizon = horizon
        self.num_agents = num_agents
        shape = (segments, horizon)
        # Atari frames stay uint8, a quarter of float32's memory; the policy scales each minibatch's (Policy.encode)
        frames = len(obs_shape) == 3
        self.obs = np.zeros(shape + tuple(obs_shape), np.uint8 if frames else np.float32)
        box = isinstance(action_space, gym.spaces.Box)  # one agent's action: an int, or a vector of ints or floats
        action_shape = () if action_space is None else action_space.shape
        self.actions = np.zeros(shape + action_shape, np.float32 if box else np.int64)
        self.logprobs = np.zeros(shape, np.float32)
        self.values = np.zeros(shape, np.float32)
        self.rewards = np.zeros(shape, np.float32)
        self.terminals = np.zeros(shape, np.float32)
        self.truncations = np.zeros(shape, np.float32)
        self.masks = np.zeros(shape, bool)
        self.starts = np.zeros(shape, bool)
        self.next_value = np.zeros(segments, np.float32)
        self.next_row = np.full(segments, -1, np.int64)
        # Agents of two or more kinds (`mask_size`: the head's outputs): which actions were each step's agent's own
        self.action_masks = np.zeros(shape + (mask_size,), bool) if mask_size else None
        self.row = np.zeros(num_agents, dtype=np.int64)  # -1: no free row left this rollout
        self.pos = np.zeros(num_agents, dtype=np.int64)
        self.pending = np.zeros(num_agents, dtype=bool)  # a stored step awaits its reward
        # Each agent's step taken after its last row filled, for the next rollout's first row
        self.carried = np.zeros(num_agents, dtype=bool)
        self.carried_obs = np.zeros((num_agents, *self.obs.shape[2:]), self.obs.dtype)
        self.carried_actions = np.zeros((num_agents, *self.actions.shape[2:]), self.actions.dtype)
        self.carried_logprobs = np.zeros(num_agents, np.float32)
        self.carried_values = np.zeros(num_agents, np.float32)
        self.carried_masks = np.zeros(num_agents, bool)
        self.carried_starts = np.zeros(num_agents, bool)
        self.carried_action_masks = np.zeros((num_agents, mask_size), bool) if mask_size else None
        self.state = None
        self.initial_state = None
        self.carried_state = None
        if state_size:  # carried across rollouts, like the episodes themselves
            self.state = tuple(torch.zeros(num_agents, state_size, device=device) for _ in range(2))
            self.initial_state = tuple(torch.zeros(segments, state_size, device=device) for _ in range(2))
            self.carried_state = tuple(torch.zeros(num_agents, state_size, device=device) for _ in range(2))
        self.reset()

    def tensors(self, device) -> dict:
        """The rollout as tensors on `device`, for the update (`starts`, `initial_state`: None without an LSTM)."""
        names = "obs actions logprobs values rewards terminals truncations masks starts next_value next_row".split()
        batch = {name: torch.as_tensor(getattr(self, name), device=device) for name in names}
        batch["initial_state"] = self.initial_state
        batch["action_masks"] = None if self.action_masks is None else torch.as_tensor(self.action_masks, device=device)
        if self.state is None:  # no LSTM
            batch["starts"] = None
        return batch

    def reset(self) -> None:
        """Start a rollout: agent a fills row a first (segments is a multiple of num_agents), beginning with the step
        it carried over from the last rollout, whose reward arrives with its next observation."""
        self.row[:] = np.arange(self.num_agents)
        self.pos[:] = 0
        self.pending[:] = False
        self.free_row = self.num_agents
        self.full_rows = 0
        self.next_row[:] = -1
        carried = np.flatnonzero(self.carried)  # agent a's first row is row a
        self.obs[carried, 0] = self.carried_obs[carried]
        self.actions[carried, 0] = self.carried_actions[carried]
        self.logprobs[carried, 0] = self.carried_logprobs[carried]
        self.values[carried, 0] = self.carried_values[carried]
        self.masks[carried, 0] = self.carried_masks[carried]
        if self.action_masks is not None:
            self.action_masks[carried, 0] = self.carried_action_masks[carried]
        if self.state is not None:
            self.starts[carried, 0] = self.carried_starts[carried]
            for stored, kept in zip(self.initial_state, self.carried_state):
                stored[torch.as_tensor(carried)] = kept[torch.as_tensor(carried)]
        self.pending[carried] = True  # at pos 0, as a step just stored
        self.carried[:] = False

    def finish_steps(self, agents, rewards, terminals, truncations, next_values) -> None:
        """Writes the outcome of each agent's pending step; full rows are handed over."""
        rows = self.row[agents]
        pos = self.pos[agents]
        self.rewards[rows, pos] = rewards
        self.terminals[rows, pos] = terminals
        self.truncations[rows, pos] = truncations
        self.pos[agents] += 1
        done = self.pos[agents] == self.horizon
        if done.any():
            filled = agents[done]
            n = len(filled)
            self.next_value[rows[done]] = next_values[done]
            new_rows = self.free_row + np.arange(n)
            new_rows[new_rows >= self.segments] = -1  # none left: the agent's next step opens the next rollout
            self.next_row[rows[done]] = new_rows
            self.row[filled] = new_rows
            self.pos[filled] = 0
            self.free_row += n
            self.full_rows += n
        self.pending[agents] = False

    def store_steps(self, agents, *, obs, actions, logprobs, values, masks, starts=None, state=None, action_masks=None):
        """Stores the steps just taken by `agents` (numpy arrays; LSTM: the (h, c) each started from, tensors); an
        agent whose rows are all full this rollout keeps its step for the next one."""
        store = self.row[agents] >= 0
        carry = ~store
        if carry.any():
            # Groups that come back in turn (common/vector.py, ALE's) fill their last rows within one turn, so an agent
            # takes one step after its last row filled; were they to come back unevenly, its latest step is kept.
            kept = agents[carry]
            self.carried[kept] = True
            self.carried_obs[kept] = obs[carry]
            self.carried_actions[kept] = actions[carry]
            self.carried_logprobs[kept] = logprobs[carry]
            self.carried_values[kept] = values[carry]
            self.carried_masks[kept] = masks[carry]
            if action_masks is not None:
                self.carried_action_masks[kept] = action_masks[carry]
            if state is not None:
                self.carried_starts[kept] = starts[carry]
                for carried, now in zip(self.carried_state, take(state, torch.as_tensor(carry))):
                    carried[torch.as_tensor(kept)] = now
        if not store.any():
            return
        agents = agents[store]
        rows = self.row[agents]
        pos = self.pos[agents]
        self.obs[rows, pos] = obs[store]
        self.actions[rows, pos] = actions[store]
        self.logprobs[rows, pos] = logprobs[store]
        self.values[rows, pos] = values[store]
        self.masks[rows, pos] = masks[store]
        if action_masks is not None:
            self.action_masks[rows, pos] = action_masks[store]
        if state is not None:
            self.starts[rows, pos] = starts[store]
            first = torch.as_tensor(pos == 0)  # a row starts here: it is replayed from this state
            for stored, now in zip(self.initial_state, take(state, torch.as_tensor(store))):
                stored[torch.as_tensor(rows)[first]] = now[first]
        self.pending[agents] = True


class EpisodeStats:
    """Each agent's episodes as the env reports them (common/puffer_envs.py's contract: an episode ends and the next
    begins in the same step), and which observations begin one (an LSTM's state restarts there): the one that comes
    with an end, and the one an absent agent returns with. A reward counts for an agent that acted on its last
    observation (`acting`; mask True: absent agents act on nothing). The returns logged are whole games' (the env's
    `game_over`): an Atari game of several lives (each a learner's episode) is one."""

    def __init__(self, num_agents: int):
        self.log = EpisodeLog(num_agents)
        self.acting = np.zeros(num_agents, dtype=bool)  # the agent acted on its last observation

    def update(self, agents, rewards, dones, masks, game_over):
        """Counts this recv's rewards; (the agents whose game ended, per agent: this observation starts an episode).
        `game_over`: the steps that ended a whole game."""
        acting = self.acting[agents]
        ended = self.log.add(agents[acting], rewards[acting], game_over[acting])
        starting = dones | (masks & ~acting)
        self.acting[agents] = masks
        return ended, starting


def rollout(
    vecenv,
    policy,
    experience,
    episodes,
    *,
    obs_rms,
    reward_scaler,
    reward_scale,
    reward_clamp,
    gamma,
    device,
    timers,
):
    """recv(group) -> policy -> store -> send until every row of `experience` is full, each agent's steps in its own
    rows whatever order the groups come back in; env infos. A truncated step's reward gets gamma * V(final obs): the
    episode could have gone on. `obs_rms` (--norm-obs) learns from each real observation before scaling it;
    `reward_scaler` (--norm-reward) tracks each agent's discounted return. Rewards are times `reward_scale`
    (--norm-reward's 1 / std: fixed for the rollout and unclipped, unlike a2c_cartpole.py's per step and clipped at 10,
    as SB3's, so every reward an update learns from is in one unit), clamped to +-`reward_clamp` if given (PufferLib
    always clamps to 1)."""
    infos = []
    experience.reset()
    while experience.full_rows < experience.segments:
        start = time.perf_counter()
        obs, rewards, terminals, truncations, step_infos, agents, masks = vecenv.recv()
        timers["env"] += time.perf_counter() - start

        start = time.perf_counter()
        infos.extend(step_infos)
        agents = np.asarray(agents)
        if obs_rms is not None:  # the real agents' observations join the statistics, then all are scaled by them
            if masks.any():
                obs_rms.update(obs[masks])
            obs = obs_rms.normalize(obs)
        dones = terminals | truncations
        acting = episodes.acting[agents]  # this recv's rewards are for the steps these agents took
        _, starting = episodes.update(agents, rewards, dones, masks, vecenv.game_over[agents])
        if reward_scaler is not None and acting.any():
            reward_scaler.track(agents[acting], rewards[acting], dones[acting])
        action_masks = None if vecenv.action_masks is None else vecenv.action_masks[agents]
        with torch.inference_mode():
            obs_t = torch.as_tensor(obs, device=device, dtype=torch.float32)
            carried = None
            state = None
            if policy.lstm is not None:  # each agent's state after its last step, zeroed where an episode begins
                agents_t = torch.as_tensor(agents, device=device)
                keep = torch.as_tensor(~starting, device=device)
                carried = take(experience.state, agents_t)
                state = tuple(x * keep.unsqueeze(-1) for x in carried)
            out, values, next_state = policy.step(obs_t, state)
            if not torch.isfinite(values).all():  # before sampling, which fails on NaN logits with torch's message
                raise FloatingPointError(
                    f"the value of an observation became {values[~torch.isfinite(values)][0].item()} in the rollout: "
                    "the env returned a non-finite observation, or the weights are no longer finite"
                )
            actions, logprobs = policy.sample(out, None if action_masks is None else torch.as_tensor(action_masks))
            if policy.lstm is not None:
                for stored, new in zip(experience.state, next_state):
                    stored[agents_t] = new
        actions = actions.cpu().numpy()
        logprobs = logprobs.cpu().numpy()
        values = values.cpu().numpy()

        pending = experience.pending[agents]
        if pending.any():
            pending_rewards = rewards[pending].astype(np.float32) * reward_scale
            if reward_clamp is not None:
                pending_rewards = np.clip(pending_rewards, -reward_clamp, reward_clamp)
            truncated = truncations[pending]
            if truncated.any():  # V(final observation), with the memory of the episode it ended
                final_obs = vecenv.final_observations[agents[pending][truncated]]
                if obs_rms is not None:
                    final_obs = obs_rms.normalize(final_obs)
                final_obs = torch.as_tensor(final_obs, device=device, dtype=torch.float32)
                ended = torch.as_tensor(np.flatnonzero(pending)[truncated])
                with torch.inference_mode():
                    final_values = policy.step(final_obs, take(carried, ended))[1].cpu().numpy()
                pending_rewards[truncated] += gamma * final_values
            experience.finish_steps(
                agents[pending],
                pending_rewards,
                terminals[pending].astype(np.float32),
                truncations[pending].astype(np.float32),
                values[pending],
            )

        # Absent agents' steps (mask False) are stored, flagged, and carry no loss.
        experience.store_steps(
            agents,
            obs=obs,
            actions=actions,
            logprobs=logprobs,
            values=values,
            masks=masks,
            starts=starting,
            state=state,
            action_masks=action_masks,
        )
        actions_np = to_env(actions, vecenv.single_action_space)
        timers["inference"] += time.perf_counter() - start

        start = time.perf_counter()
        vecenv.send(actions_np)
        timers["env"] += time.perf_counter() - start
    return infos


def compute_gae(rewards, values, dones, next_value, gamma: float, gae_lambda: float, *, next_row=None):
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
        # A chain visits each row at most once, so it is resolved after at most as many passes as there are rows;
        # the bound also ends the loop when a NaN (which never equals itself) is in the chain.
        linked = next_row >= 0
        successor = next_row.clamp(min=0)
        first = advantages[:, 0].clone()
        for _ in range(len(next_row)):
            updated = advantages[:, 0] + decays[:, 0] * torch.where(linked, first[successor], 0.0)
            if torch.equal(updated, first):
                break
            first = updated
        advantages = advantages + decays * torch.where(linked, first[successor], 0.0)[:, None]
    return advantages, advantages + values


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


def ppo_loss(ratio, advantages, new_values, values, returns, masks, *, weights, clip_coef, vf_clip_coef):
    """(policy loss, value loss) of the clipped PPO objective on a minibatch of rows (rows, horizon): the probability
    ratios new / rollout policy, the advantages, the new values, the rollout's values and returns, `masks` (1 a real
    step). Importance `weights` (rows, or None) scale both terms. Each is a mean over the real steps; the value loss is
    0.5 x the squared error (clipped to +-`vf_clip_coef` around the rollout's value), as in CleanRL's ppo.py and
    pufferl.py."""
    pg = torch.max(-advantages * ratio, -advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef))
    v_clipped = values + torch.clamp(new_values - values, -vf_clip_coef, vf_clip_coef)
    v = torch.max((new_values - returns) ** 2, (v_clipped - returns) ** 2)
    if weights is not None:
        pg = pg * weights[:, None]
        v = v * weights[:, None]
    count = masks.sum().clamp(min=1.0)
    pg_loss = (pg * masks).sum() / count
    v_loss = 0.5 * (v * masks).sum() / count
    return pg_loss, v_loss


def masked_mean(x: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """The mean of `x` over the real steps (masks 1)."""
    return (x * masks).sum() / masks.sum().clamp(min=1.0)


def normalize_advantages(advantages: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """Zero mean, unit std over the minibatch's real steps."""
    count = masks.sum().clamp(min=2.0)
    mean = (advantages * masks).sum() / count
    std = ((((advantages - mean) * masks) ** 2).sum() / (count - 1)).sqrt()
    return (advantages - mean) / (std + 1e-8)


def evaluate(policy: Policy, args: Args, obs_rms, *, episodes: int, seed: int, device, videos=(), opponents=False):
    """Plays until every agent of a fresh in-process env has finished one episode (`episodes` envs; the env's own
    stats: over all games ended), observations scaled by the training's `obs_rms`, frozen; per-agent returns and
    lengths, and with two or more kinds each kind's ("return/<kind>"). `opponents` (--eval-opponents random): in env i
    team i % teams plays the policy, the others act uniformly at random; each kind's returns as
    "return_vs_random/<kind>".
    `videos`: paths (.mp4, .gif) to record the first episode to; recording changes nothing that is played."""
    vecenv = make_puffer_vecenv(
        args.env_id,
        episodes,
        seed,
        max_ticks=args.max_ticks,
        log_interval=1,
        env_kwargs=args.env_kwargs,
        render=bool(videos),
        step_cap=args.eval_max_steps,
        teams=args.teams,
    )
    kinds = vecenv.kinds
    ends = EpisodeStats(vecenv.num_agents)
    infos = []
    frames = []
    first_return = np.full(vecenv.num_agents, np.nan)
    first_length = np.zeros(vecenv.num_agents)
    state = policy.initial_state(vecenv.num_agents, device)
    trained = None
    rng = np.random.default_rng(seed)
    if opponents:  # the agents whose team plays the policy in their env
        env_of = np.arange(vecenv.num_agents) // vecenv.agents_per_env
        trained = kinds.team_of[vecenv.agent_kinds] == env_of % (kinds.team_of.max() + 1)
    try:
        vecenv.async_reset(seed)
        while np.isnan(first_return).any():
            obs, rewards, terminals, truncations, step_infos, agents, masks = vecenv.recv()
            infos.extend(step_infos)
            ended_before = len(ends.log.returns)
            agents = np.asarray(agents)
            ended, starting = ends.update(agents, rewards, terminals | truncations, masks, vecenv.game_over[agents])
            for agent, ret, length in zip(ended, ends.log.returns[ended_before:], ends.log.lengths[ended_before:]):
                if np.isnan(first_return[agent]):
                    first_return[agent] = ret
                    first_length[agent] = length
            if videos and np.isnan(first_return[0]):
                frames.append(puffer_envs.first_frame(vecenv))
            if obs_rms is not None:  # scaled as in training, by the training's statistics, frozen
                obs = obs_rms.normalize(obs)
            with torch.inference_mode():  # the LSTM state carried through each episode, reset as in training
                if state is not None:
                    keep = torch.as_tensor(~starting, device=device).unsqueeze(-1)
                    state = tuple(x * keep for x in state)
                obs = torch.as_tensor(obs, device=device, dtype=torch.float32)
                out, _, state = policy.step(obs, state)
                action_masks = None if vecenv.action_masks is None else torch.as_tensor(vecenv.action_masks[agents])
                actions = policy.choose(out, args.eval_actions, action_masks)
            actions = to_env(actions.cpu().numpy(), vecenv.single_action_space)
            if opponents:
                random = ~trained[agents]
                actions[random] = kinds.random_actions(vecenv.agent_kinds[agents][random], rng)
            vecenv.send(actions)
        save_video(frames, videos, puffer_envs.frame_rate(vecenv))
    finally:
        vecenv.close()
    kind_names = kinds.names if kinds is not None else []
    if opponents:  # each kind's returns where its team played the policy
        return {
            f"return_vs_random/{name}": first_return[trained & (vecenv.agent_kinds == k)]
            for k, name in enumerate(kind_names)
        }
    result = {"return": first_return, "length": first_length}
    result.update(puffer_envs.eval_stats(infos))  # the env's own (Tetris's lines and score), over all games ended
    for k, name in enumerate(kind_names):
        result[f"return/{name}"] = first_return[vecenv.agent_kinds == k]
    return result


def evaluate_checkpoint(args: Args) -> dict:
    """--eval-checkpoint: --eval-episodes episodes (or, with --render, one Tetris game drawn in the terminal)."""
    ckpt, args, device = run.open_checkpoint("ppo_puffer_async", Args, args, required=("obs_rms",))
    # the run's own vecenv: validate_args checks the flags against it, and the policy takes its spaces
    probe = make_puffer_vecenv(
        args.env_id, args.num_envs, args.seed, max_ticks=args.max_ticks, env_kwargs=args.env_kwargs, teams=args.teams
    )
    validate_args(args, probe)
    policy = Policy(probe.single_observation_space.shape, probe.single_action_space, args).to(device)
    obs_rms = None
    if ckpt["obs_rms"] is not None:  # the training's observation statistics, frozen
        obs_rms = puffer_envs.observation_statistics(probe)
        obs_rms.load_state_dict(ckpt["obs_rms"])
    probe.close()
    run.load_weights(policy, ckpt, "--eval-checkpoint", args.eval_checkpoint)
    if args.render:
        state = policy.initial_state(1, device)

        def act(obs):
            nonlocal state
            with torch.inference_mode():
                out, _, state = policy.step(torch.as_tensor(obs, device=device), state)
            return policy.choose(out, args.eval_actions).cpu().numpy()

        return puffer_envs.watch(args.env_id, act, args.seed + 10_000, args.max_ticks, args.render_fps)
    name = f"checkpoint-step{ckpt['global_step']}"
    videos = video_paths(os.path.dirname(args.eval_checkpoint), name, args.capture_video, args.gif)
    eval_seed = args.seed + 10_000
    result = evaluate(policy, args, obs_rms, episodes=args.eval_episodes, seed=eval_seed, device=device, videos=videos)
    if args.eval_opponents == "random":  # each team against uniformly random teams
        against_random = evaluate(
            policy, args, obs_rms, episodes=args.eval_episodes, seed=eval_seed, device=device, opponents=True
        )
        result.update(against_random)
    episodes = f"{len(result['return'])} episodes ({args.eval_actions} actions)"
    report(f"{args.eval_checkpoint} (step {ckpt['global_step']:,}), {episodes}:", result)
    return result


def train(args: Args) -> dict:
    # One process or a torchrun rank; --resume: the saved run's flags (with this --total-timesteps) and its state.
    world, device, args, resumed = run.start(args, "ppo_puffer_async", required=("obs_rms", "return_rms"))
    validate_args(args)
    seed = args.seed + distributed.RANK_SEED_OFFSET * world.rank  # each rank of a torchrun job plays its own episodes
    torch.set_num_threads(1)  # initial weights drawn on one thread: the same bits whatever the thread count
    torch.manual_seed(args.seed)  # and on every rank
    vecenv = make_puffer_vecenv(
        args.env_id,
        args.num_envs,
        seed,
        backend=args.backend,
        num_workers=args.num_workers,
        async_factor=args.async_factor,
        env_kwargs=args.env_kwargs,
        max_ticks=args.max_ticks,
        log_interval=args.horizon,
        teams=args.teams,
    )
    validate_args(args, vecenv)
    # --norm-obs: the observations' running mean and std (updated in the rollout, frozen for evaluation); --norm-reward:
    # the running std of each agent's discounted return
    obs_rms = puffer_envs.observation_statistics(vecenv) if args.norm_obs else None
    reward_scaler = RewardScaler(vecenv.num_agents, args.gamma) if args.norm_reward else None
    batch_size = args.batch_size or vecenv.num_agents * args.horizon  # agent steps per update and rank
    segments = batch_size // args.horizon  # buffer rows per rank
    obs_shape = vecenv.single_observation_space.shape
    action_space = vecenv.single_action_space
    policy = Policy(obs_shape, action_space, args).to(device)
    # foreach: each op of Adam's step on all the tensors at once, not torch's CPU loop: the same steps, faster
    # (docs/benchmarks.md)
    optimizer = torch.optim.Adam(policy.parameters(), lr=args.learning_rate, eps=1e-5, foreach=True)
    episodes = EpisodeStats(vecenv.num_agents)
    torch.set_num_threads(args.torch_threads)  # (the Tetris default gives torch both cores)
    update_size = batch_size * world.size  # agent steps per update, all ranks together
    num_updates = run.count_updates(args.total_timesteps, update_size, world.size, resumed)
    # The schedules' values now (an extended run goes on from them), and what a checkpoint holds.
    rates = dict(learning_rate=args.learning_rate, ent_coef=args.ent_coef, prio_beta=args.prio_beta0)
    state = dict(model=policy, optimizer=optimizer, obs_rms=obs_rms, return_rms=reward_scaler, rates=rates)
    start_update, schedule = run.restore(resumed, args, state, num_updates, world)  # --resume: load what was saved
    about = f"{args.env_id}, {vecenv.num_agents} agents, {args.async_factor} group(s), {segments} rows x {args.horizon}"
    writer, checkpoint = run.open_run(
        "ppo_puffer_async",
        args,
        world,
        resumed,
        dict(state, schedule=schedule),
        update_size=update_size,
        done=start_update,
        about=about,
    )
    progress = Progress(num_updates * update_size, start_update * update_size)
    stop = distributed.StopRequest(world)  # Ctrl-C: finish this update, save, stop (all ranks alike)
    experience = Experience(
        segments,
        args.horizon,
        vecenv.num_agents,
        obs_shape,
        device,
        action_space=action_space,
        state_size=args.lstm_hidden_size if args.lstm else 0,
        mask_size=0 if vecenv.action_masks is None else vecenv.action_masks.shape[1],
    )
    vecenv.async_reset(seed + 1_000_000 * start_update)  # a resumed run plays fresh episodes
    timers = dict(env=0.0, inference=0.0, learn=0.0)
    episode_means = {}
    kind_returns = {}
    env_stats = {}
    last_eval = None
    eval_text = ""
    interrupted = False
    try:
        for update in range(start_update + 1, num_updates + 1):
            global_step = update * update_size  # once this update is done
            # Linear from where this run's lines start (run.restore): lr -> 0, ent_coef (--anneal-ent) -> 0, beta -> 1
            done = update - 1 - schedule["update"]
            left = num_updates - schedule["update"]
            if args.anneal_lr:
                rates["learning_rate"] = (1.0 - done / left) * schedule["learning_rate"]
                optimizer.param_groups[0]["lr"] = rates["learning_rate"]
            if args.anneal_ent:
                rates["ent_coef"] = schedule["ent_coef"] - schedule["ent_coef"] * done / max(left - 1, 1)
            beta0 = schedule["prio_beta"]
            rates["prio_beta"] = 1.0 if left <= 1 else beta0 + (1.0 - beta0) * done / (left - 1)
            reward_scale = args.reward_scale
            if args.norm_reward:
                reward_scale = args.reward_scale / reward_scaler.std()
            infos = rollout(
                vecenv,
                policy,
                experience,
                episodes,
                obs_rms=obs_rms,
                reward_scaler=reward_scaler,
                reward_scale=reward_scale,
                reward_clamp=args.reward_clamp,
                gamma=args.gamma,
                device=device,
                timers=timers,
            )

            start = time.perf_counter()
            batch = experience.tensors(device)  # the rollout as tensors (on the CPU: the same memory)
            masks = batch["masks"].float()
            values = batch["values"]
            dones = torch.maximum(batch["terminals"], batch["truncations"])
            advantages, returns = compute_gae(
                batch["rewards"],
                values,
                dones,
                batch["next_value"],
                args.gamma,
                args.gae_lambda,
                next_row=batch["next_row"],
            )
            clipfracs = []
            for epoch in range(args.update_epochs):
                minibatches = sample_minibatches(
                    advantages, masks, args.num_minibatches, args.prio_alpha, rates["prio_beta"]
                )
                for rows, weights in minibatches:
                    obs = batch["obs"][rows]
                    initial_state = take(batch["initial_state"], rows)  # the LSTM's (h, c) where each row began
                    starts = take(batch["starts"], rows)
                    out, new_values = policy.unroll(obs, initial_state, starts, args.burn_in, args.tbptt)
                    action_masks = take(batch["action_masks"], rows)  # agents of two or more kinds: their own actions
                    new_logprobs, entropy = policy.logprob_and_entropy(out, batch["actions"][rows], action_masks)
                    logratio = new_logprobs - batch["logprobs"][rows]
                    ratio = logratio.exp()
                    mb_masks = masks[rows]
                    if args.burn_in:  # burn-in steps only warm the state up
                        mb_masks[:, : args.burn_in] = 0.0
                    with torch.no_grad():
                        # CleanRL's ppo.py's two estimators of KL(old || new): -log r, and the low-variance
                        # (r - 1) - log r
                        old_approx_kl = masked_mean(-logratio, mb_masks)
                        approx_kl = masked_mean((ratio - 1) - logratio, mb_masks)
                        clipfrac = masked_mean(((ratio - 1.0).abs() > args.clip_coef).float(), mb_masks)
                    mb_advantages = advantages[rows]
                    if args.norm_adv:
                        mb_advantages = normalize_advantages(mb_advantages, mb_masks)
                    pg_loss, v_loss = ppo_loss(
                        ratio,
                        mb_advantages,
                        new_values,
                        values[rows],
                        returns[rows],
                        mb_masks,
                        weights=weights,
                        clip_coef=args.clip_coef,
                        vf_clip_coef=args.vf_clip_coef,
                    )
                    entropy_loss = masked_mean(entropy, mb_masks)  # the bonus is not importance-weighted
                    loss = pg_loss + args.vf_coef * v_loss - rates["ent_coef"] * entropy_loss
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    # torchrun: the ranks' mean gradients and loss, and of the KL and clipfrac (every rank stops alike
                    # on --target-kl, and logs what all of them measured)
                    mean_loss, approx_kl, old_approx_kl, clipfrac = distributed.average_gradients(
                        world, policy.parameters(), loss.detach(), approx_kl, old_approx_kl, clipfrac
                    )
                    clipfracs.append(clipfrac)
                    if not torch.isfinite(mean_loss):
                        raise run.non_finite_loss_error(mean_loss, update, global_step)
                    grad_norm = nn.utils.clip_grad_norm_(policy.parameters(), args.max_grad_norm)
                    optimizer.step()
                if args.target_kl is not None and approx_kl > args.target_kl:
                    break
            timers["learn"] += time.perf_counter() - start

            # Every rank's episodes and infos, and whether any rank saw a Ctrl-C (torchrun).
            episode_returns, episode_lengths, episode_agents = episodes.log.pop()
            pooled = distributed.pool(world, episode_returns, episode_lengths, episode_agents, infos, [stop.requested])
            episode_returns, episode_lengths, episode_agents, infos, stops = pooled
            if episode_returns:  # for the progress line
                episode_means = {"return": float(np.mean(episode_returns)), "length": float(np.mean(episode_lengths))}
                kind_returns = puffer_envs.kind_means("charts/episodic_return", episode_returns, episode_agents, vecenv)
            env_stats = puffer_envs.info_scalars(infos)  # the env's own (Tetris's lines, score, ...), if it reports any

            if world.rank == 0 and (args.eval_freq and update % args.eval_freq == 0 or update == num_updates):
                videos = video_paths(checkpoint.run_dir, f"eval-step{global_step}", args.capture_video)
                # the same episodes at every evaluation and in --eval-checkpoint: the points differ by the policy alone
                eval_seed = args.seed + 10_000
                with progress.paused(), run.seeded_rng(eval_seed, device):  # its own episodes and random stream
                    result = evaluate(
                        policy, args, obs_rms, episodes=args.eval_episodes, seed=eval_seed, device=device, videos=videos
                    )
                    if args.eval_opponents == "random":  # each team against uniformly random teams
                        against_random = evaluate(
                            policy,
                            args,
                            obs_rms,
                            episodes=args.eval_episodes,
                            seed=eval_seed,
                            device=device,
                            opponents=True,
                        )
                        result.update(against_random)
                last_eval, eval_text = log_eval(writer, result, global_step)
            if writer is not None:
                # As CleanRL's ppo.py: the last minibatch's losses, and the fraction clipped over all of the update's
                # minibatches (pufferl.py logs every loss, KL and clipfrac as the mean over all minibatches)
                writer.add_scalar("charts/learning_rate", rates["learning_rate"], global_step)
                writer.add_scalar("charts/ent_coef", rates["ent_coef"], global_step)
                writer.add_scalar("charts/prio_beta", rates["prio_beta"], global_step)
                writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
                writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
                writer.add_scalar("losses/entropy", entropy_loss.item(), global_step)
                writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
                writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
                writer.add_scalar("losses/clipfrac", torch.stack(clipfracs).mean().item(), global_step)
                writer.add_scalar("losses/grad_norm", grad_norm.item(), global_step)
                explained_variance = logs.explained_variance(values[masks > 0], returns[masks > 0])
                writer.add_scalar("losses/explained_variance", explained_variance, global_step)
                if policy.log_std is not None:  # the Gaussian's std, mean over the action's dimensions: how it explores
                    action_std = policy.action_std(None if vecenv.kinds is None else vecenv.kinds.masks)
                    writer.add_scalar("charts/action_std", action_std, global_step)
                for name, seconds in timers.items():  # where the time goes: env, inference, learn
                    writer.add_scalar(f"perf/{name}_time_frac", seconds / sum(timers.values()), global_step)
                writer.add_scalar("charts/SPS", progress.sps(global_step), global_step)  # wall time, evaluations in
                writer.add_scalar("perf/train_SPS", progress.train_sps(global_step), global_step)
                if vecenv.agents_per_env > 1:
                    writer.add_scalar("charts/agent_steps", global_step, global_step)
                    writer.add_scalar("charts/env_steps", global_step / vecenv.agents_per_env, global_step)
                # Per agent; a whole game where the env says one is longer than the learner's episode
                if args.episode_points == "each":  # a point per finished episode, as CleanRL's ppo.py, at this step
                    for ret, length, agent in zip(episode_returns, episode_lengths, episode_agents):
                        writer.add_scalar("charts/episodic_return", ret, global_step)
                        writer.add_scalar("charts/episodic_length", length, global_step)
                        if vecenv.kinds is not None:  # agents of two or more kinds: each kind's own too
                            kind = vecenv.kinds.names[vecenv.agent_kinds[agent]]
                            writer.add_scalar(f"charts/episodic_return/{kind}", ret, global_step)
                elif episode_returns:  # the mean of this update's episodes (Tetris: ~1,000 games end a second early on)
                    writer.add_scalar("charts/episodic_return", episode_means["return"], global_step)
                    writer.add_scalar("charts/episodic_length", episode_means["length"], global_step)
                    for tag, value in kind_returns.items():  # charts/episodic_return/<kind>
                        writer.add_scalar(tag, value, global_step)
                for tag, value in env_stats.items():  # tetris/<stat>
                    writer.add_scalar(tag, value, global_step)
                kinds_line = {tag.split("/")[-1]: value for tag, value in kind_returns.items()}
                progress.update(
                    global_step,
                    update=update,
                    ret=episode_means.get("return"),
                    len=episode_means.get("length"),
                    eval=last_eval,
                    **kinds_line,
                )
            if args.checkpoint_freq and update % args.checkpoint_freq == 0:
                checkpoint.save(update)  # a periodic save that fails warns; training goes on
            if any(stops):  # Ctrl-C (on any rank): this update is whole; save it and stop
                interrupted = True
                break
    except KeyboardInterrupt:  # a second Ctrl-C: stop at once; the half-done update is dropped, nothing saved
        raise KeyboardInterrupt(checkpoint.kept(hint=True)) from None
    except (WorkerError, RuntimeError) as e:  # an env worker or (torchrun) another rank died: the last save holds it
        raise run.lost_error(e, world, checkpoint) from None
    finally:
        run.close(world, vecenv, writer, stop)  # the envs and their workers, the writer, Ctrl-C's handler, torchrun
    checkpoint.save(update, final=True)  # fails with one line naming the checkpoint that was kept
    print_end(interrupted, checkpoint, progress, global_step, eval_text)
    return run.summary(
        checkpoint,
        progress,
        update,
        interrupted,
        policy=policy,
        args=args,
        obs_rms=obs_rms,
        episode_stats=episode_means,
        env_stats=env_stats,
    )


def main(argv=None) -> None:
    try:
        # each flag's default: --env-id's preset (common/presets.py); with --resume, --eval-checkpoint: the saved run's
        default = run.defaults(Args, "ppo_puffer_async", presets.ppo_puffer_async, argv)
        args = tyro.cli(Args, args=argv, default=default)
        if args.eval_checkpoint:
            evaluate_checkpoint(args)
        elif train(args)["interrupted"]:
            sys.exit(run.EXIT_INTERRUPTED)  # Ctrl-C: the run saved; 130, as a shell reports a SIGINT
    except run.ONE_LINE_ERRORS as e:  # bad flags, a non-finite loss, a dead worker or rank, a failed save, Ctrl-C
        sys.exit(run.exit_for(e))


if __name__ == "__main__":
    main()
