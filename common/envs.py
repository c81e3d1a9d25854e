"""Environment construction shared by the scripts.

Gymnasium >= 1.0 vector envs reset a finished sub-env on the *next* `step()` by default, which hands
the learner one bogus transition per episode. Our vector envs reset in the SAME step instead (as
gymnasium's AutoresetMode.SAME_STEP does): the observation returned with `terminated | truncated` is
already the next episode's first one, and the true last observation is in `info["final_obs"]`,
which a learner needs to bootstrap `V(final_obs)` on time-limit truncation."""

import ast
import functools
import importlib
import multiprocessing

import gymnasium as gym
import numpy as np
import pufferlib.emulation
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from common import vector
from common.normalize import RewardScaler, RunningMeanStd, normalize_obs
from common.tetris import Tetris


class SameStepVectorEnv(gym.vector.VectorEnv):
    """Gymnasium envs stepped one after another in this process, with SAME_STEP autoreset and episode
    statistics. It returns what `RecordEpisodeStatistics(SyncVectorEnv(..., autoreset_mode=SAME_STEP))`
    returns, with the same info keys (`final_obs`, `episode` {"r", "l"} and their `_final_obs`,
    `_episode` masks; the envs' own infos are dropped) with less per-step bookkeeping: for an env as
    cheap as CartPole, switching to it made A2C train ~15% faster (measured at SB3's settings).

    Observations must be a Box (one array per step); the returned arrays are reused by the next step.
    """

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
        self.episode_returns[:], self.episode_lengths[:] = 0.0, 0
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
            infos = {
                "final_obs": final_obs,
                "_final_obs": dones,
                "_episode": dones,
                "episode": {
                    "r": np.where(dones, self.episode_returns, 0.0),
                    "l": np.where(dones, self.episode_lengths, 0),
                },
            }
            self.episode_returns[dones], self.episode_lengths[dones] = 0.0, 0
        return self.observations, self.rewards.copy(), self.terminations.copy(), self.truncations.copy(), infos

    def close_extras(self, **kwargs):
        for env in self.envs:
            env.close()


def make_gym_vector_env(env_id: str, num_envs: int, actions=(gym.spaces.Discrete,)) -> SameStepVectorEnv:
    """`num_envs` copies of `env_id` stepped in this process, SAME_STEP autoreset, episode stats in info. Their
    observations are flattened into one float vector (Box of any shape, Dict in sorted key order, Discrete
    one-hot); `actions` are the action space types the caller can act in."""
    if num_envs < 1:
        raise ValueError(f"--num-envs must be at least 1 (got {num_envs})")
    check_gym_env(env_id, "is not a registered Gymnasium env", actions=actions, flatten=True)
    return SameStepVectorEnv([functools.partial(make_flat_env, env_id) for _ in range(num_envs)])


def make_flat_env(env_id: str) -> gym.Env:
    """`env_id` with its observations flattened into a vector, unless they already are one. The passive env
    checker re-validates every step's output; it is a debugging aid that costs ~20% of CartPole's stepping
    time, so we leave it to gymnasium's check_env."""
    env = gym.make(env_id, disable_env_checker=True)
    space = env.observation_space
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
        return env
    return gym.wrappers.FlattenObservation(env)


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
                f"--env-id {env_id}: observation space {space} holds images, which need a CNN; "
                "this script's MLP takes vector observations"
            )
        elif not isinstance(
            leaf, (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)
        ):
            raise ValueError(
                f"--env-id {env_id}: observation space {space} is not supported: "
                f"{type(leaf).__name__} observations do not flatten into a fixed-size vector"
            )


def check_gym_env(env_id: str, unknown: str, kwargs=None, actions=(gym.spaces.Discrete,), flatten=False) -> None:
    """A registered id that builds, with observations this script takes (flat Box, or with `flatten` any
    flattenable space) and actions of one of the `actions` types; else a one-line error."""
    try:
        gym.spec(env_id)
    except gym.error.Error:
        raise ValueError(f"--env-id {env_id!r} {unknown}") from None
    try:
        probe = gym.make(env_id, disable_env_checker=True, **(kwargs or {}))
    except gym.error.Error as e:  # e.g. DependencyNotInstalled for Box2D or MuJoCo envs
        raise ValueError(f"--env-id {env_id}: {e}") from None
    except TypeError as e:  # keyword arguments the env does not take
        raise ValueError(f"--env-kwargs: {env_id} refused them ({e})") from None
    probe.close()
    if flatten:
        check_observation_space(probe.observation_space, env_id)
        action = probe.action_space
        if isinstance(action, actions) and not (isinstance(action, gym.spaces.Box) and len(action.shape) != 1):
            return
        names = ", ".join(kind.__name__ for kind in actions)
        raise ValueError(f"--env-id {env_id}: action space {action} is not supported; this script acts in {names}")
    require_box_obs_discrete_actions(probe.observation_space, probe.action_space, env_id)


def require_box_obs_discrete_actions(observation_space, action_space, env_id: str) -> None:
    """ppo_puffer_async.py takes flat Box observations and Discrete actions; say so early otherwise."""
    if not isinstance(action_space, gym.spaces.Discrete):
        raise ValueError(
            f"--env-id {env_id}: action space {action_space} is not supported; "
            "this script needs Discrete actions (e.g. CartPole-v1, Acrobot-v1, LunarLander-v3)"
        )
    if not isinstance(observation_space, gym.spaces.Box) or len(observation_space.shape) != 1:
        raise ValueError(
            f"--env-id {env_id}: observation space {observation_space} is not supported; "
            "this script needs a flat (1-D) Box observation"
        )


def finished_episodes(infos: dict):
    """(returns, lengths) arrays of the episodes that ended on this step."""
    if "episode" not in infos:
        return np.empty(0), np.empty(0)
    done = infos["_episode"]
    return infos["episode"]["r"][done], infos["episode"]["l"][done]


def _tetris_sharing_final_obs(final_obs_buffer, slot, buf=None, seed=0, **tetris_kwargs):
    """A Tetris whose `final_observations` rows live in `final_obs_buffer` (shared memory), so the
    learner can read them even when the env steps in a Multiprocessing worker."""
    env = Tetris(buf=buf, seed=seed, **tetris_kwargs)
    rows = np.frombuffer(final_obs_buffer, dtype=np.float32).reshape(-1, *env.single_observation_space.shape)
    env.final_observations = rows[slot * env.num_agents : (slot + 1) * env.num_agents]
    return env


def make_tetris_vecenv(backend: str, num_envs: int, num_workers: int, seed: int, **tetris_kwargs):
    """`num_workers` Tetris objects of `num_envs // num_workers` games each, stepped in this process
    (backend "Serial") or one sleeping worker process each ("Multiprocessing", common/vector.py: a worker
    that dies ends the run with a message naming it; workers die with the learner). Synchronous use:
    `reset(seed)`, `step(actions)`.

    Tetris keeps the last observation of ended games in the env object, which with Multiprocessing is in
    another process; each env here writes them into one shared array instead, readable as
    `vecenv.final_observations` (num_envs, obs_size), valid on the rows that ended on the last step.
    """
    if num_workers < 1 or num_envs < 1:
        raise ValueError(f"--num-envs and --num-workers must be at least 1 (got {num_envs}, {num_workers})")
    if num_envs % num_workers:
        raise ValueError(f"--num-envs {num_envs} must be divisible by --num-workers {num_workers}")
    obs_size = Tetris(num_envs=1, **tetris_kwargs).single_observation_space.shape[0]
    final_obs_buffer = multiprocessing.RawArray("f", num_envs * obs_size)
    vecenv = vector.make(
        [_tetris_sharing_final_obs] * num_workers,
        [[final_obs_buffer, i] for i in range(num_workers)],
        dict(num_envs=num_envs // num_workers, **tetris_kwargs),
        backend=backend,
        num_envs=num_workers,
        num_workers=num_workers,
        num_groups=1,
        seed=seed,
    )
    vecenv.final_observations = np.frombuffer(final_obs_buffer, dtype=np.float32).reshape(num_envs, obs_size)
    return vecenv


# ----- ppo_puffer_async.py: every env kind behind one PufferLib-style vector env -----


class EpisodeStats:
    """Per-agent episode bookkeeping for every env kind: return and length, counted by the learner, and which
    observations begin an episode (where an LSTM's state restarts from zeros).

    With "same_step" autoreset (our Tetris) the observation after an end is already the next episode's (the
    true last one is in `vecenv.final_observations`); with "next_step" (PufferLib's emulation) the observation
    after an end IS the last one, the action on it is ignored, and the next recv brings the reset observation
    with reward 0, which is no transition and is not counted.

    With `gamma`, it also keeps each agent's running discounted return (`reward_scaler`, common/normalize.py):
    `reward_scaler.std()` is what SB3's VecNormalize divides rewards by.
    """

    def __init__(self, num_agents: int, autoreset: str, gamma=None):
        self.next_step_reset = autoreset == "next_step"
        self.reward_scaler = RewardScaler(num_agents, gamma) if gamma is not None else None
        self.ep_return = np.zeros(num_agents)
        self.ep_length = np.zeros(num_agents, dtype=np.int64)
        self.acting = np.zeros(num_agents, dtype=bool)  # the last action sent was a real step
        self.ended = np.zeros(num_agents, dtype=bool)  # the last observation ended an episode
        self.returns, self.lengths = [], []

    def update(self, agents, rewards, dones, masks):
        """Counts this recv's rewards. Returns (the agents whose episode ended, a bool per agent: this
        observation begins an episode)."""
        acting = self.acting[agents]
        acted = agents[acting]
        self.ep_return[acted] += rewards[acting]
        self.ep_length[acted] += 1
        if self.reward_scaler is not None and len(acted):
            self.reward_scaler.track(acted, rewards[acting], dones[acting])
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


def _gymnasium_env(make_env, buf=None, seed=0):
    """One Gymnasium env (built by `make_env()`) through pufferlib.emulation. Emulation resets on the NEXT
    send: the step that ends an episode returns the true final observation, the step after it the reset
    observation with reward 0, which is no transition at all (the learner must skip it)."""
    return pufferlib.emulation.GymnasiumPufferEnv(env_creator=make_env, buf=buf, seed=seed)


def make_cartpole_novel() -> gym.Env:
    """CartPole-v1 observing only cart position and pole angle, the velocities hidden: the standard memory
    test (sb3-contrib's CartPoleNoVel). A memoryless policy cannot tell which way the pole is moving."""
    env = gym.make("CartPole-v1", disable_env_checker=True)
    keep = [0, 2]
    # Divided by the termination bounds (2.4, 12 degrees): both in [-1, 1] while the episode runs, where the
    # raw angle is a few hundredths and a small net barely sees it.
    bounds = np.array([env.unwrapped.x_threshold, env.unwrapped.theta_threshold_radians], dtype=np.float32)
    space = gym.spaces.Box(
        env.observation_space.low[keep] / bounds, env.observation_space.high[keep] / bounds, dtype=np.float32
    )
    return gym.wrappers.TransformObservation(env, lambda obs: obs[keep] / bounds, space)


def make_repeat_previous_easy() -> gym.Env:
    """POPGym's RepeatPreviousEasy with the card as a one-hot: output the card seen 4 steps ago (a
    memoryless policy scores about -0.5, the maximum is 1.0)."""
    from popgym.envs.repeat_previous import RepeatPreviousEasy

    env = RepeatPreviousEasy()
    one_hot = np.eye(env.observation_space.n, dtype=np.float32)
    space = gym.spaces.Box(0.0, 1.0, (env.observation_space.n,), np.float32)
    return gym.wrappers.TransformObservation(env, lambda obs: one_hot[obs], space)


MEMORY_ENVS = {"cartpole-novel": make_cartpole_novel, "repeat-previous-easy": make_repeat_previous_easy}


class NormalizedObservations:
    """A PufferLib-protocol vecenv whose observations (and final observations) are scaled by running statistics
    of the real agents' observations it returned so far, clipped to +-10, as SB3's VecNormalize does. Frozen
    (evaluation), it scales by the statistics it was given and never updates them."""

    def __init__(self, vecenv, obs_rms=None, frozen=False):
        self.vecenv, self.frozen = vecenv, frozen
        self.obs_rms = obs_rms or RunningMeanStd(vecenv.single_observation_space.shape)

    def __getattr__(self, name):  # send, async_reset, close, spaces, ... are the vecenv's
        return getattr(self.vecenv, name)

    def recv(self):
        obs, *rest = self.vecenv.recv()
        if not self.frozen and rest[-1].any():  # rest[-1]: masks (absent agents' observations are padding)
            self.obs_rms.update(obs[rest[-1]])
        return (normalize_obs(obs, self.obs_rms), *rest)

    @property
    def final_observations(self):
        return normalize_obs(self.vecenv.final_observations, self.obs_rms)


# Short names of PettingZoo envs: (module, keyword arguments). Any other "package.module" id is a PettingZoo module
# with a parallel_env(**env_kwargs).
PETTINGZOO_NAMES = {"mpe-spread": ("mpe2.simple_spread_v3", dict(N=3, max_cycles=25, continuous_actions=False))}


def is_pettingzoo(env_id: str) -> bool:
    return env_id in PETTINGZOO_NAMES or "." in env_id


def parse_env_kwargs(text: str) -> dict:
    """--env-kwargs "N=2,max_cycles=50" -> {"N": 2, "max_cycles": 50} (values as Python literals, else strings)."""
    kwargs = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or not name.strip().isidentifier():
            raise ValueError(
                f"--env-kwargs {text!r}: expected NAME=VALUE pairs separated by commas, e.g. N=2,max_cycles=50"
            )
        try:
            kwargs[name.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            kwargs[name.strip()] = value.strip()
    return kwargs


def pettingzoo_maker(env_id: str, env_kwargs: dict):
    """A function building the PettingZoo parallel env `env_id` names (a short name or a module path such as
    mpe2.simple_reference_v3), checked once here: every agent must have the same flat Box observation and
    Discrete action space (one policy acts for all), else a one-line error naming them."""
    module_name, kwargs = PETTINGZOO_NAMES.get(env_id, (env_id, {}))
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        reason = f"cannot import {module_name} ({e}); pass an installed PettingZoo module"
        raise ValueError(f"--env-id {env_id}: {reason}") from None
    if not hasattr(module, "parallel_env"):
        raise ValueError(
            f"--env-id {env_id}: {module_name} has no parallel_env(); pass a PettingZoo env module, "
            "e.g. mpe2.simple_reference_v3"
        )
    make = functools.partial(module.parallel_env, **{**kwargs, **env_kwargs})
    try:
        probe = make()
    except TypeError as e:
        raise ValueError(f"--env-kwargs: {module_name}.parallel_env() refused them ({e})") from None
    spaces = {agent: (probe.observation_space(agent), probe.action_space(agent)) for agent in probe.possible_agents}
    probe.close()
    if len({str(pair) for pair in spaces.values()}) > 1:
        named = "; ".join(f"{agent}: {obs}, {act}" for agent, (obs, act) in spaces.items())
        raise ValueError(
            f"--env-id {env_id}: its agents have different spaces ({named}); this script needs one "
            "observation and action space shared by every agent (e.g. mpe2.simple_reference_v3)"
        )
    require_box_obs_discrete_actions(*next(iter(spaces.values())), env_id)
    return make


def _pettingzoo_env(make, buf=None, seed=0):
    """One PettingZoo parallel env (built by `make()`) through pufferlib.emulation: its agents are rows of the
    buffers, absent agents are masked, and, as with Gymnasium envs, an episode end is followed by a reset
    observation with reward 0 on the next step."""
    return pufferlib.emulation.PettingZooPufferEnv(env_creator=make, buf=buf, seed=seed)


def make_puffer_vecenv(
    env_id: str,
    num_envs: int,
    seed: int,
    max_ticks=10_000,
    log_interval=64,
    backend="Serial",
    num_workers=1,
    async_factor=1,
    env_kwargs="",
):
    """The vector env of ppo_puffer_async.py (common/vector.py's protocol: async_reset, recv, send).

    env_id "tetris": our native Tetris, `num_envs` games split over one env object per group and worker
    (zero copy, same-step autoreset, `final_observations` in shared memory). "mpe-spread" or a PettingZoo
    module path: `num_envs` parallel envs of their agents each. Anything else: `num_envs` copies of that
    Gymnasium env. `env_kwargs` ("NAME=VALUE,...") go to the PettingZoo or Gymnasium constructor.
    The returned vecenv carries `autoreset`: "same_step" (an ended episode's last observation is in
    `final_observations`, the row already holds the next episode) or "next_step" (emulation: the ending
    step returns the final observation, the next one a reset observation with reward 0), and
    `agents_per_env`.
    """
    if num_envs < 1 or num_workers < 1 or async_factor < 1:
        raise ValueError(
            f"--num-envs, --num-workers and --async-factor must be at least 1 "
            f"(got {num_envs}, {num_workers}, {async_factor})"
        )
    kwargs = parse_env_kwargs(env_kwargs)
    if kwargs and (env_id == "tetris" or env_id in MEMORY_ENVS):
        raise ValueError(f"--env-kwargs apply to PettingZoo and Gymnasium envs, not to {env_id}; drop them")
    if env_id == "tetris":
        # One Tetris object steps many games with array ops: give each (group, worker) pair one object.
        objects = max(async_factor, num_workers)
        if num_envs % objects:
            raise ValueError(
                f"--num-envs {num_envs} (Tetris games) must be divisible by "
                f"max(--async-factor, --num-workers) = {objects}"
            )
        obs_size = Tetris(num_envs=1, max_ticks=max_ticks).single_observation_space.shape[0]
        final_obs_buffer = multiprocessing.RawArray("f", num_envs * obs_size)
        tetris = dict(num_envs=num_envs // objects, max_ticks=max_ticks, log_interval=log_interval)
        creators, args, kwargs = (
            [_tetris_sharing_final_obs] * objects,
            [[final_obs_buffer, i] for i in range(objects)],
            tetris,
        )
    elif is_pettingzoo(env_id):
        creators, args, kwargs = _pettingzoo_env, [pettingzoo_maker(env_id, kwargs)], {}
    elif env_id in MEMORY_ENVS:
        creators, args, kwargs = _gymnasium_env, [MEMORY_ENVS[env_id]], {}
    else:
        check_gym_env(
            env_id,
            "is unknown: use tetris, mpe-spread, cartpole-novel, repeat-previous-easy, a registered "
            "Gymnasium id such as CartPole-v1, or a PettingZoo module such as mpe2.simple_reference_v3",
            kwargs,
        )
        creators, args, kwargs = (
            _gymnasium_env,
            [functools.partial(gym.make, env_id, disable_env_checker=True, **kwargs)],
            {},
        )
    objects = len(creators) if isinstance(creators, list) else num_envs
    vecenv = vector.make(
        creators,
        args,
        kwargs,
        backend=backend,
        num_envs=objects,
        num_workers=num_workers,
        num_groups=async_factor,
        seed=seed,
    )
    vecenv.autoreset = "same_step" if env_id == "tetris" else "next_step"
    vecenv.agents_per_env = 1 if env_id == "tetris" else vecenv.num_agents // num_envs
    if env_id == "tetris":
        vecenv.final_observations = np.frombuffer(final_obs_buffer, dtype=np.float32).reshape(num_envs, obs_size)
    return vecenv
