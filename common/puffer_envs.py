"""Every env kind of ppo_puffer_async.py behind one PufferLib-style vector env (common/vector.py's protocol:
async_reset, recv, send): our Tetris natively, Gymnasium envs and PettingZoo parallel envs through
pufferlib.emulation, and two memory tasks for --lstm."""

import ast
import functools
import importlib
import multiprocessing
import os

import gymnasium as gym
import numpy as np
import pufferlib.emulation

from common import vector
from common.gym_envs import check_gym_env, check_observation_space, make_flat_env
from common.normalize import RunningMeanStd, normalize_obs
from common.tetris import Tetris, tetris_sharing_final_obs


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


class EpisodeLog:
    """Per-agent episode returns and lengths, for logging: `add` the real steps (which steps are real is the
    script's decision), `pop` the episodes finished since the last pop."""

    def __init__(self, num_agents: int):
        self.ep_return, self.ep_length = np.zeros(num_agents), np.zeros(num_agents, dtype=np.int64)
        self.returns, self.lengths = [], []

    def add(self, agents, rewards, dones):
        """One real step of each of `agents`; returns those whose episode it ended."""
        self.ep_return[agents] += rewards
        self.ep_length[agents] += 1
        ended = agents[dones]
        self.returns.extend(self.ep_return[ended])
        self.lengths.extend(self.ep_length[ended])
        self.ep_return[ended], self.ep_length[ended] = 0.0, 0
        return ended

    def pop(self):
        returns, lengths, self.returns, self.lengths = self.returns, self.lengths, [], []
        return returns, lengths


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


def pettingzoo_maker(env_id: str, env_kwargs: dict, render=False):
    """A function building the PettingZoo parallel env `env_id` names (a short name or a module path such as
    mpe2.simple_reference_v3), checked once here: every agent must have the same spaces (one policy acts for all),
    else a one-line error naming them; observations that are not a vector are flattened (FlatObservations)."""
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
    if render:  # rgb_array frames, for videos; MPE draws them with pygame, which needs no window
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        make = functools.partial(make, render_mode="rgb_array")
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
    observation_space, action_space = next(iter(spaces.values()))
    check_spaces(observation_space, action_space, env_id)
    flat = isinstance(observation_space, gym.spaces.Box) and len(observation_space.shape) == 1
    return make if flat else functools.partial(FlatObservations, make)


def box_actions(env_id: str, env_kwargs: str = "") -> bool:
    """Whether the Gymnasium id `env_id` acts in Box actions (its defaults are the continuous set); False if unknown."""
    try:
        return isinstance(check_gym_env(env_id, "", parse_env_kwargs(env_kwargs))[1], gym.spaces.Box)
    except ValueError:
        return False


def check_spaces(observation_space, action_space, env_id: str) -> None:
    """ppo_puffer_async.py acts in Discrete, MultiDiscrete and 1-D Box actions, on observations that flatten into a
    vector (gym_envs.check_observation_space); anything else is a one-line error naming the space."""
    flat_box = isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1
    if not (flat_box or isinstance(action_space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete))):
        raise ValueError(
            f"--env-id {env_id}: action space {action_space} is not supported; this script acts in Discrete, "
            "MultiDiscrete and 1-D Box actions (MultiBinary: a MultiDiscrete of 2s would do, not built in)"
        )
    check_observation_space(observation_space, env_id)


class FlatObservations:
    """A PettingZoo parallel env whose agents' observations are flattened into vectors (gymnasium's flatten:
    Discrete one-hot, Dict in key order), as gym_envs.make_flat_env does for a Gymnasium env."""

    def __init__(self, make_env):
        self.env = env = make_env()
        self.spaces = {agent: env.observation_space(agent) for agent in env.possible_agents}

    def __getattr__(self, name):  # agents, possible_agents, action_space, render, close... are the env's
        return getattr(self.env, name)

    def observation_space(self, agent):
        return gym.spaces.flatten_space(self.spaces[agent])

    def flat(self, obs: dict) -> dict:
        return {agent: gym.spaces.flatten(self.spaces[agent], ob) for agent, ob in obs.items()}

    def reset(self, seed=None, options=None):
        obs, infos = self.env.reset(seed=seed, options=options)
        return self.flat(obs), infos

    def step(self, actions):
        obs, *rest = self.env.step(actions)
        return (self.flat(obs), *rest)


def _pettingzoo_env(make, buf=None, seed=0):
    """One PettingZoo parallel env (built by `make()`) through pufferlib.emulation: its agents are rows of the
    buffers, absent agents are masked, and, as with Gymnasium envs, an episode end is followed by a reset
    observation with reward 0 on the next step."""
    return pufferlib.emulation.PettingZooPufferEnv(env_creator=make, buf=buf, seed=seed)


def make_puffer_vecenv(
    env_id: str,
    num_envs: int,
    seed: int,
    *,
    max_ticks=10_000,
    log_interval=64,
    backend="Serial",
    num_workers=1,
    async_factor=1,
    env_kwargs="",
    render=False,
    step_cap=None,
):
    """The vector env of ppo_puffer_async.py (common/vector.py's protocol: async_reset, recv, send).

    env_id "tetris": our native Tetris, `num_envs` games split over one env object per group and worker
    (zero copy, same-step autoreset, `final_observations` in shared memory). "mpe-spread" or a PettingZoo
    module path: `num_envs` parallel envs of their agents each. Anything else: `num_envs` copies of that
    Gymnasium env. `env_kwargs` ("NAME=VALUE,...") go to the PettingZoo or Gymnasium constructor.
    The returned vecenv carries `autoreset`: "same_step" (an ended episode's last observation is in
    `final_observations`, the row already holds the next episode) or "next_step" (emulation: the ending
    step returns the final observation, the next one a reset observation with reward 0), and
    `agents_per_env`. `render`: a Gymnasium or PettingZoo env's frames as rgb_array (first_frame). `step_cap`:
    a Gymnasium env with no time limit of its own is truncated at this many steps (gym_envs.make_flat_env).
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
            [tetris_sharing_final_obs] * objects,
            [[final_obs_buffer, i] for i in range(objects)],
            tetris,
        )
    elif is_pettingzoo(env_id):
        creators, args, kwargs = _pettingzoo_env, [pettingzoo_maker(env_id, kwargs, render)], {}
    elif env_id in MEMORY_ENVS:
        creators, args, kwargs = _gymnasium_env, [MEMORY_ENVS[env_id]], {}
    else:
        unknown = (
            "is unknown: use tetris, mpe-spread, cartpole-novel, repeat-previous-easy, a registered "
            "Gymnasium id such as CartPole-v1, or a PettingZoo module such as mpe2.simple_reference_v3"
        )
        check_spaces(*check_gym_env(env_id, unknown, kwargs), env_id)
        make_env = functools.partial(make_flat_env, env_id, render, step_cap, **kwargs)
        creators, args, kwargs = _gymnasium_env, [make_env], {}
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


def first_frame(vecenv) -> np.ndarray:
    """An RGB image of the first env of an in-process (Serial) vecenv, for videos: Tetris's first game drawn by
    Tetris.frame, or a Gymnasium or PettingZoo env's rgb_array frame (make_puffer_vecenv(render=True))."""
    env = vecenv.envs[0]
    return env.frame(0) if isinstance(env, Tetris) else env.env.render()


def frame_rate(vecenv) -> float:
    """Frames per second for first_frame's video: Tetris at 10 (its --render-fps), any other env at its own."""
    env = vecenv.envs[0]
    return 10 if isinstance(env, Tetris) else env.env.metadata.get("render_fps", 30)
