"""Gymnasium vector envs for the scripts that step Gymnasium envs directly (a2c_cartpole.py). Gymnasium >= 1.0 vector
envs reset a finished sub-env on the *next* step() by default, handing the learner one bogus transition per episode.
Ours reset in the SAME step (gymnasium's AutoresetMode.SAME_STEP): the observation returned with `terminated |
truncated` is the next episode's first, and the last one, to bootstrap V(final_obs) from, is in `info["final_obs"]`."""

import functools
import importlib.util
import os
from typing import Optional

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space


class SameStepVectorEnv(gym.vector.VectorEnv):
    """Gymnasium envs stepped one after another in this process: what `RecordEpisodeStatistics(SyncVectorEnv(...,
    autoreset_mode=SAME_STEP))` returns, with the same info keys (`final_obs`, `episode` {"r", "l"}, their
    `_final_obs`, `_episode` masks; the envs' own infos dropped) and less per-step bookkeeping, so A2C on CartPole
    trains faster, the more so at SB3's A2C settings (n_steps 5, 8 envs: RL Zoo's CartPole-v1), where CartPole's
    steps are a larger share of a step
    (docs/benchmarks.md). Box observations; the arrays are reused by the next step."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, env_fns):
        self.envs = [make_env() for make_env in env_fns]
        self.num_envs = len(self.envs)
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        space = self.single_observation_space
        self.observations = np.zeros((self.num_envs, *space.shape), space.dtype)
        self.rewards = np.zeros(self.num_envs)
        self.terminations = np.zeros(self.num_envs, dtype=bool)
        self.truncations = np.zeros(self.num_envs, dtype=bool)
        self.episode_returns = np.zeros(self.num_envs)
        self.episode_lengths = np.zeros(self.num_envs, dtype=np.int64)

    def reset(self, *, seed=None, options=None):
        """Seeds env i with seed + i, as SyncVectorEnv does."""
        for i, env in enumerate(self.envs):
            self.observations[i], _ = env.reset(seed=None if seed is None else seed + i, options=options)
        self.episode_returns[:] = 0.0
        self.episode_lengths[:] = 0
        return self.observations, {}

    def step(self, actions):
        final_obs = None
        for i, env in enumerate(self.envs):
            obs, self.rewards[i], self.terminations[i], self.truncations[i], _ = env.step(actions[i])
            if self.terminations[i] or self.truncations[i]:
                if final_obs is None:
                    final_obs = np.full(self.num_envs, None, dtype=object)
                final_obs[i] = obs  # the true last observation: learners bootstrap V(final_obs) from it
                obs, _ = env.reset()
            self.observations[i] = obs
        self.episode_returns += self.rewards
        self.episode_lengths += 1
        infos = {}
        if final_obs is not None:
            dones = self.terminations | self.truncations
            returns = np.where(dones, self.episode_returns, 0.0)
            lengths = np.where(dones, self.episode_lengths, 0)
            infos = dict(final_obs=final_obs, _final_obs=dones, _episode=dones, episode={"r": returns, "l": lengths})
            self.episode_returns[dones] = 0.0
            self.episode_lengths[dones] = 0
        return self.observations, self.rewards.copy(), self.terminations.copy(), self.truncations.copy(), infos

    def close_extras(self, **kwargs):
        for env in self.envs:
            env.close()


def make_gym_vector_env(
    env_id: str, num_envs: int, actions=(gym.spaces.Discrete,), render_first=False, step_cap: Optional[int] = None
):
    """`num_envs` copies of `env_id` stepped in this process, SAME_STEP autoreset, episode stats in info, observations
    flattened (make_flat_env); `actions`: the action space types the caller acts in. `render_first`: env 0 renders
    rgb_array frames (`envs.envs[0].render()`), for videos."""
    if num_envs < 1:
        raise ValueError(f"--num-envs must be at least 1 (got {num_envs})")
    observation_space, action_space = check_gym_env(env_id, "is not a registered Gymnasium env")
    check_observation_space(observation_space, env_id)
    vector_box = not isinstance(action_space, gym.spaces.Box) or len(action_space.shape) == 1
    if not (isinstance(action_space, actions) and vector_box):
        names = ", ".join(kind.__name__ for kind in actions)
        raise ValueError(
            f"--env-id {env_id}: action space {action_space} is not supported; this script acts in {names}"
        )
    makers = [
        functools.partial(make_flat_env, env_id, render=render_first and i == 0, step_cap=step_cap)
        for i in range(num_envs)
    ]
    return SameStepVectorEnv(makers)


def make_flat_env(env_id: str, render=False, step_cap: Optional[int] = None, **kwargs) -> gym.Env:
    """`env_id` (built with `kwargs`), its observations flattened into a vector (Box of any shape, Dict in key order,
    Discrete one-hot); `render`: its frames as rgb_array; `step_cap`: an env with no time limit of its own
    (CliffWalking) is truncated there, so every evaluation ends. No passive env checker: its wrapper costs a
    large share of a step as cheap as CartPole's."""
    if step_cap is not None and gym.spec(env_id).max_episode_steps is None:
        kwargs["max_episode_steps"] = step_cap
    env = gym.make(env_id, disable_env_checker=True, **kwargs, **render_kwargs(env_id) if render else {})
    space = env.observation_space
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
        return env
    return gym.wrappers.FlattenObservation(env)


def render_kwargs(env_id: str) -> dict:
    """rgb_array frames; MuJoCo's at 320x240 (without a GPU it renders in software, slowly at its default 480x480), and
    headless through EGL unless MUJOCO_GL says otherwise (needs libEGL: Debian's libegl1 and libegl-mesa0)."""
    if "mujoco" not in str(gym.spec(env_id).entry_point):
        if not os.environ.get("DISPLAY"):  # pygame draws classic control's frames; no window needed
            os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        return dict(render_mode="rgb_array")
    if not os.environ.get("DISPLAY"):
        os.environ.setdefault("MUJOCO_GL", "egl")
    return dict(render_mode="rgb_array", width=320, height=240)


def check_observation_space(space, env_id: str) -> None:
    """Observations an MLP can take once flattened: Box (any shape, but not images), Discrete, MultiDiscrete,
    MultiBinary, and Dict or Tuple of those; anything else is a one-line error naming the space."""
    leaves = [space]
    while leaves:
        leaf = leaves.pop()
        if isinstance(leaf, (gym.spaces.Dict, gym.spaces.Tuple)):
            leaves.extend(leaf.spaces.values() if isinstance(leaf, gym.spaces.Dict) else leaf.spaces)
        elif isinstance(leaf, gym.spaces.Box) and leaf.dtype == np.uint8 and len(leaf.shape) >= 2:
            raise ValueError(
                f"--env-id {env_id}: observation space {space} holds images, which need a CNN; this script's MLP "
                "takes vector observations (ppo_puffer_async.py's CNN reads Atari games: --env-id atari-<game>)"
            )
        elif not isinstance(
            leaf, (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)
        ):
            raise ValueError(
                f"--env-id {env_id}: observation space {space} is not supported: "
                f"{type(leaf).__name__} observations do not flatten into a fixed-size vector"
            )


def check_gym_env(env_id: str, unknown: str, kwargs=None) -> tuple:
    """(observation space, action space) of a registered id that builds with `kwargs`; else a one-line error
    (`unknown` says what else --env-id may be)."""
    if env_id.startswith("popgym-"):
        import popgym  # noqa: F401  (registers POPGym's memory tasks as Gymnasium ids; loaded only for them)
    try:
        entry_point = str(gym.spec(env_id).entry_point)
    except gym.error.DeprecatedEnv as e:  # e.g. Taxi-v3: Gymnasium's own words name the version to use
        raise ValueError(f"--env-id {env_id}: {e}") from None
    except gym.error.Error:
        raise ValueError(f"--env-id {env_id!r} {unknown}") from None
    if "mujoco" in entry_point and importlib.util.find_spec("mujoco"):  # its warnings: on the console, and not also
        config = importlib.import_module("mujoco").MjLogConfig.get()  # in a MUJOCO_LOG.TXT in the working directory
        config.logto_file = False  # (set before the first env is made; env worker processes are forked after it)
        config.set()
    try:
        probe = gym.make(env_id, disable_env_checker=True, **(kwargs or {}))
    except gym.error.Error as e:  # e.g. DependencyNotInstalled for Box2D or MuJoCo envs
        raise ValueError(f"--env-id {env_id}: {e}") from None
    except TypeError as e:  # keyword arguments the env does not take
        raise ValueError(f"--env-kwargs: {env_id} refused them ({e})") from None
    probe.close()
    return probe.observation_space, probe.action_space


def box_actions(env_id: str, kwargs=None) -> bool:
    """Whether the Gymnasium id `env_id` (built with `kwargs`) acts in Box actions; False if unknown (the error comes
    where the env is made)."""
    try:
        return isinstance(check_gym_env(env_id, "", kwargs)[1], gym.spaces.Box)
    except ValueError:
        return False


def finished_episodes(infos: dict):
    """(returns, lengths) arrays of the episodes that ended on this step."""
    if "episode" not in infos:
        return np.empty(0), np.empty(0)
    done = infos["_episode"]
    return infos["episode"]["r"][done], infos["episode"]["l"][done]
