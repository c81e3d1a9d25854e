"""PPO (Schulman et al. 2017, laid out as CleanRL's ppo.py) on our numpy Tetris, sized for a 2-core laptop CPU.
CleanRL here and below is its cleanrl/ppo.py at commit fe8d8a03.

Read top to bottom: Args, network, storage and rollout, GAE, loss, evaluation, train(). The run's plumbing
(checkpoints, --resume, Ctrl-C, torchrun) is common/run.py's; everything that learns is here.
Beyond CleanRL's ppo.py:
  * the env resets a game in the step that ends it; truncation at --max-ticks is bootstrapped with
    V(final observation), which the env keeps in shared memory for either backend (ppo.py treats it as game over);
  * sized for a laptop CPU: 512 games x 64 steps, 2 epochs, learning rate 1e-3;
  * checkpoints, --resume, Ctrl-C that saves (exit code 130), data-parallel ranks under torchrun.

    python ppo_tetris.py                                        # 40M steps (docs/ppo_tetris.md: how long)
    python ppo_tetris.py --resume runs/<run>/ppo_tetris.pt      # finish an interrupted run
    python ppo_tetris.py --resume runs/<run>/ppo_tetris.pt --total-timesteps 60000000   # extend it
    python ppo_tetris.py --eval-checkpoint runs/<run>/ppo_tetris.pt --eval-episodes 100
    python ppo_tetris.py --eval-checkpoint runs/<run>/ppo_tetris.pt --render   # watch one game
    torchrun --standalone --nproc-per-node 2 ppo_tetris.py      # data-parallel: 2 ranks, each its own games
"""

import os
import sys
import time
from dataclasses import dataclass
from typing import Literal, Optional

import numpy as np
import torch
import torch.nn as nn
import tyro
from torch.distributions import Categorical

from common import distributed, logs, run
from common.logs import Progress, log_eval, print_end, report, save_video, video_paths
from common.tetris import Tetris, make_tetris_vecenv, merge_infos, watch
from common.vector import WorkerError


@dataclass
class Args(run.RunArgs):
    # The run's flags (--seed, --device, --checkpoint-freq, --resume, --eval-checkpoint, ...) are RunArgs's.
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment, part of the run name"""
    env_id: str = "PufferTetris"
    """the env name used in the run name (the env is always common.tetris.Tetris)"""
    total_timesteps: int = 40_000_000
    """environment steps, all ranks together, in whole updates (--resume: the saved total unless given)"""
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
    """the learning rate of the Adam optimizer (2.5e-4, ppo.py's, learns slower here)"""
    anneal_lr: bool = True
    """linearly anneal the learning rate to 0 over the run"""
    gamma: float = 0.99
    """the discount factor"""
    gae_lambda: float = 0.95
    """the GAE lambda"""
    num_minibatches: int = 8
    """minibatches per epoch"""
    update_epochs: int = 2
    """epochs over each rollout (the update is most of a step's time, so fewer epochs mean more steps a minute)"""
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
    eval_episodes: int = 100
    """games per evaluation, seeded seed + 10,000 + i: the same games at every evaluation"""
    episode_points: Literal["each", "mean"] = "mean"
    """charts/episodic_return and charts/episodic_length: a point per finished episode, as CleanRL's (each), or the
    mean of the episodes finished in each log interval (mean: where a point each would cost more than 3% of the run's
    speed, as Tetris's many games do: docs/design.md)"""
    eval_actions: Literal["greedy", "sampled"] = "sampled"
    """evaluate by sampling, as in training (from a random stream of its own), or with the most likely action"""
    render: bool = False
    """with --eval-checkpoint: play one game in the terminal instead"""
    render_fps: float = 10.0
    """board redraws per second with --render"""


def validate_args(args: Args) -> None:
    """Bad flags fail here, before any env or network is built, naming the flag to change."""
    at_least_one = "num_envs num_workers num_steps num_minibatches update_epochs max_ticks"
    run.check_flags(args, at_least_one=at_least_one, positive="learning_rate clip_coef render_fps")
    if args.num_envs % args.num_workers:
        raise ValueError(f"--num-envs {args.num_envs} must be divisible by --num-workers {args.num_workers}")
    if (args.num_envs * args.num_steps) % args.num_minibatches:
        raise ValueError(
            f"--num-minibatches {args.num_minibatches} must divide num_envs * num_steps = "
            f"{args.num_envs * args.num_steps}"
        )


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    """MLP 234-256-256 (ReLU) shared by a policy head and a value head. CleanRL's ppo.py agent has two separate
    64-64 Tanh MLPs instead; its layer_init (orthogonal; std 0.01 for the policy head, 1.0 for the value) is kept."""

    def __init__(self, obs_dim: int, num_actions: int, hidden_size: int = 256):
        super().__init__()
        self.backbone = nn.Sequential(
            layer_init(nn.Linear(obs_dim, hidden_size)),
            nn.ReLU(),
            layer_init(nn.Linear(hidden_size, hidden_size)),
            nn.ReLU(),
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

    def choose(self, x: torch.Tensor, eval_actions: str) -> torch.Tensor:
        """An evaluation's actions: drawn from the policy as in training (sampled), or its most likely ones (greedy)."""
        logits = self.actor(self.backbone(x))
        if eval_actions == "greedy":
            return logits.argmax(dim=-1)
        return Categorical(logits=logits, validate_args=False).sample()


def make_storage(num_steps: int, num_envs: int, obs_dim: int, device: torch.device) -> dict:
    """Rollout tensors, allocated once: the shapes are the documentation."""
    shape = (num_steps, num_envs)
    return dict(
        obs=torch.zeros(shape + (obs_dim,), device=device),
        actions=torch.zeros(shape, dtype=torch.long, device=device),
        **{key: torch.zeros(shape, device=device) for key in ("logprobs", "rewards", "dones", "values")},
    )


def collect_rollout(
    envs, agent: Agent, next_obs: torch.Tensor, storage: dict, gamma: float, timers: dict, *, game_return, game_length
):
    """Fills `storage` by stepping every game num_steps times with the current policy.

    `dones[t]` = 1 when transition t ended its game. On truncation the step's reward already holds
    `gamma * V(final_obs)`, so GAE can treat every game end as a hard stop. `game_return` and `game_length` (numpy,
    one per game, carried from rollout to rollout) are each game's sum of raw rewards and steps so far. Returns
    (next_obs, infos, the returns of the games that ended, their lengths).
    """
    infos = []
    ep_returns = []
    ep_lengths = []
    device = next_obs.device
    for step in range(storage["obs"].shape[0]):
        start = time.perf_counter()
        storage["obs"][step] = next_obs
        with torch.inference_mode():
            action, logprob, _, value = agent.get_action_and_value(next_obs)
        storage["actions"][step] = action
        storage["logprobs"][step] = logprob
        storage["values"][step] = value
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
        # The game's own return, of its raw rewards (the bootstrap above is the learner's estimate, not the game's);
        # the env starts the next game in the step that ends one.
        game_return += reward
        game_length += 1
        ended = np.flatnonzero(terminated | truncated)
        ep_returns += game_return[ended].tolist()
        ep_lengths += game_length[ended].tolist()
        game_return[ended] = 0.0
        game_length[ended] = 0
        timers["inference"] += time.perf_counter() - start
    return next_obs, infos, ep_returns, ep_lengths


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    next_value: torch.Tensor,
    gamma: float,
    gae_lambda: float,
):
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


def ppo_loss(ratio, advantages, new_values, old_values, returns, *, clip_coef: float, clip_vloss: bool):
    """(policy loss, value loss) of the clipped PPO objective on one minibatch, as CleanRL's ppo.py computes them: the
    clipped surrogate of `ratio` = pi(a|s) / pi_old(a|s) (advantages already normalized if wanted), and half the
    squared error of the new values, clipped around the rollout's `old_values` with `clip_vloss`."""
    pg_loss = torch.max(-advantages * ratio, -advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)).mean()
    if clip_vloss:
        # The value may move at most clip_coef from the rollout's estimate, or pay the larger error.
        v_clipped = old_values + torch.clamp(new_values - old_values, -clip_coef, clip_coef)
        v_loss = 0.5 * torch.max((new_values - returns) ** 2, (v_clipped - returns) ** 2).mean()
    else:
        v_loss = 0.5 * ((new_values - returns) ** 2).mean()
    return pg_loss, v_loss


def play(
    agent: Agent, episodes: int, seed: int, max_ticks: int, device: torch.device, videos=(), *, eval_actions="sampled"
) -> dict:
    """Plays `episodes` games (game i seeded seed + i), actions by `eval_actions` (sampled: from torch's RNG, which the
    caller seeds); arrays of per-game stats.
    One single-game Tetris per episode with log_interval=1: its info on the last step holds that game's stats.
    `videos`: paths (.mp4, .gif) to record the first game to, drawn by Tetris.frame; drawing changes no move."""
    games = [Tetris(num_envs=1, seed=seed + i, max_ticks=max_ticks, log_interval=1) for i in range(episodes)]
    stats = [None] * episodes
    active = list(range(episodes))
    frames = []
    while active:
        if videos and stats[0] is None:
            frames.append(games[0].frame())
        obs = torch.as_tensor(np.concatenate([games[i].observations for i in active]), device=device)
        with torch.inference_mode():
            actions = agent.choose(obs, eval_actions)
        for i, action in zip(list(active), actions.cpu().numpy().astype(np.int32)):
            _, _, terminated, truncated, infos = games[i].step(action[None])
            if terminated[0] or truncated[0]:
                stats[i] = infos[0]
                active.remove(i)
    save_video(frames, videos, fps=10)
    keys = dict(ep_return="return", ep_length="length", lines_deleted="lines_deleted", score="score")
    return {name: np.array([s[key] for s in stats]) for key, name in keys.items()}


def evaluate_checkpoint(args: Args) -> dict:
    """--eval-checkpoint: `--eval-episodes` games, those of the run's evaluations (seed + 10,000, --eval-actions), or
    with --render one game drawn in the terminal."""
    ckpt, args, device = run.open_checkpoint("ppo_tetris", Args, args, required=("obs_dim", "num_actions"))
    agent = Agent(ckpt["obs_dim"], ckpt["num_actions"]).to(device)
    run.load_weights(agent, ckpt, "--eval-checkpoint", args.eval_checkpoint)
    if args.render:

        @torch.inference_mode()
        def act(obs):
            return agent.choose(torch.as_tensor(obs, device=device), args.eval_actions).cpu().numpy()

        with run.seeded_rng(args.seed + 10_000, device):
            return watch(act, args.seed + 10_000, args.max_ticks, args.render_fps)
    name = f"checkpoint-step{ckpt['global_step']}"
    videos = video_paths(os.path.dirname(args.eval_checkpoint), name, args.capture_video, args.gif)
    with run.seeded_rng(args.seed + 10_000, device):  # as the run's evaluations: the same games and draws
        stats = play(
            agent,
            args.eval_episodes,
            args.seed + 10_000,
            args.max_ticks,
            device,
            videos,
            eval_actions=args.eval_actions,
        )
    games = f"{args.eval_episodes} game{'s' if args.eval_episodes > 1 else ''}"
    report(f"{args.eval_checkpoint} (step {ckpt['global_step']:,}), {games} ({args.eval_actions} actions):", stats)
    return stats


def train(args: Args) -> dict:
    # One process or a torchrun rank; --resume: the saved run's flags (with this --total-timesteps) and its state.
    world, device, args, resumed = run.start(args, "ppo_tetris", required=("obs_dim", "num_actions"))
    validate_args(args)
    seed = args.seed + distributed.RANK_SEED_OFFSET * world.rank  # each rank of a torchrun job plays its own games
    torch.set_num_threads(1)  # initial weights drawn on one thread: the same bits whatever the thread count
    torch.manual_seed(args.seed)  # and on every rank

    # log_interval = num_steps: each env object reports its finished games once per rollout.
    envs = make_tetris_vecenv(
        args.backend, args.num_envs, args.num_workers, seed, max_ticks=args.max_ticks, log_interval=args.num_steps
    )
    obs_dim = envs.single_observation_space.shape[0]
    num_actions = int(envs.single_action_space.n)
    agent = Agent(obs_dim, num_actions).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    torch.set_num_threads(args.torch_threads)
    batch_size = args.num_envs * args.num_steps  # per rank
    minibatch_size = batch_size // args.num_minibatches
    update_size = batch_size * world.size  # agent steps per update, all ranks together
    num_updates = run.count_updates(args.total_timesteps, update_size, world.size, resumed)
    # What a checkpoint holds (objects: their state_dict() at each save); --resume loads it and goes on from there.
    rates = {"learning_rate": args.learning_rate}  # the schedule's value now: an extended run goes on from it
    state = dict(model=agent, optimizer=optimizer, obs_dim=obs_dim, num_actions=num_actions, rates=rates)
    start_update, schedule = run.restore(resumed, args, state, num_updates, world)
    about = f"{args.num_envs} games, {args.backend}, on {device}"
    writer, checkpoint = run.open_run(
        "ppo_tetris",
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

    storage = make_storage(args.num_steps, args.num_envs, obs_dim, device)
    obs, _ = envs.reset(seed=seed + start_update + 1)  # a resumed run plays fresh games
    next_obs = torch.as_tensor(obs, device=device)
    timers = dict(env=0.0, inference=0.0, learn=0.0)
    game_return = np.zeros(args.num_envs)  # each game's return and length so far (fresh games on --resume too)
    game_length = np.zeros(args.num_envs, dtype=np.int64)
    game_stats = {}
    last_eval = None
    eval_text = ""
    interrupted = False
    try:
        for update in range(start_update + 1, num_updates + 1):
            global_step = update * update_size  # once this update is done
            if args.anneal_lr:  # CleanRL's linear anneal to 0, from where this run's line starts (run.restore)
                frac = 1.0 - (update - 1 - schedule["update"]) / (num_updates - schedule["update"])
                rates["learning_rate"] = frac * schedule["learning_rate"]
                optimizer.param_groups[0]["lr"] = rates["learning_rate"]
            next_obs, infos, ep_returns, ep_lengths = collect_rollout(
                envs, agent, next_obs, storage, args.gamma, timers, game_return=game_return, game_length=game_length
            )

            start = time.perf_counter()
            with torch.inference_mode():
                next_value = agent.get_value(next_obs)
            advantages, returns = compute_gae(
                storage["rewards"], storage["values"], storage["dones"], next_value, args.gamma, args.gae_lambda
            )
            b_obs = storage["obs"].reshape(batch_size, obs_dim)
            b_actions = storage["actions"].reshape(-1)
            b_logprobs = storage["logprobs"].reshape(-1)
            b_values = storage["values"].reshape(-1)
            b_advantages = advantages.reshape(-1)
            b_returns = returns.reshape(-1)
            clipfracs = []
            for epoch in range(args.update_epochs):
                for mb in torch.randperm(batch_size, device=device).split(minibatch_size):
                    _, new_logprobs, entropy, new_values = agent.get_action_and_value(b_obs[mb], b_actions[mb])
                    logratio = new_logprobs - b_logprobs[mb]
                    ratio = logratio.exp()
                    with torch.no_grad():
                        old_approx_kl = (-logratio).mean()
                        approx_kl = ((ratio - 1) - logratio).mean()  # Schulman's low-variance estimator of the KL
                        clipfrac = ((ratio - 1.0).abs() > args.clip_coef).float().mean()
                    mb_advantages = b_advantages[mb]
                    if args.norm_adv:
                        mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
                    pg_loss, v_loss = ppo_loss(
                        ratio,
                        mb_advantages,
                        new_values,
                        b_values[mb],
                        b_returns[mb],
                        clip_coef=args.clip_coef,
                        clip_vloss=args.clip_vloss,
                    )
                    entropy_loss = entropy.mean()
                    loss = pg_loss - args.ent_coef * entropy_loss + args.vf_coef * v_loss
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    # Under torchrun: the gradients averaged over the ranks, and the loss and approx_kl with them,
                    # so every rank stops alike (at a non-finite loss, or at --target-kl's epoch); the logged
                    # old_approx_kl and clipfrac too, so that all three are the ranks' mean.
                    mean_loss, approx_kl, old_approx_kl, clipfrac = distributed.average_gradients(
                        world, agent.parameters(), loss.detach(), approx_kl, old_approx_kl, clipfrac
                    )
                    clipfracs.append(clipfrac)
                    if not torch.isfinite(mean_loss):
                        raise run.non_finite_loss_error(mean_loss, update, global_step)
                    grad_norm = nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                    optimizer.step()
                if args.target_kl is not None and approx_kl > args.target_kl:
                    break
            timers["learn"] += time.perf_counter() - start

            # Every rank's games and env time, and whether any rank saw a Ctrl-C (torchrun).
            pooled = distributed.pool(world, ep_returns, ep_lengths, infos, [timers["env"]], [stop.requested])
            ep_returns, ep_lengths, infos, env_times, stops = pooled
            if infos:
                game_stats = merge_infos(infos)
            if world.rank == 0 and (args.eval_freq and update % args.eval_freq == 0 or update == num_updates):
                videos = video_paths(checkpoint.run_dir, f"eval-step{global_step}", args.capture_video)
                # the same games at every evaluation and in --eval-checkpoint: the points differ by the policy alone
                eval_seed = args.seed + 10_000
                with progress.paused(), run.seeded_rng(eval_seed, device):  # its own games and random stream
                    stats = play(
                        agent,
                        args.eval_episodes,
                        eval_seed,
                        args.max_ticks,
                        device,
                        videos,
                        eval_actions=args.eval_actions,
                    )
                last_eval, eval_text = log_eval(writer, stats, global_step)
            if writer is not None:
                writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
                writer.add_scalar("charts/SPS", progress.sps(global_step), global_step)  # wall time, evaluations in
                writer.add_scalar("perf/train_SPS", progress.train_sps(global_step), global_step)
                writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
                writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
                writer.add_scalar("losses/entropy", entropy_loss.item(), global_step)
                writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
                writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
                # as CleanRL: the mean over the update's minibatches
                writer.add_scalar("losses/clipfrac", torch.stack(clipfracs).mean().item(), global_step)
                explained_var = logs.explained_variance(b_values, b_returns)
                writer.add_scalar("losses/explained_variance", explained_var, global_step)
                writer.add_scalar("losses/grad_norm", grad_norm.item(), global_step)
                steps_per_rank = (global_step - progress.start_step) / len(env_times)
                env_sps = sum(steps_per_rank / env_time for env_time in env_times)
                writer.add_scalar("perf/env_SPS", env_sps, global_step)
                writer.add_scalar("perf/env_time_frac", timers["env"] / sum(timers.values()), global_step)
                writer.add_scalar("perf/inference_time_frac", timers["inference"] / sum(timers.values()), global_step)
                writer.add_scalar("perf/learn_time_frac", timers["learn"] / sum(timers.values()), global_step)
                if args.episode_points == "each":  # a point per finished game, as CleanRL's ppo.py, at this step
                    for ret, length in zip(ep_returns, ep_lengths):
                        writer.add_scalar("charts/episodic_return", ret, global_step)
                        writer.add_scalar("charts/episodic_length", length, global_step)
                elif ep_returns:  # the mean of this update's games: 512 games end ~1,000 a second early on
                    writer.add_scalar("charts/episodic_return", np.mean(ep_returns), global_step)
                    writer.add_scalar("charts/episodic_length", np.mean(ep_lengths), global_step)
                if infos:  # the games' own statistics, means over the games each env object reported
                    writer.add_scalar("tetris/score", game_stats["score"], global_step)
                    writer.add_scalar("tetris/perf", game_stats["perf"], global_step)
                    writer.add_scalar("tetris/lines_deleted", game_stats["lines_deleted"], global_step)
                    writer.add_scalar("tetris/avg_combo", game_stats["avg_combo"], global_step)
                    writer.add_scalar("tetris/atn_frac_soft_drop", game_stats["atn_frac_soft_drop"], global_step)
                    writer.add_scalar("tetris/atn_frac_hard_drop", game_stats["atn_frac_hard_drop"], global_step)
                    writer.add_scalar("tetris/atn_frac_rotate", game_stats["atn_frac_rotate"], global_step)
                progress.update(
                    global_step,
                    update=update,
                    ret=float(np.mean(ep_returns)) if ep_returns else None,  # this update's games
                    len=float(np.mean(ep_lengths)) if ep_lengths else None,
                    lines=game_stats.get("lines_deleted"),
                    eval=last_eval,
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
        run.close(world, envs, writer, stop)  # the envs and their workers, the writer, Ctrl-C's handler, torchrun
    checkpoint.save(update, final=True)  # fails with one line naming the checkpoint that was kept
    print_end(interrupted, checkpoint, progress, global_step, eval_text)
    steps = global_step - progress.start_step
    return run.summary(
        checkpoint,
        progress,
        update,
        interrupted,
        policy=agent,
        episode_stats=game_stats,
        timers=timers,
        env_sps=steps / max(timers["env"], 1e-9),
    )


def main(argv=None) -> None:
    try:
        # each flag's default: Args (one env, one preset), or the saved run's (--resume, --eval-checkpoint)
        default = run.defaults(Args, "ppo_tetris", None, argv)
        args = tyro.cli(Args, args=argv, default=default)
        if args.eval_checkpoint:
            evaluate_checkpoint(args)
        elif train(args)["interrupted"]:
            sys.exit(run.EXIT_INTERRUPTED)  # Ctrl-C: the run saved; 130, as a shell reports a SIGINT
    except run.ONE_LINE_ERRORS as e:  # bad flags, a non-finite loss, a dead worker or rank, a failed save, Ctrl-C
        sys.exit(run.exit_for(e))


if __name__ == "__main__":
    main()
