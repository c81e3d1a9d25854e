"""PPO (Schulman et al. 2017, CleanRL's ppo.py layout) on our numpy Tetris, sized for a 2-core laptop CPU.

Read top to bottom: Args, network, storage and rollout, GAE, loss, evaluation/watching, train(), main().
What this file does that seed 004's PPO did not:
  * The Tetris env resets games on the same step they end; truncation at --max-ticks is bootstrapped
    with V(final observation), which the env keeps in shared memory for every backend.
  * Checkpoints (atomic) every --checkpoint-freq updates, at the end and on Ctrl-C (then exit code 130);
    --resume continues the same TensorBoard run at the saved global step, to the saved total, with the
    learning-rate schedule continuing where it was.
  * Defaults measured on this machine: a few hundred envs x 64 steps instead of 1024 x 2048.

    python ppo_tetris.py                                        # 40M steps, ~19 min on 2 cores
    python ppo_tetris.py --resume runs/<run>/ppo_tetris.pt      # finish an interrupted run
    python ppo_tetris.py --resume runs/<run>/ppo_tetris.pt --total-timesteps 60000000   # extend it
    python ppo_tetris.py --eval-checkpoint runs/<run>/ppo_tetris.pt --eval-episodes 100
    python ppo_tetris.py --eval-checkpoint runs/<run>/ppo_tetris.pt --render   # watch one game
    torchrun --standalone --nproc-per-node 2 ppo_tetris.py      # data-parallel: 2 ranks, each its own games
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
from torch.distributions import Categorical

from common.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from common.envs import make_tetris_vecenv
from common.vector import WorkerError
from common.logs import Progress, make_run_name, make_writer
from common.tetris import Tetris


@dataclass
class Args:
    exp_name: str = "ppo_tetris"
    """the name of this experiment (part of the run name)"""
    env_id: str = "PufferTetris"
    """the env name used in the run name (the env is always common.tetris.Tetris)"""
    seed: int = 1
    """seed of the experiment (torch, envs)"""
    device: Literal["cpu", "cuda", "auto"] = "cpu"
    """where the network runs (auto: cuda if available)"""
    torch_threads: int = 1
    """torch CPU threads; on 2 shared cores a second thread made the MLP 3x slower, not faster"""
    total_timesteps: Optional[int] = None
    """total environment steps (all ranks together under torchrun), rounded down to whole updates. Default (None): 40,000,000, about 19 min (18.6 min
    at 35.8k SPS measured on 2 shared cores); with --resume, the checkpoint's total. A larger total on --resume
    extends the run: the learning rate goes on from the last update's and falls to 0 at the new total"""
    backend: Literal["Serial", "Multiprocessing"] = "Serial"
    """envs stepped in this process, or in --num-workers sleeping worker processes (common/vector.py)"""
    num_envs: int = 512
    """the number of parallel Tetris games (per rank under torchrun: every rank has this many)"""
    num_workers: int = 1
    """Tetris env objects (worker processes with Multiprocessing) sharing --num-envs games"""
    num_steps: int = 64
    """the rollout length: steps per game per update"""
    max_ticks: int = 10_000
    """a game is truncated (and bootstrapped) after this many steps"""
    learning_rate: float = 1e-3
    """the learning rate of the Adam optimizer (seed 004's 2.5e-4 learned slower in our tuning runs)"""
    anneal_lr: bool = True
    """linearly anneal the learning rate to 0 over the run"""
    gamma: float = 0.99
    """the discount factor"""
    gae_lambda: float = 0.95
    """the GAE lambda"""
    num_minibatches: int = 8
    """minibatches per epoch"""
    update_epochs: int = 2
    """epochs over each rollout (learning is ~90% of the time: 2 epochs nearly double SPS)"""
    norm_adv: bool = True
    """normalize advantages per minibatch"""
    clip_coef: float = 0.2
    """the surrogate clipping coefficient"""
    clip_vloss: bool = True
    """clip the value loss around the rollout's values, as in the PPO paper's code"""
    ent_coef: float = 0.03
    """the entropy-bonus coefficient"""
    vf_coef: float = 0.5
    """the value-loss coefficient"""
    max_grad_norm: float = 0.5
    """the maximum global gradient norm (clipping)"""
    target_kl: Optional[float] = None
    """stop the update's epochs early once approx_kl exceeds this (None: never); under torchrun the ranks'
    mean decides, so all stop together"""
    checkpoint_freq: int = 50
    """save runs/<run>/ppo_tetris.pt every this many updates (0: only at the end and on Ctrl-C)"""
    resume: Optional[str] = None
    """continue the run saved in this checkpoint with its flags (only --total-timesteps and --device can change)"""
    eval_checkpoint: Optional[str] = None
    """load this checkpoint and only evaluate it (mean/std over --eval-episodes games)"""
    eval_episodes: int = 100
    """games per --eval-checkpoint evaluation"""
    render: bool = False
    """with --eval-checkpoint: play one game in the terminal instead"""
    render_fps: float = 10.0
    """board redraws per second with --render"""
    dist_backend: Literal["auto", "gloo", "nccl"] = "auto"
    """torch.distributed backend under torchrun (auto: nccl with --device cuda, gloo on CPU)"""


DEFAULT_TOTAL_TIMESTEPS = 40_000_000
# 128 + SIGINT: what a shell reports for a program stopped by Ctrl-C, so a calling script can tell an
# interrupted run (checkpoint saved, resumable) from a finished one.
EXIT_INTERRUPTED = 130


def validate_args(args: Args) -> None:
    """Bad flags fail here, before any env or network is built, naming the flag to change."""
    for flag, value in [("--num-envs", args.num_envs), ("--num-workers", args.num_workers),
                        ("--num-steps", args.num_steps), ("--num-minibatches", args.num_minibatches),
                        ("--update-epochs", args.update_epochs), ("--eval-episodes", args.eval_episodes),
                        ("--max-ticks", args.max_ticks), ("--torch-threads", args.torch_threads)]:
        if value < 1:
            raise ValueError(f"{flag} must be at least 1 (got {value})")
    if args.num_envs % args.num_workers:
        raise ValueError(f"--num-envs {args.num_envs} must be divisible by --num-workers {args.num_workers}")
    batch_size = args.num_envs * args.num_steps
    if batch_size % args.num_minibatches:
        raise ValueError(f"--num-minibatches {args.num_minibatches} must divide num_envs * num_steps = {batch_size}")
    # With --resume the update size is the checkpoint's: train() checks the total again after loading it.
    if args.total_timesteps is not None and args.total_timesteps < batch_size and not args.resume:
        raise ValueError(f"--total-timesteps {args.total_timesteps} is less than one update ({batch_size} steps)")
    for flag, value in [("--learning-rate", args.learning_rate), ("--clip-coef", args.clip_coef),
                        ("--render-fps", args.render_fps)]:
        if value <= 0:
            raise ValueError(f"{flag} must be positive (got {value})")
    if args.checkpoint_freq < 0:
        raise ValueError(f"--checkpoint-freq must be >= 0 (got {args.checkpoint_freq})")
    if args.render and not args.eval_checkpoint:
        raise ValueError("--render needs --eval-checkpoint PATH (the agent to watch)")
    if args.resume and args.eval_checkpoint:
        raise ValueError("--resume and --eval-checkpoint exclude each other: pass --eval-checkpoint alone to "
                         "evaluate a checkpoint, or --resume alone to train it further")


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    """MLP 234-256-256 shared by a policy head and a value head (seed 004's PPOAgent)."""

    def __init__(self, obs_dim: int, num_actions: int, hidden_size: int = 256):
        super().__init__()
        self.backbone = nn.Sequential(
            layer_init(nn.Linear(obs_dim, hidden_size)), nn.ReLU(),
            layer_init(nn.Linear(hidden_size, hidden_size)), nn.ReLU(),
        )
        # Small policy-head init keeps the first policy near uniform; value head at unit scale.
        self.actor = layer_init(nn.Linear(hidden_size, num_actions), std=0.01)
        self.critic = layer_init(nn.Linear(hidden_size, 1), std=1.0)

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(self.backbone(x)).squeeze(-1)

    def get_action_and_value(self, x: torch.Tensor, action: Optional[torch.Tensor] = None):
        hidden = self.backbone(x)
        probs = Categorical(logits=self.actor(hidden), validate_args=False)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden).squeeze(-1)


def make_storage(num_steps: int, num_envs: int, obs_dim: int, device: torch.device) -> dict:
    """Rollout tensors, allocated once: the shapes are the documentation."""
    shape = (num_steps, num_envs)
    return dict(obs=torch.zeros(shape + (obs_dim,), device=device),
                actions=torch.zeros(shape, dtype=torch.long, device=device),
                **{key: torch.zeros(shape, device=device) for key in ("logprobs", "rewards", "dones", "values")})


def collect_rollout(envs, agent: Agent, next_obs: torch.Tensor, storage: dict, gamma: float,
                    device: torch.device, timers: dict):
    """Fills `storage` by stepping every game num_steps times with the current policy.

    `dones[t]` = 1 when transition t ended its game. On truncation the step's reward already holds
    `gamma * V(final_obs)`, so GAE can treat every game end as a hard stop. Returns (next_obs, infos).
    """
    infos = []
    for step in range(storage["obs"].shape[0]):
        start = time.perf_counter()
        storage["obs"][step] = next_obs
        with torch.inference_mode():
            action, logprob, _, value = agent.get_action_and_value(next_obs)
        storage["actions"][step], storage["logprobs"][step], storage["values"][step] = action, logprob, value
        actions = action.cpu().numpy().astype(np.int32)
        timers["inference"] += time.perf_counter() - start

        start = time.perf_counter()
        obs, reward, terminated, truncated, step_infos = envs.step(actions)
        timers["env"] += time.perf_counter() - start

        start = time.perf_counter()
        # On the CPU this shares the env's buffer, which is safe: storage copies it before the next step.
        next_obs = torch.as_tensor(obs, device=device)
        storage["rewards"][step] = torch.as_tensor(reward, device=device)
        # Truncated at --max-ticks, not lost: the game could have gone on, so it is worth V(final_obs),
        # not 0. The env row already holds the next game, so the true last observation comes from
        # final_observations (terminal and truncated never coincide).
        bootstrap = np.flatnonzero(truncated)
        if len(bootstrap):
            final_obs = torch.as_tensor(envs.final_observations[bootstrap], device=device)
            with torch.inference_mode():
                storage["rewards"][step, bootstrap] += gamma * agent.get_value(final_obs)
        storage["dones"][step] = torch.as_tensor(terminated | truncated, device=device)
        infos.extend(step_infos)
        timers["inference"] += time.perf_counter() - start
    return next_obs, infos


def compute_gae(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, next_value: torch.Tensor,
                gamma: float, gae_lambda: float):
    """Generalized Advantage Estimation on (T, N) tensors, the same contract as a2c_cartpole.py.

    `dones[t]` = 1 when the transition at step t ended the episode (truncation already bootstrapped
    into `rewards[t]`), `values[t]` = V(s_t), `next_value` = V(s_T) after the last step. An ended
    episode contributes neither V(next) nor later advantages: both are masked by (1 - dones[t]).
    Returns (advantages, returns) with returns = advantages + values, the value-function target.
    """
    advantages = torch.zeros_like(rewards)
    last_advantage = torch.zeros_like(next_value)
    for t in reversed(range(rewards.shape[0])):
        next_values = next_value if t == rewards.shape[0] - 1 else values[t + 1]
        next_nonterminal = 1.0 - dones[t]
        delta = rewards[t] + gamma * next_values * next_nonterminal - values[t]
        last_advantage = delta + gamma * gae_lambda * next_nonterminal * last_advantage
        advantages[t] = last_advantage
    return advantages, advantages + values


def ppo_loss(new_logprobs, old_logprobs, advantages, new_values, old_values, returns, entropy,
             clip_coef: float, clip_vloss: bool, vf_coef: float, ent_coef: float):
    """The clipped PPO objective on one minibatch (advantages already normalized if wanted).

    Returns (loss, pg_loss, v_loss, entropy, approx_kl, clipfrac); only `loss` needs gradients.
    approx_kl is the low-variance estimator E[(r - 1) - log r] (Schulman's "Approximating KL").
    """
    logratio = new_logprobs - old_logprobs
    ratio = logratio.exp()
    pg_loss = torch.max(-advantages * ratio,
                        -advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)).mean()
    if clip_vloss:
        # The value may move at most clip_coef from the rollout's estimate, or pay the larger error.
        v_clipped = old_values + torch.clamp(new_values - old_values, -clip_coef, clip_coef)
        v_loss = 0.5 * torch.max((new_values - returns) ** 2, (v_clipped - returns) ** 2).mean()
    else:
        v_loss = 0.5 * ((new_values - returns) ** 2).mean()
    entropy_mean = entropy.mean()
    loss = pg_loss - ent_coef * entropy_mean + vf_coef * v_loss
    with torch.no_grad():
        approx_kl = ((ratio - 1) - logratio).mean()
        clipfrac = ((ratio - 1.0).abs() > clip_coef).float().mean()
    return loss, pg_loss, v_loss, entropy_mean, approx_kl, clipfrac


def annealed_lr(anchor_lr: float, anchor_step: int, step: int, end_step: int) -> float:
    """The learning rate at `step`: linear from `anchor_lr` at `anchor_step` down to 0 at `end_step`.

    A fresh run anchors at (step 0, --learning-rate): CleanRL's schedule. The anchor is saved in the
    checkpoint, so a resume with the same total replays this schedule exactly. A resume with a new total
    re-anchors at the saved step with the learning rate of the last update, so the rate goes on from
    there without a jump and reaches 0 at the new total instead.
    """
    return anchor_lr * (1.0 - (step - anchor_step) / (end_step - anchor_step))


def merge_infos(infos: list) -> dict:
    """Tetris reports means over the games ended since its last report and their count n: weight by n."""
    total = sum(info["n"] for info in infos)
    return {key: sum(info[key] * info["n"] for info in infos) / total for key in infos[0] if key != "n"}


def play(agent: Agent, episodes: int, seed: int, max_ticks: int, device: torch.device,
         render_fps: Optional[float] = None) -> dict:
    """Plays `episodes` games, sampling from the policy as in training; arrays of per-game stats.

    One single-game Tetris per episode with log_interval=1: its info on the last step holds exactly
    that game's stats. With render_fps, game 0 is redrawn in the terminal at that pace, its last
    position included.
    """
    games = [Tetris(num_envs=1, seed=seed + i, max_ticks=max_ticks, log_interval=1) for i in range(episodes)]
    stats, active = [None] * episodes, list(range(episodes))
    while active:
        if render_fps:
            print("\033[H\033[2J" + games[0].render(), flush=True)  # home + clear screen
            time.sleep(1.0 / render_fps)
        obs = torch.as_tensor(np.concatenate([games[i].observations for i in active]), device=device)
        with torch.inference_mode():
            actions, _, _, _ = agent.get_action_and_value(obs)
        for i, action in zip(list(active), actions.cpu().numpy().astype(np.int32)):
            _, _, terminated, truncated, infos = games[i].step(action[None])
            if terminated[0] or truncated[0]:
                stats[i] = infos[0]
                active.remove(i)
                if render_fps and i == 0:
                    end = "game over" if terminated[0] else f"truncated at --max-ticks {max_ticks}"
                    print("\033[H\033[2J" + games[0].render_final() + f"\n{end}: {infos[0]['ep_length']:.0f} steps, "
                          f"score {infos[0]['score']:.0f}, lines {infos[0]['lines_deleted']:.0f}, "
                          f"return {infos[0]['ep_return']:.2f}", flush=True)
    return {key: np.array([s[key] for s in stats]) for key in ("ep_return", "ep_length", "lines_deleted", "score")}


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was asked for but torch sees no CUDA GPU; use --device cpu")
    return torch.device(name)


def load(path: str, flag: str) -> dict:
    try:
        return load_checkpoint(path, required_keys=("model", "optimizer", "args", "global_step", "update",
                                                    "run_name", "obs_dim", "num_actions", "torch_rng_state"))
    except CheckpointError as e:
        raise ValueError(f"{flag}: {e}; pass a runs/<run>/ppo_tetris.pt that this script saved") from None


def build_agent(ckpt: dict, flag: str, device: torch.device) -> Agent:
    agent = Agent(ckpt["obs_dim"], ckpt["num_actions"]).to(device)
    try:
        agent.load_state_dict(ckpt["model"])
    except RuntimeError as e:
        raise ValueError(f"{flag}: weights do not fit the 234-256-256 network ({str(e).splitlines()[0]})") from None
    return agent


def evaluate_checkpoint(args: Args, device: torch.device) -> dict:
    ckpt = load(args.eval_checkpoint, "--eval-checkpoint")
    agent = build_agent(ckpt, "--eval-checkpoint", device)
    stats = play(agent, 1 if args.render else args.eval_episodes, args.seed + 10_000, ckpt["args"]["max_ticks"],
                 device, render_fps=args.render_fps if args.render else None)
    games = len(stats["score"])
    print(f"{args.eval_checkpoint} (step {ckpt['global_step']:,}), {games} game{'s' if games > 1 else ''}:")
    for key, values in stats.items():  # one game has no spread to report
        print(f"  {key:<14} {values.mean():10.2f}" + (f" +/- {values.std():.2f}" if games > 1 else ""))
    return stats


# Rank r's games are seeded seed + RANK_SEED_OFFSET * r + i, so every rank plays its own games.
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
    per minibatch in benchmarks/bench_distributed.py, but it cannot carry those scalars). Returns the averaged
    extras. Every rank then holds the same bits, so the same Adam step keeps the parameters identical."""
    grads = [p.grad for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads] + [extras.to(grads[0].dtype)])
    dist.all_reduce(flat)
    flat /= world.size
    for grad, mean in zip(grads, flat[:-len(extras)].split([g.numel() for g in grads])):
        grad.copy_(mean.view_as(grad))
    return flat[-len(extras):]


def gather(world: World, local):
    """Every rank's `local` (any picklable), in rank order. One rank: [local], no copy."""
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


def train(args: Args) -> dict:
    world, device = init_world(args, resolve_device(args.device))
    main_rank = world.rank == 0  # rank 0 alone prints, logs and saves
    ckpt = load(args.resume, "--resume") if args.resume else None
    total_given = args.total_timesteps is not None
    if ckpt:  # the saved run's flags, so the run continues as it started
        saved = Args(**ckpt["args"])
        # No --total-timesteps: finish the saved run's budget, not the 40M default.
        args = dataclasses.replace(saved, total_timesteps=args.total_timesteps if total_given else saved.total_timesteps,
                                   device=args.device, resume=args.resume)
        validate_args(args)
    elif not total_given:
        args = dataclasses.replace(args, total_timesteps=DEFAULT_TOTAL_TIMESTEPS)
    batch_size = args.num_envs * args.num_steps  # per rank
    minibatch_size = batch_size // args.num_minibatches
    update_size = batch_size * world.size  # steps per update, all ranks together
    if args.total_timesteps < update_size:
        raise ValueError(f"--total-timesteps {args.total_timesteps} is less than one update ({world.size} ranks x "
                         f"{batch_size} steps)")
    num_updates = args.total_timesteps // update_size  # whole updates, as CleanRL; said below when it rounds
    end_step = num_updates * update_size
    # The learning rate falls linearly from the anchor to 0 at end_step (see annealed_lr).
    lr_anchor = {"step": 0, "lr": args.learning_rate}
    if ckpt:
        if ckpt.get("world_size", 1) != world.size:  # an update is every rank's batch: it must not change size
            raise ValueError(f"--resume: that run had {ckpt.get('world_size', 1)} rank(s) and this one has "
                             f"{world.size}; resume it with torchrun and {ckpt.get('world_size', 1)} ranks in all")
        if num_updates <= ckpt["update"]:
            own = "" if total_given else " (the checkpoint's own: that run is finished)"
            raise ValueError(f"--total-timesteps {args.total_timesteps:,}{own} adds no update to the checkpoint's "
                             f"{ckpt['global_step']:,} steps (an update is {update_size:,}); pass --total-timesteps "
                             f"{(ckpt['update'] + 1) * update_size:,} or more to train on")
        lr_anchor = ckpt.get("lr_anchor", lr_anchor)  # older checkpoints: their run's fresh schedule
        saved_end = (saved.total_timesteps // update_size) * update_size
        if end_step != saved_end and ckpt["update"] > 0:
            # A new budget: go on from the last update's learning rate (no jump), now reaching 0 at end_step.
            last_lr = annealed_lr(lr_anchor["lr"], lr_anchor["step"], ckpt["global_step"] - update_size, saved_end)
            lr_anchor = {"step": ckpt["global_step"], "lr": last_lr}
    # A 256-unit MLP on a few thousand rows gains nothing from intra-op threads on 2 shared cores.
    torch.set_num_threads(args.torch_threads)
    torch.manual_seed(args.seed)  # the same initial weights on every rank (and rank 0's are broadcast below)

    # log_interval = num_steps: each env object reports its finished games once per rollout.
    writer = None
    envs = make_tetris_vecenv(args.backend, args.num_envs, args.num_workers, args.seed + RANK_SEED_OFFSET * world.rank,
                              max_ticks=args.max_ticks, log_interval=args.num_steps)
    try:
        obs_dim, num_actions = envs.single_observation_space.shape[0], int(envs.single_action_space.n)
        agent = build_agent(ckpt, "--resume", device) if ckpt else Agent(obs_dim, num_actions).to(device)
        optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
        global_step, start_update, run_name = 0, 1, make_run_name(args.env_id, args.exp_name, args.seed)
        if ckpt:
            optimizer.load_state_dict(ckpt["optimizer"])
            torch.set_rng_state(ckpt["torch_rng_state"])
            global_step, start_update, run_name = ckpt["global_step"], ckpt["update"] + 1, ckpt["run_name"]
        if world.size > 1:
            for tensor in agent.state_dict().values():  # identical from the start, whatever the devices did
                dist.broadcast(tensor, src=0)
            run_name = gather(world, run_name)[0]
            # Each rank its own actions and minibatch order (rank 0 keeps the stream a plain run has).
            if not main_rank:
                torch.manual_seed(args.seed + RANK_SEED_OFFSET * world.rank + start_update)
        run_dir = os.path.join("runs", run_name)
        # On resume: a new events file in the same run directory.
        writer = make_writer(run_dir, args) if main_rank else None
        storage = make_storage(args.num_steps, args.num_envs, obs_dim, device)
        checkpoint_path = os.path.join(run_dir, f"{args.exp_name}.pt")
        if main_rank:
            ranks = f"{world.size} ranks x {args.num_envs} games, " if world.size > 1 else ""
            print(f"run {run_name}: updates {start_update}..{num_updates} of {update_size:,} steps ({ranks}{device}, "
                  f"{args.backend}); tensorboard --logdir runs", flush=True)
        if end_step != args.total_timesteps and main_rank:
            print(f"training to step {end_step:,}: {num_updates:,} updates of {update_size:,} steps "
                  f"(--total-timesteps {args.total_timesteps:,} rounded down to whole updates)", flush=True)

        def save(update: int) -> None:
            # The games themselves are not saved: a resumed run starts fresh games, seeded by update.
            if main_rank:
                save_checkpoint(checkpoint_path, {
                    "model": agent.state_dict(), "optimizer": optimizer.state_dict(), "global_step": global_step,
                    "update": update, "args": dataclasses.asdict(args), "run_name": run_name, "obs_dim": obs_dim,
                    "num_actions": num_actions, "torch_rng_state": torch.get_rng_state(), "lr_anchor": lr_anchor,
                    "world_size": world.size})

        obs, _ = envs.reset(seed=args.seed + RANK_SEED_OFFSET * world.rank + start_update)
        next_obs = torch.as_tensor(obs, device=device)
        timers = dict(env=0.0, inference=0.0, learn=0.0)
        completed, recent, interrupted = start_update - 1, {}, False
        progress = Progress(end_step, start_step=global_step)
        stop = StopRequest() if world.size > 1 else None
        try:
            for update in range(start_update, num_updates + 1):
                if args.anneal_lr:
                    optimizer.param_groups[0]["lr"] = annealed_lr(lr_anchor["lr"], lr_anchor["step"], global_step,
                                                                  end_step)
                next_obs, infos = collect_rollout(envs, agent, next_obs, storage, args.gamma, device, timers)
                global_step += update_size

                start = time.perf_counter()
                with torch.inference_mode():
                    next_value = agent.get_value(next_obs)
                advantages, returns = compute_gae(storage["rewards"], storage["values"], storage["dones"],
                                                  next_value, args.gamma, args.gae_lambda)
                b_obs = storage["obs"].reshape(batch_size, obs_dim)
                b_actions, b_logprobs, b_values = (storage[k].reshape(-1) for k in ("actions", "logprobs", "values"))
                b_advantages, b_returns = advantages.reshape(-1), returns.reshape(-1)
                for epoch in range(args.update_epochs):
                    for mb in torch.randperm(batch_size, device=device).split(minibatch_size):
                        _, new_logprobs, entropy, new_values = agent.get_action_and_value(b_obs[mb], b_actions[mb])
                        mb_advantages = b_advantages[mb]
                        if args.norm_adv:
                            mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
                        loss, pg_loss, v_loss, entropy_mean, approx_kl, clipfrac = ppo_loss(
                            new_logprobs, b_logprobs[mb], mb_advantages, new_values, b_values[mb], b_returns[mb],
                            entropy, args.clip_coef, args.clip_vloss, args.vf_coef, args.ent_coef)
                        optimizer.zero_grad(set_to_none=True)
                        loss.backward()
                        # Every rank must take the same branches below, or one waits forever in the next
                        # collective: they read the non-finite flag and approx_kl averaged with the gradients.
                        checks = torch.stack([(~torch.isfinite(loss)).float(), approx_kl])
                        if world.size > 1:
                            checks = allreduce_mean(agent.parameters(), checks, world)
                        if checks[0] > 0:
                            raise FloatingPointError(
                                f"loss became {loss.item() if not torch.isfinite(loss) else 'non-finite on a rank'} "
                                f"at update {update} (step {global_step:,}); lower --learning-rate or --max-grad-norm")
                        approx_kl = checks[1]
                        grad_norm = nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                        optimizer.step()
                    if args.target_kl is not None and approx_kl > args.target_kl:
                        break
                timers["learn"] += time.perf_counter() - start

                # Tetris stats and SPS of every rank; and whether any rank was asked to stop.
                total_time = sum(timers.values())
                everyone = gather(world, dict(infos=infos, stop=stop and stop.requested,
                                              sps=(global_step - progress.start_step) / world.size / total_time,
                                              env_time=timers["env"]))
                interrupted = any(rank["stop"] for rank in everyone)
                if not main_rank:
                    completed = update
                    if interrupted:
                        break
                    continue
                infos = [info for rank in everyone for info in rank["infos"]]
                var_y = b_returns.var()
                explained_var = float("nan") if var_y == 0 else (1 - (b_returns - b_values).var() / var_y).item()
                scalars = {
                    "charts/learning_rate": optimizer.param_groups[0]["lr"],
                    "charts/SPS": sum(rank["sps"] for rank in everyone),
                    "losses/policy_loss": pg_loss.item(), "losses/value_loss": v_loss.item(),
                    "losses/entropy": entropy_mean.item(), "losses/approx_kl": approx_kl.item(),
                    "losses/clipfrac": clipfrac.item(), "losses/explained_variance": explained_var,
                    "losses/grad_norm": grad_norm.item(),
                    "perf/env_SPS": sum((global_step - progress.start_step) / world.size / rank["env_time"]
                                        for rank in everyone),
                    **{f"perf/{key}_time_frac": value / total_time for key, value in timers.items()},
                }
                if infos:
                    recent = merge_infos(infos)
                    scalars["charts/episodic_return"] = recent["ep_return"]
                    scalars["charts/episodic_length"] = recent["ep_length"]
                    scalars.update({f"tetris/{key}": value for key, value in recent.items()})
                for tag, value in scalars.items():
                    writer.add_scalar(tag, value, global_step)
                if args.checkpoint_freq and update % args.checkpoint_freq == 0:
                    save(update)
                progress.update(global_step, update=update, ret=recent.get("ep_return"),
                                len=recent.get("ep_length"), lines=recent.get("lines_deleted"))
                completed = update
                if interrupted:
                    break
        except KeyboardInterrupt:
            # A half-done update is dropped: the checkpoint's step count is whole updates.
            interrupted, global_step = True, completed * update_size
        except WorkerError:  # a worker died or its env raised: keep what was learned, then say which
            global_step = completed * update_size
            save(completed)
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
        envs.close()  # stops and reaps the workers
        if writer is not None:
            writer.close()
        if world.size > 1:
            dist.destroy_process_group()
    sps = (global_step - progress.start_step) / max(sum(timers.values()), 1e-9)
    summary = ", ".join(f"{key} {recent[key]:.2f}" for key in ("ep_return", "ep_length", "lines_deleted")
                        if key in recent)
    if interrupted and main_rank:
        print(f"interrupted at step {global_step:,}: saved {checkpoint_path}, envs closed; "
              f"continue with --resume {checkpoint_path}", flush=True)
    elif main_rank:
        print(f"done: step {global_step:,}, SPS {sps:,.0f}, {summary or 'no finished games'}; saved {checkpoint_path}")
    return {"global_step": global_step, "update": completed, "sps": sps, "run_dir": run_dir, "interrupted": interrupted,
            "checkpoint": checkpoint_path, "episode_stats": recent,
            "env_sps": (global_step - progress.start_step) / max(timers["env"], 1e-9), "timers": timers,
            "policy": agent}


def main(argv=None) -> None:
    args = tyro.cli(Args, args=argv)
    try:
        validate_args(args)
        if args.eval_checkpoint:
            torch.set_num_threads(args.torch_threads)
            evaluate_checkpoint(args, resolve_device(args.device))
        elif train(args)["interrupted"]:  # train() saved, closed the envs and said so
            raise SystemExit(EXIT_INTERRUPTED)
    except (ValueError, FloatingPointError, WorkerError, ConnectionError) as e:
        raise SystemExit(f"error: {e}") from None
    except KeyboardInterrupt:  # while starting up, evaluating or watching: there is nothing to save
        print("\ninterrupted: nothing to save", flush=True)
        raise SystemExit(EXIT_INTERRUPTED) from None


if __name__ == "__main__":
    main()
