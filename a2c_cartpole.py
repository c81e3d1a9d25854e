"""Synchronous A2C (Mnih et al. 2016, as in Stable-Baselines3 and skrl's A2C) on Gymnasium CartPole-v1.

Read top to bottom: Args, network (with one flat weight buffer), observation normalization, rollout, GAE,
loss, evaluation, train(). The run's plumbing (checkpoints, --resume, Ctrl-C, torchrun) is common/run.py's;
everything that learns is here. What this file gets right that popular A2C code often does not:
  * Gymnasium 1.x vector envs reset on the *next* step by default; ours (common/envs.py) resets in the same
    step, as gymnasium's SAME_STEP mode does, and hands over the true final observation;
  * time-limit truncation is not termination: the truncated step's reward gets `gamma * V(final_obs)`
    folded in (as SB3 does), termination bootstraps nothing;
  * evaluation uses the training run's observation statistics, frozen, never its own.

    python a2c_cartpole.py                        # trains CartPole-v1, evaluates as it goes
    python a2c_cartpole.py --env-id Acrobot-v1 --total-timesteps 500000
    python a2c_cartpole.py --eval-checkpoint runs/<run>/a2c_cartpole.pt --eval-episodes 20
"""

import dataclasses
import random
from dataclasses import dataclass
from typing import Literal, Optional

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn

from common.envs import finished_episodes, make_gym_vector_env
from common.run import Run, RunArgs, cli, load_weights, open_checkpoint, report


@dataclass
class Args(RunArgs):
    # The run's flags (--seed, --device, --checkpoint-freq, --resume, --eval-checkpoint, ...) are RunArgs's.
    env_id: str = "CartPole-v1"
    """the Gymnasium env id (flat Box observations, Discrete actions)"""
    total_timesteps: Optional[int] = None
    """total environment steps of training (default 100,000; on --resume: the saved total)"""
    num_envs: int = 16
    """the number of parallel environments (per rank under torchrun)"""
    num_steps: int = 5
    """the rollout length: steps per env per update (SB3's n_steps)"""
    learning_rate: float = 1e-3
    """the learning rate of the optimizer"""
    optimizer: Literal["rmsprop", "adam"] = "rmsprop"
    """RMSprop(alpha=0.99, eps=1e-5) as in SB3 and the A2C paper, or Adam(eps=1e-5)"""
    anneal_lr: bool = True
    """linearly anneal the learning rate to 0 over the run"""
    gamma: float = 0.99
    """the discount factor"""
    gae_lambda: float = 1.0
    """the GAE lambda (1.0: n-step returns, as in classic A2C)"""
    vf_coef: float = 0.5
    """the value-loss coefficient"""
    ent_coef: float = 0.0
    """the entropy-bonus coefficient"""
    max_grad_norm: float = 0.5
    """the maximum global gradient norm (clipping)"""
    norm_adv: bool = False
    """normalize advantages per mini-batch"""
    norm_obs: bool = True
    """normalize observations with running mean/std (frozen for evaluation)"""
    reward_scale: float = 0.1
    """multiply rewards by this for learning (episode returns are logged unscaled); see train()"""
    mini_batches: int = 1
    """gradient steps per update, each on a 1/mini_batches share of the rollout (skrl's mini_batches)"""
    hidden_size: int = 64
    """width of the two shared hidden layers"""
    log_freq: int = 10
    """write training scalars (means of the episodes finished since the last write) every this many updates"""
    eval_freq: int = 50
    """evaluate (greedy actions, frozen observation statistics) every this many updates and after the last one"""
    checkpoint_freq: int = 500
    """save runs/<run>/a2c_cartpole.pt every this many updates (0: only at the end and on Ctrl-C)"""


DEFAULT_TOTAL_TIMESTEPS = 100_000


def validate_args(args: Args) -> None:
    """Bad flags fail here, before any env or network is built, naming the flag to change."""
    for flag, value in [
        ("--num-envs", args.num_envs),
        ("--num-steps", args.num_steps),
        ("--mini-batches", args.mini_batches),
        ("--hidden-size", args.hidden_size),
        ("--log-freq", args.log_freq),
    ]:
        if value < 1:
            raise ValueError(f"{flag} must be at least 1 (got {value})")
    batch_size = args.num_envs * args.num_steps
    if batch_size % args.mini_batches:
        raise ValueError(f"--mini-batches {args.mini_batches} must divide num_envs * num_steps = {batch_size}")
    if args.learning_rate <= 0:
        raise ValueError(f"--learning-rate must be positive (got {args.learning_rate})")


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    """Shared MLP backbone with a policy head and a value head (an A2C walkthrough's ActorCriticNet)."""

    def __init__(self, obs_dim: int, num_actions: int, hidden_size: int):
        super().__init__()
        self.backbone = nn.Sequential(
            layer_init(nn.Linear(obs_dim, hidden_size)),
            nn.Tanh(),
            layer_init(nn.Linear(hidden_size, hidden_size)),
            nn.Tanh(),
        )
        # Small policy-head init keeps the first policy near uniform; value head at unit scale.
        self.policy_head = layer_init(nn.Linear(hidden_size, num_actions), std=0.01)
        self.value_head = layer_init(nn.Linear(hidden_size, 1), std=1.0)

    def forward(self, x: torch.Tensor):
        """(action logits, V(x))."""
        hidden = self.backbone(x)
        return self.policy_head(hidden), self.value_head(hidden).squeeze(-1)

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.value_head(self.backbone(x)).squeeze(-1)

    def get_logprob_entropy_value(self, x: torch.Tensor, action: torch.Tensor):
        logits, value = self(x)
        # What Categorical(logits).log_prob / .entropy compute, in a third of the time on small batches.
        log_probs = logits.log_softmax(dim=-1)
        entropy = -(log_probs.exp() * log_probs).sum(dim=-1)
        return log_probs.gather(-1, action[:, None]).squeeze(-1), entropy, value


def flatten_parameters(module: nn.Module) -> nn.Parameter:
    """Moves all of `module`'s weights into one contiguous tensor, and their gradients into another,
    and returns it as the one parameter to optimize. The math is unchanged, but the optimizer and the
    gradient clip then run a few ops per update instead of a few per weight tensor: on this 64-unit
    MLP that was most of their cost. Call after `.to(device)`; zero `flat.grad` in place (never set it
    to None: the layers' `.grad` are views of it, and backward accumulates into them in place).
    """
    params = list(module.parameters())
    flat = nn.Parameter(torch.cat([p.detach().reshape(-1) for p in params]))
    flat.grad = torch.zeros_like(flat)
    offset = 0
    for p in params:
        p.data = flat.data[offset : offset + p.numel()].view_as(p)
        p.grad = flat.grad[offset : offset + p.numel()].view_as(p)
        offset += p.numel()
    return flat


class RunningMeanStd:
    """Running mean and variance of a stream of batches (Chan et al.'s parallel update), as in SB3."""

    def __init__(self, shape=()):
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = 1e-4

    def update(self, batch: np.ndarray) -> None:
        batch = batch.reshape(-1, *self.mean.shape)
        delta = batch.mean(0) - self.mean
        total = self.count + len(batch)
        self.mean = self.mean + delta * len(batch) / total
        m2 = self.var * self.count + batch.var(0) * len(batch) + delta**2 * self.count * len(batch) / total
        self.var, self.count = m2 / total, total

    def state_dict(self) -> dict:
        return {"mean": torch.from_numpy(self.mean), "var": torch.from_numpy(self.var), "count": self.count}

    def load_state_dict(self, state: dict) -> None:
        self.mean, self.var, self.count = state["mean"].numpy(), state["var"].numpy(), state["count"]


def normalize_obs(obs: np.ndarray, obs_rms: Optional[RunningMeanStd], clip: float = 10.0) -> np.ndarray:
    """Scales observations by the training statistics. Evaluation passes the same, frozen, statistics:
    the policy must see observations scaled as in training, not by an eval env's own drifting ones."""
    if obs_rms is None:
        return obs.astype(np.float32)
    return np.clip((obs - obs_rms.mean) / np.sqrt(obs_rms.var + 1e-8), -clip, clip).astype(np.float32)


@torch.inference_mode()  # no autograd bookkeeping while acting: the update recomputes what it needs
def collect_rollout(
    envs,
    agent: Agent,
    obs_rms: Optional[RunningMeanStd],
    reward_scale: float,
    next_obs: np.ndarray,
    storage: dict,
    gamma: float,
    device: torch.device,
):
    """Fills `storage` (numpy arrays shaped (num_steps, num_envs): obs, actions, values, rewards,
    dones) by stepping every env num_steps times with the current policy.

    Rewards are multiplied by `reward_scale`. `dones[t]` = 1 when the transition at step t ended its
    episode (terminated or truncated). On truncation the step's reward already contains
    `gamma * V(final_obs)`, so GAE can treat every episode end as a hard stop.
    Returns (next_obs, finished episodes' returns, their lengths).
    """
    episode_returns, episode_lengths = [], []
    for step in range(storage["obs"].shape[0]):
        storage["obs"][step] = next_obs
        logits, value = agent(torch.as_tensor(next_obs, device=device))
        # Gumbel-max sampling, argmax(logits + Gumbel noise), draws from softmax(logits) at a
        # seventh of a Categorical's cost; A2C recomputes log-probs in the update anyway.
        action = (logits - torch.empty_like(logits).exponential_().log()).argmax(dim=-1).cpu().numpy()
        storage["values"][step], storage["actions"][step] = value.cpu().numpy(), action
        raw_obs, reward, terminated, truncated, infos = envs.step(action)
        if obs_rms is not None:
            obs_rms.update(raw_obs)
        next_obs = normalize_obs(raw_obs, obs_rms)
        storage["rewards"][step] = reward * reward_scale
        storage["dones"][step] = terminated | truncated
        # Truncated, not terminated: the episode could have gone on, so its value is V(final_obs),
        # not 0. The env was reset in this same step; info["final_obs"] holds its pre-reset observation.
        bootstrap = np.flatnonzero(truncated & ~terminated)
        if len(bootstrap):
            final_obs = normalize_obs(np.stack(infos["final_obs"][bootstrap]), obs_rms)
            final_values = agent.get_value(torch.as_tensor(final_obs, device=device)).cpu().numpy()
            storage["rewards"][step, bootstrap] += gamma * final_values
        ep_returns, ep_lengths = finished_episodes(infos)
        episode_returns.extend(ep_returns.tolist())
        episode_lengths.extend(ep_lengths.tolist())
    return next_obs, episode_returns, episode_lengths


def make_storage(num_steps: int, num_envs: int, obs_dim: int) -> dict:
    """Rollout arrays, allocated once: the shapes are the documentation. They are numpy because the
    rollout writes a few numbers per env step, which numpy does several times faster than torch does
    on tensors this small; the update views them as tensors once per rollout."""
    return dict(
        obs=np.zeros((num_steps, num_envs, obs_dim), np.float32),
        actions=np.zeros((num_steps, num_envs), np.int64),
        values=np.zeros((num_steps, num_envs), np.float32),
        rewards=np.zeros((num_steps, num_envs), np.float32),
        dones=np.zeros((num_steps, num_envs), np.float32),
    )


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    next_value: torch.Tensor,
    gamma: float,
    gae_lambda: float,
):
    """Generalized Advantage Estimation on (T, N) tensors.

    `dones[t]` = 1 when the transition at step t ended the episode (truncation already bootstrapped
    into `rewards[t]`), `values[t]` = V(s_t), `next_value` = V(s_T) after the last step. An ended
    episode contributes neither V(next) nor later advantages: both are masked by (1 - dones[t]).
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


def a2c_loss(
    logprobs: torch.Tensor,
    entropy: torch.Tensor,
    new_values: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    vf_coef: float,
    ent_coef: float,
):
    """The A2C objective: -E[A * log pi(a|s)] + vf_coef * E[(R - V(s))^2] - ent_coef * E[H].

    Advantages and returns are constants here (computed from the rollout), so only log pi and V carry
    gradients. Returns (loss, policy_loss, value_loss, entropy_mean).
    """
    policy_loss = -(advantages * logprobs).mean()
    value_loss = nn.functional.mse_loss(new_values, returns)  # as SB3; vf_coef 0.5 halves it
    entropy_mean = entropy.mean()
    loss = policy_loss + vf_coef * value_loss - ent_coef * entropy_mean
    return loss, policy_loss, value_loss, entropy_mean


def evaluate(agent: Agent, env_id: str, obs_rms: Optional[RunningMeanStd], episodes: int, seed: int, device) -> dict:
    """Returns and lengths of `episodes` deterministic (argmax) episodes, the training's observation statistics
    frozen. They are played side by side in one vector env (env i seeded seed + i, each counted until its
    first episode ends), so each step is one forward pass for all of them, not one per episode."""
    envs = make_gym_vector_env(env_id, episodes)
    returns, lengths = np.full(episodes, np.nan), np.zeros(episodes)
    try:
        obs, _ = envs.reset(seed=seed)
        while np.isnan(returns).any():
            with torch.inference_mode():
                logits, _ = agent(torch.as_tensor(normalize_obs(obs, obs_rms), device=device))
            obs, _, _, _, infos = envs.step(logits.argmax(dim=-1).cpu().numpy())
            if "episode" in infos:
                first = infos["_episode"] & np.isnan(returns)
                returns[first], lengths[first] = infos["episode"]["r"][first], infos["episode"]["l"][first]
    finally:
        envs.close()
    return {"return": returns, "length": lengths}


def load_obs_rms(state: Optional[dict]) -> Optional[RunningMeanStd]:
    if state is None:
        return None
    obs_rms = RunningMeanStd()
    obs_rms.load_state_dict(state)
    return obs_rms


def evaluate_checkpoint(args: Args) -> dict:
    """--eval-checkpoint: --eval-episodes deterministic episodes with the run's frozen observation statistics."""
    ckpt, args, device = open_checkpoint("a2c_cartpole", Args, args, required=("obs_rms",))
    probe = gym.make(args.env_id)
    agent = Agent(probe.observation_space.shape[0], probe.action_space.n, args.hidden_size).to(device)
    probe.close()
    load_weights(agent, ckpt, "--eval-checkpoint", args.eval_checkpoint)
    stats = evaluate(agent, args.env_id, load_obs_rms(ckpt["obs_rms"]), args.eval_episodes, args.seed + 10_000, device)
    episodes = args.eval_episodes
    report(
        f"{args.eval_checkpoint} ({args.env_id}, step {ckpt['global_step']:,}), {episodes} "
        f"episode{'s' if episodes > 1 else ''} (greedy actions):",
        stats,
    )
    return stats


def train(args: Args) -> dict:
    with Run("a2c_cartpole", args, required=("obs_rms",)) as run:
        args = run.args
        if args.total_timesteps is None:
            args = dataclasses.replace(args, total_timesteps=DEFAULT_TOTAL_TIMESTEPS)
        validate_args(args)
        random.seed(run.seed)
        np.random.seed(run.seed)
        device = run.device
        envs = run.closing(make_gym_vector_env(args.env_id, args.num_envs))
        obs_dim, num_actions = envs.single_observation_space.shape[0], envs.single_action_space.n
        agent = Agent(obs_dim, num_actions, args.hidden_size).to(device)
        flat_params = flatten_parameters(agent)
        if args.optimizer == "rmsprop":
            optimizer = torch.optim.RMSprop([flat_params], lr=args.learning_rate, alpha=0.99, eps=1e-5)
        else:
            optimizer = torch.optim.Adam([flat_params], lr=args.learning_rate, eps=1e-5)
        obs_rms = RunningMeanStd((obs_dim,)) if args.norm_obs else None
        batch_size = args.num_envs * args.num_steps  # per rank
        run.begin(
            args,
            agent,
            optimizer,
            batch_size,
            f"{args.env_id}, {args.num_envs} envs x {args.num_steps} steps",
            extra={"obs_rms": obs_rms},
        )
        if run.checkpoint is not None and obs_rms is not None:
            obs_rms.load_state_dict(run.checkpoint["obs_rms"])
        # Why --reward-scale 0.1: CartPole's discounted returns reach ~100. With a shared backbone the
        # value loss on targets that large swamps the policy gradient in the shared layers and in the
        # global norm clip: measured here, deterministic eval then stalls at 100-250 for 100k+ steps.
        storage = make_storage(args.num_steps, args.num_envs, obs_dim)
        reward_threshold = gym.spec(args.env_id).reward_threshold
        raw_obs, _ = envs.reset(seed=run.seed + run.start_update - 1)  # a resumed run plays fresh episodes
        if obs_rms is not None:
            obs_rms.update(raw_obs)
        next_obs = normalize_obs(raw_obs, obs_rms)
        recent_returns, finished_returns, finished_lengths = [], [], []
        solved_at, eval_history = None, []
        for update in run.updates():
            if args.anneal_lr:
                optimizer.param_groups[0]["lr"] = run.annealed_lr()

            next_obs, ep_returns, ep_lengths = collect_rollout(
                envs, agent, obs_rms, args.reward_scale, next_obs, storage, args.gamma, device
            )
            batch = {key: torch.as_tensor(array, device=device) for key, array in storage.items()}  # CPU: no copy
            with torch.inference_mode():
                next_value = agent.get_value(torch.as_tensor(next_obs, device=device))
            advantages, returns = compute_gae(
                batch["rewards"], batch["values"], batch["dones"], next_value, args.gamma, args.gae_lambda
            )

            b_obs = batch["obs"].reshape(batch_size, obs_dim)
            b_actions, b_advantages = batch["actions"].reshape(-1), advantages.reshape(-1)
            b_returns = returns.reshape(-1)
            # One mini-batch is the whole rollout, in any order: no need to shuffle and gather it.
            minibatches = [slice(None)]
            if args.mini_batches > 1:
                minibatches = torch.randperm(batch_size, device=device).chunk(args.mini_batches)
            for indices in minibatches:
                logprobs, entropy, new_values = agent.get_logprob_entropy_value(b_obs[indices], b_actions[indices])
                mb_advantages = b_advantages[indices]
                if args.norm_adv and mb_advantages.numel() > 1:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
                loss, policy_loss, value_loss, entropy_mean = a2c_loss(
                    logprobs, entropy, new_values, mb_advantages, b_returns[indices], args.vf_coef, args.ent_coef
                )
                flat_params.grad.zero_()
                loss.backward()
                run.allreduce_gradients([flat_params], loss)  # torchrun: averaged over ranks; stops on NaN
                # clip_grad_norm_'s math on our one gradient tensor, without its per-call bookkeeping.
                grad_norm = flat_params.grad.norm()
                flat_params.grad.mul_(torch.clamp(args.max_grad_norm / (grad_norm + 1e-6), max=1.0))
                optimizer.step()

            recent_returns = (recent_returns + ep_returns)[-20:]
            finished_returns += ep_returns
            finished_lengths += ep_lengths
            # A TensorBoard scalar costs ~60 us, a whole env step ~10 us: we write means every
            # --log-freq updates rather than one scalar per episode.
            if update % args.log_freq == 0 or update == run.num_updates:
                finished_returns, finished_lengths, recent = run.gather(
                    finished_returns, finished_lengths, recent_returns
                )
                y_pred, y_true = batch["values"].reshape(-1), b_returns
                var_y = y_true.var()
                explained_var = float("nan") if var_y == 0 else (1 - (y_true - y_pred).var() / var_y).item()
                scalars = {
                    "charts/learning_rate": optimizer.param_groups[0]["lr"],
                    "losses/policy_loss": policy_loss.item(),
                    "losses/value_loss": value_loss.item(),
                    "losses/entropy": entropy_mean.item(),
                    "losses/explained_variance": explained_var,
                    "losses/grad_norm": grad_norm.item(),
                }
                if finished_returns:
                    scalars["charts/episodic_return"] = np.mean(finished_returns)
                    scalars["charts/episodic_length"] = np.mean(finished_lengths)
                    finished_returns, finished_lengths = [], []
                run.log(scalars, ret=float(np.mean(recent)) if recent else None)
            if run.eval_due():
                run.evaluate(evaluate, agent, args.env_id, obs_rms, args.eval_episodes, args.seed + 10_000, device)
                eval_history.append((run.global_step, run.last_eval))
                if solved_at is None and reward_threshold is not None and run.last_eval >= reward_threshold:
                    solved_at = run.global_step
                    print(f"solved: eval return {run.last_eval:.1f} >= {reward_threshold} at step {solved_at:,}")
    return run.summary(policy=agent, eval_history=eval_history, solved_at=solved_at)


def main(argv=None) -> None:
    cli(Args, train, evaluate_checkpoint, argv)


if __name__ == "__main__":
    main()
