"""Every env kind of ppo_puffer_async.py behind one PufferLib-style vector env (common/vector.py's protocol:
async_reset, recv, send) and one contract: our Tetris natively, Gymnasium envs (two memory tasks for --lstm among them)
and PettingZoo parallel envs as env objects of our own, Atari games through ale-py's vector env (common/atari.py).
Every env resets in the same step an episode ends: the observation returned with `terminal | truncation` is the next
episode's first, the step's reward and flags are the ending step's, and the episode's last observation is in
`vecenv.final_observations` (shared memory), to bootstrap a truncation from. `masks` says which agents act on this
observation; `vecenv.action_masks` which of the (padded) actions are each agent's own."""

import ast
import functools
import importlib
import multiprocessing
import os
import re
from dataclasses import dataclass
from typing import Callable

import gymnasium as gym
import numpy as np
import pufferlib

from common import atari, vector
from common.gym_envs import box_actions, check_gym_env, check_observation_space, make_flat_env
from common.normalize import RunningMeanStd, normalize_obs
from common.tetris import Tetris, merge_infos, tetris_sharing_final_obs
from common.tetris import watch as watch_tetris


def final_observation_rows(final_obs_buffer, slot: int, num_agents: int, obs_shape: tuple) -> np.ndarray:
    """Env object `slot`'s rows of the vecenv's final observations (its own array when there is no shared buffer)."""
    if final_obs_buffer is None:
        return np.zeros((num_agents, *obs_shape), np.float32)
    rows = np.frombuffer(final_obs_buffer, dtype=np.float32).reshape(-1, *obs_shape)
    return rows[slot * num_agents : (slot + 1) * num_agents]


class SameStepGymEnv:
    """One Gymnasium env (built by `make_env()`, observations a vector) as an env object of common/vector.py that
    resets in the step that ends an episode, as our Tetris does: the observation returned with `terminal |
    truncation` is the next episode's first and the last one goes to `final_observations`. (A pufferlib.emulation
    env is reset by pufferlib.vector's Serial.send on the next step instead, returning a reset observation with
    reward 0 that is no transition at all: pufferlib-core 3.0.5's pufferlib/vector.py.)"""

    def __init__(self, make_env, final_obs_buffer=None, slot=0, buf=None, seed=0):
        self.env = make_env()
        self.single_observation_space = self.env.observation_space
        self.single_action_space = self.env.action_space
        self.num_agents = 1
        self.done = False  # never: the vecenv need not reset it (common/vector.py)
        pufferlib.set_buffers(self, buf)
        obs_shape = self.single_observation_space.shape
        self.final_observations = final_observation_rows(final_obs_buffer, slot, 1, obs_shape)

    def reset(self, seed=None):
        self.observations[0], _ = self.env.reset(seed=seed)
        self.rewards[0] = 0.0
        self.terminals[0] = False
        self.truncations[0] = False
        self.masks[0] = True
        return self.observations, []

    def step(self, actions):
        obs, reward, terminated, truncated, _ = self.env.step(actions[0])
        self.rewards[0] = reward
        self.terminals[0] = terminated
        self.truncations[0] = truncated
        if terminated or truncated:
            self.final_observations[0] = obs
            obs, _ = self.env.reset()
        self.observations[0] = obs
        return self.observations, self.rewards, self.terminals, self.truncations, []

    def close(self):
        self.env.close()


class SameStepAgents:
    """One PettingZoo parallel env (built by `make_env()`, every agent's observation a vector of one width) as an env
    object of common/vector.py: agent i of `possible_agents` is row i. As SameStepGymEnv, it resets in the step in
    which the last agent's episode ends. An agent whose episode ends while others play on keeps that step's reward and
    flags, its last observation goes to `final_observations`, and it is absent (mask False, observation zeros) until
    the env resets."""

    def __init__(self, make_env, final_obs_buffer=None, slot=0, buf=None, seed=0):
        self.env = make_env()
        self.agents = list(self.env.possible_agents)
        self.single_observation_space = self.env.observation_space(self.agents[0])
        self.single_action_space = self.env.action_space(self.agents[0])
        self.num_agents = len(self.agents)
        self.done = False  # never: the vecenv need not reset it (common/vector.py)
        pufferlib.set_buffers(self, buf)
        obs_shape = self.single_observation_space.shape
        self.final_observations = final_observation_rows(final_obs_buffer, slot, self.num_agents, obs_shape)

    def observe(self, obs: dict) -> None:
        """Each agent's observation into its row; an agent with none is absent (mask False)."""
        for i, agent in enumerate(self.agents):
            present = agent in obs
            self.observations[i] = obs[agent] if present else 0
            self.masks[i] = present

    def reset(self, seed=None):
        obs, _ = self.env.reset(seed=seed)
        self.observe(obs)
        self.rewards[:] = 0.0
        self.terminals[:] = False
        self.truncations[:] = False
        return self.observations, []

    def step(self, actions):
        acting = {agent: actions[i] for i, agent in enumerate(self.agents) if agent in self.env.agents}
        obs, rewards, terminations, truncations, _ = self.env.step(acting)
        self.observe(obs)
        for i, agent in enumerate(self.agents):
            self.rewards[i] = rewards.get(agent, 0.0)
            self.terminals[i] = terminations.get(agent, False)
            self.truncations[i] = truncations.get(agent, False)
            if (self.terminals[i] or self.truncations[i]) and agent in obs:
                self.final_observations[i] = obs[agent]
                self.observations[i] = 0  # its episode is over: absent until the env resets
                self.masks[i] = False
        ended = all(terminations.get(agent) or truncations.get(agent) for agent in acting)
        if not self.env.agents or ended:  # every agent's episode has ended: the next one begins in this step
            obs, _ = self.env.reset()
            self.observe(obs)
        return self.observations, self.rewards, self.terminals, self.truncations, []

    def close(self):
        self.env.close()


def make_cartpole_novel() -> gym.Env:
    """CartPole-v1 observing only cart position and pole angle, the velocities hidden: the standard memory
    test (sb3-contrib's CartPoleNoVelEnv, in its tests/test_lstm.py at commit 0ca7fdd). A memoryless policy cannot
    tell which way the pole is moving."""
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


def observation_statistics(vecenv):
    """--norm-obs's running statistics of `vecenv`'s observations, as SB3 2.9.2's VecNormalize keeps them: one
    RunningMeanStd, or for agents of two or more kinds a KindStatistics. Either has `update(obs)` (the real agents'
    observations), `normalize(obs)` (scaled, clipped to +-10) and a state_dict for the checkpoint."""
    if vecenv.kinds is None:
        return RunningMeanStd(vecenv.single_observation_space.shape)
    return KindStatistics(vecenv.kinds)


class KindStatistics:
    """Observation statistics of agents of two or more kinds: each kind's own RunningMeanStd over its own columns (a
    padded column means different things to different kinds); the padding and the kind one-hot are left as they are.
    The kind of a row is read from its one-hot."""

    def __init__(self, kinds):
        self.widths = kinds.obs_widths
        self.rms = [RunningMeanStd((width,)) for width in kinds.obs_widths]

    def update(self, obs: np.ndarray) -> None:
        kind = obs[:, -len(self.rms) :].argmax(1)
        for k, (width, rms) in enumerate(zip(self.widths, self.rms)):
            if (kind == k).any():
                rms.update(obs[kind == k, :width])

    def normalize(self, obs: np.ndarray) -> np.ndarray:
        """Each kind's columns scaled by its own statistics, clipped to +-10; the rest as they are."""
        out = obs.astype(np.float32)
        kind = obs[:, -len(self.rms) :].argmax(1)
        for k, (width, rms) in enumerate(zip(self.widths, self.rms)):
            out[kind == k, :width] = normalize_obs(obs[kind == k, :width], rms)
        return out

    def state_dict(self) -> dict:
        return {"kinds": [rms.state_dict() for rms in self.rms]}

    def load_state_dict(self, state: dict) -> None:
        for rms, own in zip(self.rms, state["kinds"]):
            rms.load_state_dict(own)


class EpisodeLog:
    """Per-agent episode returns and lengths, for logging: `add` the real steps (which steps are real is the
    script's decision), `pop` the episodes finished since the last pop (returns, lengths, the agents')."""

    def __init__(self, num_agents: int):
        self.ep_return = np.zeros(num_agents)
        self.ep_length = np.zeros(num_agents, dtype=np.int64)
        self.returns = []
        self.lengths = []
        self.agents = []

    def add(self, agents, rewards, dones):
        """One real step of each of `agents`; returns those whose episode it ended."""
        self.ep_return[agents] += rewards
        self.ep_length[agents] += 1
        ended = agents[dones]
        self.returns.extend(self.ep_return[ended])
        self.lengths.extend(self.ep_length[ended])
        self.agents.extend(ended.tolist())
        self.ep_return[ended] = 0.0
        self.ep_length[ended] = 0
        return ended

    def pop(self):
        popped = (self.returns, self.lengths, self.agents)
        self.returns = []
        self.lengths = []
        self.agents = []
        return popped


def kind_means(tag: str, values, agents, vecenv) -> dict:
    """{tag/<kind>: the mean of each kind's values} (values of `agents`) for agents of two or more kinds; {} else."""
    if vecenv.kinds is None or not len(values):
        return {}
    values = np.asarray(values, dtype=np.float64)
    of = vecenv.agent_kinds[np.asarray(agents, dtype=np.int64)]
    return {f"{tag}/{name}": values[of == k].mean() for k, name in enumerate(vecenv.kinds.names) if (of == k).any()}


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


# The teams (kinds that share one reward) of the MPE tasks with two or more kinds of agent; --teams names them for
# another env (else each kind is a team of its own). A kind is an agent's name without its trailing _N.
TEAMS = {
    "mpe2.simple_speaker_listener_v4": "speaker+listener",
    "mpe2.simple_crypto_v3": "eve,alice+bob",
    "mpe2.simple_adversary_v3": "adversary,agent",
    "mpe2.simple_push_v3": "adversary,agent",
    "mpe2.simple_tag_v3": "adversary,agent",
    "mpe2.simple_world_comm_v3": "leadadversary+adversary,agent",
    "mpe2.collect_treasure_v1": "collector+deposit",
}


@dataclass
class AgentKinds:
    """A PettingZoo env's agents of two or more kinds, shown to one policy as agents of one kind (SuperSuit's padding
    wrappers plus an agent indicator, as Terry et al., "Revisiting Parameter Sharing in Multi-Agent Deep RL", 2020):
    `names` of the kinds, the kind of each of an env's agents (`of_agent`), each kind's observation width and action
    space, the padded action space they share, `masks` (kinds x its outputs: each kind's own actions, or Box
    dimensions), and each kind's team (`team_of`)."""

    names: list
    of_agent: np.ndarray
    obs_widths: list
    action_spaces: list
    action_space: gym.Space
    masks: np.ndarray
    team_of: np.ndarray

    def random_actions(self, kinds: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Uniformly random actions of agents of `kinds`, each in its own space, in the padded layout."""
        space = self.action_space
        actions = np.zeros((len(kinds), *space.shape), space.dtype)
        for i, kind in enumerate(kinds):
            own = self.action_spaces[kind]
            if isinstance(own, gym.spaces.Box):
                actions[i, : own.shape[0]] = rng.uniform(own.low, own.high)
            else:
                actions[i] = rng.integers(own.n)
        return actions


def agent_kinds(env_id: str, spaces: dict, teams: str = "") -> "AgentKinds | None":
    """The kinds of a PettingZoo env's agents ({agent: (observation space, action space)}), None when there is one
    (the env is then used as it is). Agents of one kind must share spaces, and all act in Discrete or all in 1-D
    Box actions; else a one-line error. `teams` ("a+b,c"; "": TEAMS's, else each kind alone) are checked here."""
    kind_of = {agent: re.sub(r"_\d+$", "", agent) for agent in spaces}
    names = list(dict.fromkeys(kind_of.values()))
    for name in names:
        if len({str(pair) for agent, pair in spaces.items() if kind_of[agent] == name}) > 1:
            raise ValueError(f"--env-id {env_id}: the {name} agents have different spaces: one kind needs one set")
    if len(names) == 1:
        return None
    first = {name: next(pair for agent, pair in spaces.items() if kind_of[agent] == name) for name in names}
    actions = [first[name][1] for name in names]
    discrete = all(isinstance(space, gym.spaces.Discrete) for space in actions)
    if not (discrete or all(isinstance(space, gym.spaces.Box) and len(space.shape) == 1 for space in actions)):
        acting = ", ".join(f"{name}: {space}" for name, space in zip(names, actions))
        raise ValueError(
            f"--env-id {env_id}: its kinds of agent act in different kinds of space ({acting}); one "
            "policy acts for all of them in Discrete or in 1-D Box actions only"
        )
    sizes = [int(space.n) if discrete else space.shape[0] for space in actions]
    masks = np.arange(max(sizes))[None, :] < np.array(sizes)[:, None]
    if discrete:
        shared = gym.spaces.Discrete(max(sizes))
    else:  # each dimension's bounds: the union of the kinds' that have it (each agent's own are applied by step)
        low = [min(a.low[d] for a in actions if d < a.shape[0]) for d in range(max(sizes))]
        high = [max(a.high[d] for a in actions if d < a.shape[0]) for d in range(max(sizes))]
        shared = gym.spaces.Box(np.array(low, np.float32), np.array(high, np.float32))
    groups = [team.split("+") for team in (teams or TEAMS.get(env_id, ",".join(names))).split(",")]
    if sorted(kind for team in groups for kind in team) != sorted(names):
        raise ValueError(f"--teams {teams!r}: name each kind of {env_id} ({', '.join(names)}) in one team, e.g. a+b,c")
    obs_widths = [gym.spaces.flatdim(first[name][0]) for name in names]
    of_agent = np.array([names.index(kind_of[agent]) for agent in spaces])
    team_of = np.array([next(i for i, team in enumerate(groups) if name in team) for name in names])
    return AgentKinds(names, of_agent, obs_widths, actions, shared, masks, team_of)


class PaddedAgents:
    """A PettingZoo parallel env whose agents of two or more kinds look alike (AgentKinds): each observation flattened,
    zero-padded to the widest and followed by a one-hot of its kind; actions taken in the shared padded space and
    each agent's own given to the env (a Box's first dimensions, clipped to the agent's bounds)."""

    def __init__(self, make_env, kinds: AgentKinds):
        self.env = make_env()
        self.kinds = kinds
        self.spaces = {agent: self.env.observation_space(agent) for agent in self.env.possible_agents}
        self.kind = dict(zip(self.env.possible_agents, kinds.of_agent))
        width = max(kinds.obs_widths) + len(kinds.names)
        self.padded = gym.spaces.Box(-np.inf, np.inf, (width,), np.float32)

    def __getattr__(self, name):  # agents, possible_agents, render, close... are the env's
        return getattr(self.env, name)

    def observation_space(self, agent):
        return self.padded

    def action_space(self, agent):
        return self.kinds.action_space

    def pad(self, obs: dict) -> dict:
        padded = {}
        for agent, ob in obs.items():
            padded[agent] = np.zeros(self.padded.shape, np.float32)
            flat = gym.spaces.flatten(self.spaces[agent], ob)
            padded[agent][: len(flat)] = flat
            padded[agent][self.padded.shape[0] - len(self.kinds.names) + self.kind[agent]] = 1.0
        return padded

    def reset(self, seed=None, options=None):
        obs, infos = self.env.reset(seed=seed, options=options)
        return self.pad(obs), infos

    def step(self, actions):
        own = {}
        for agent, action in actions.items():
            space = self.env.action_space(agent)
            box = isinstance(space, gym.spaces.Box)
            own[agent] = np.clip(action[: space.shape[0]], space.low, space.high) if box else action
        obs, *rest = self.env.step(own)
        return (self.pad(obs), *rest)


def pettingzoo_maker(env_id: str, env_kwargs: dict, render=False, teams: str = ""):
    """(A function building the PettingZoo parallel env `env_id` names (a short name or a module path such as
    mpe2.simple_reference_v3), its AgentKinds or None), checked once here: agents of one kind share spaces, agents of
    two or more kinds are padded to look alike (PaddedAgents); observations that are not a vector are flattened
    (FlatObservations)."""
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
    for observation_space, action_space in spaces.values():
        check_spaces(observation_space, action_space, env_id)
    kinds = agent_kinds(module_name, spaces, teams)
    if kinds is not None:
        return functools.partial(PaddedAgents, make, kinds), kinds
    if teams:
        raise ValueError(f"--teams {teams!r}: {env_id}'s agents are all of one kind; drop --teams")
    flat = isinstance(observation_space, gym.spaces.Box) and len(observation_space.shape) == 1
    return (make if flat else functools.partial(FlatObservations, make)), None


@dataclass
class EnvFamily:
    """An env family of one's own, for ppo_puffer_async.py unedited: the ids it `matches`, and `make_env(env_id,
    **env_kwargs)`, which returns a function building one env: a Gymnasium env (one agent, observations a vector), or
    with `multi_agent` a PettingZoo parallel env. Add it to FAMILIES and its preset to common/presets.py's
    PPO_PUFFER_ASYNC under its `name`; it then steps as the built-in families do."""

    name: str
    matches: Callable[[str], bool]
    make_env: Callable
    multi_agent: bool = False


FAMILIES = []  # EnvFamily entries, tried before the built-in families


def family(env_id: str, env_kwargs: str = "") -> str:
    """The family `env_id` belongs to, which chooses its preset: an EnvFamily's name, "tetris", "cartpole-novel" or
    "repeat-previous-easy", "atari", "pettingzoo", or a Gymnasium id's: "continuous" (Box actions, with
    `env_kwargs`) or "gymnasium"."""
    for own in FAMILIES:
        if own.matches(env_id):
            return own.name
    if env_id == "tetris" or env_id in MEMORY_ENVS:
        return env_id
    if atari.game_name(env_id):
        return "atari"
    if is_pettingzoo(env_id):
        return "pettingzoo"
    return "continuous" if box_actions(env_id, parse_env_kwargs(env_kwargs)) else "gymnasium"


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
        env = make_env()
        self.env = env
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


def info_scalars(infos: list) -> dict:
    """The env's own stats from its infos, as TensorBoard scalars: Tetris's (lines deleted, score, ...: means over
    the games that ended) under tetris/; {} for envs that report none."""
    if not infos:
        return {}
    # a game's return and length are charts/episodic_return and charts/episodic_length already
    stats = merge_infos(infos)
    return {f"tetris/{key}": value for key, value in stats.items() if key not in ("ep_return", "ep_length")}


def eval_stats(infos: list) -> dict:
    """An evaluation's own stats of the env, over all the games that ended: Tetris's lines deleted and score."""
    stats = merge_infos(infos) if infos else {}
    return {key: np.array([stats[key]]) for key in ("lines_deleted", "score") if key in stats}


def records_video(env_id: str) -> bool:
    """Whether evaluation can record `env_id`'s episodes (--capture-video, --gif): not the memory tasks (no frames)
    nor an EnvFamily's."""
    return env_id not in MEMORY_ENVS and not any(own.matches(env_id) for own in FAMILIES)


def watch(env_id: str, act, seed: int, max_ticks: int, fps: float) -> dict:
    """--render: one game played by `act` (observation -> action) drawn in the terminal; Tetris only."""
    if env_id != "tetris":
        raise ValueError(f"--render draws Tetris games; this is a {env_id} run: drop --render")
    return watch_tetris(act, seed, max_ticks, fps)


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
    teams="",
):
    """The vector env of ppo_puffer_async.py (common/vector.py's protocol: async_reset, recv, send), in the module's
    one contract: same-step resets, `final_observations` (agents, obs) in shared memory, valid on the rows that ended
    on the last step, `masks` (which agents act).

    env_id "tetris": our native Tetris, `num_envs` games split over one env object per group and worker (zero copy).
    "atari-<game>": `num_envs` games of ALE's threaded vector env (common/atari.py; frames are uint8).
    "mpe-spread" or a PettingZoo module path: `num_envs` parallel envs of their agents each (SameStepAgents). Anything
    else: `num_envs` copies of that Gymnasium env (SameStepGymEnv). `env_kwargs` ("NAME=VALUE,...") go to the
    PettingZoo or Gymnasium constructor. `render`: a Gymnasium or PettingZoo env's frames as rgb_array
    (first_frame). `step_cap`: a Gymnasium env with no time limit of its own is truncated at this many steps
    (gym_envs.make_flat_env). The vecenv also carries `agents_per_env`; `kinds`: a PettingZoo env's AgentKinds
    (`teams`: --teams), None for agents of one kind; `agent_kinds`: the kind of each of its agents; `action_masks`:
    (agents, outputs of the policy head) True where an action (a Box dimension) is the agent's own, None when every
    agent has them all; `game_over[agent]`: whether the last recv's step ended the agent's whole game (an episode,
    except in Atari, where a lost life ends the learner's episode and the game goes on).
    """
    if num_envs < 1 or num_workers < 1 or async_factor < 1:
        raise ValueError(
            f"--num-envs, --num-workers and --async-factor must be at least 1 "
            f"(got {num_envs}, {num_workers}, {async_factor})"
        )
    kwargs = parse_env_kwargs(env_kwargs)
    kinds = None
    if kwargs and (env_id == "tetris" or env_id in MEMORY_ENVS):
        raise ValueError(f"--env-kwargs apply to PettingZoo and Gymnasium envs, not to {env_id}; drop them")
    if teams and not is_pettingzoo(env_id):
        raise ValueError(f"--teams {teams!r}: teams are kinds of agent of a PettingZoo env, not of {env_id}; drop it")
    if atari.game_name(env_id):
        return make_atari_vecenv(
            env_id,
            num_envs,
            env_kwargs=env_kwargs,
            backend=backend,
            async_factor=async_factor,
            step_cap=step_cap,
            render=render,
        )
    if env_id == "tetris":
        # One Tetris object steps many games with array ops: give each (group, worker) pair one object.
        objects = max(async_factor, num_workers)
        if num_envs % objects:
            raise ValueError(
                f"--num-envs {num_envs} (Tetris games) must be divisible by "
                f"max(--async-factor, --num-workers) = {objects}"
            )
        probe = Tetris(num_envs=1, max_ticks=max_ticks)
        obs_shape = probe.single_observation_space.shape
        final_obs_buffer = multiprocessing.RawArray("f", num_envs * int(np.prod(obs_shape)))
        creators = [tetris_sharing_final_obs] * objects
        creator_args = [[final_obs_buffer, i] for i in range(objects)]
        creator_kwargs = dict(num_envs=num_envs // objects, max_ticks=max_ticks, log_interval=log_interval)
    else:
        own = next((own for own in FAMILIES if own.matches(env_id)), None)
        if own is not None:
            make_env = own.make_env(env_id, **kwargs)
            creators = SameStepAgents if own.multi_agent else SameStepGymEnv
        elif is_pettingzoo(env_id):
            make_env, kinds = pettingzoo_maker(env_id, kwargs, render, teams)
            creators = SameStepAgents
        elif env_id in MEMORY_ENVS:
            make_env = MEMORY_ENVS[env_id]
            creators = SameStepGymEnv
        else:
            unknown = (
                "is unknown: use tetris, mpe-spread, cartpole-novel, repeat-previous-easy, atari-<game> such as "
                "atari-breakout, a registered Gymnasium id such as CartPole-v1, or a PettingZoo module such as "
                "mpe2.simple_reference_v3"
            )
            if env_id.startswith("ALE/") or "NoFrameskip" in env_id:
                raise ValueError(
                    f"--env-id {env_id}: Atari games are atari-<game>, e.g. atari-breakout for "
                    "BreakoutNoFrameskip-v4 with CleanRL's preprocessing (docs/atari.md)"
                )
            check_spaces(*check_gym_env(env_id, unknown, kwargs), env_id)
            make_env = functools.partial(make_flat_env, env_id, render, step_cap, **kwargs)
            creators = SameStepGymEnv
        probe = creators(make_env)  # the observation's shape and the agents of one env, for the shared buffer
        probe.close()
        obs_shape = probe.single_observation_space.shape
        final_obs_buffer = multiprocessing.RawArray("f", num_envs * probe.num_agents * int(np.prod(obs_shape)))
        creator_args = [[make_env, final_obs_buffer, i] for i in range(num_envs)]
        creator_kwargs = {}
    objects = len(creators) if isinstance(creators, list) else num_envs
    vecenv = vector.make(
        creators,
        creator_args,
        creator_kwargs,
        backend=backend,
        num_envs=objects,
        num_workers=num_workers,
        num_groups=async_factor,
        seed=seed,
    )
    vecenv.agents_per_env = vecenv.num_agents // num_envs
    final_observations = np.frombuffer(final_obs_buffer, dtype=np.float32)
    vecenv.final_observations = final_observations.reshape(vecenv.num_agents, *obs_shape)
    vecenv.kinds = kinds
    vecenv.agent_kinds = None
    vecenv.action_masks = None
    if kinds is not None:
        vecenv.agent_kinds = np.tile(kinds.of_agent, num_envs)
        vecenv.action_masks = kinds.masks[vecenv.agent_kinds]
    return vecenv


def make_atari_vecenv(env_id: str, num_envs: int, *, env_kwargs, backend, async_factor, step_cap, render):
    """An Atari game's vecenv (common/atari.py): `num_envs` games in --async-factor groups, stepped by ALE's threads
    in this process; `step_cap` (evaluation's --eval-max-steps) truncates a game at that many steps."""
    if env_kwargs:
        raise ValueError(f"--env-kwargs apply to PettingZoo and Gymnasium envs, not to {env_id}; drop them")
    if backend != "Serial":
        raise ValueError(f"--backend {backend}: ALE steps Atari games in its own threads; use --backend Serial")
    max_frames = atari.FRAMESKIP * step_cap if step_cap else atari.MAX_FRAMES
    groups = async_factor
    threads = min(num_envs // groups, os.cpu_count() or 1)
    vecenv = atari.AtariEnvs(
        atari.game_name(env_id), num_envs, groups=groups, threads=threads, max_frames=max_frames, render=render
    )
    return vecenv


def to_env(actions: np.ndarray, space) -> np.ndarray:
    """What the env is sent: Box actions clipped to its bounds, integer actions as int32."""
    return np.clip(actions, space.low, space.high) if isinstance(space, gym.spaces.Box) else actions.astype(np.int32)


def first_frame(vecenv) -> np.ndarray:
    """An RGB image of the first env of an in-process (Serial) vecenv, for videos: Tetris's first game drawn by
    Tetris.frame, or a Gymnasium or PettingZoo env's rgb_array frame (make_puffer_vecenv(render=True))."""
    if isinstance(vecenv, atari.AtariEnvs):
        return vecenv.frame()
    env = vecenv.envs[0]
    return env.frame(0) if isinstance(env, Tetris) else env.env.render()


def frame_rate(vecenv) -> float:
    """Frames per second for first_frame's video: Tetris at 10 (its --render-fps), any other env at its own."""
    if isinstance(vecenv, atari.AtariEnvs):
        return 60 / atari.FRAMESKIP  # the game's 60 frames a second, one in 4 shown
    env = vecenv.envs[0]
    return 10 if isinstance(env, Tetris) else env.env.metadata.get("render_fps", 30)
