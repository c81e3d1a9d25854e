"""Environment construction shared by the scripts.

Gymnasium >= 1.0 vector envs reset a finished sub-env on the *next* `step()` by default, which hands
the learner one bogus transition per episode. We ask for SAME_STEP autoreset instead: the
observation returned with `terminated | truncated` is already the next episode's first one, and the
true last observation is in `info["final_obs"]`, which a learner needs to bootstrap `V(final_obs)`
on time-limit truncation.
"""

import multiprocessing
import signal

import gymnasium as gym
import numpy as np
import psutil
import pufferlib.vector
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.wrappers.vector import RecordEpisodeStatistics

from common.tetris import Tetris


def make_gym_vector_env(env_id: str, num_envs: int) -> gym.vector.VectorEnv:
    """`num_envs` copies of `env_id` stepped in this process, SAME_STEP autoreset, episode stats in info."""
    if num_envs < 1:
        raise ValueError(f"--num-envs must be at least 1 (got {num_envs})")
    try:
        gym.spec(env_id)
    except gym.error.Error as e:
        raise ValueError(f"--env-id {env_id!r} is not a registered Gymnasium env ({e})") from None
    # The passive env checker re-validates every step's output; it is a debugging aid that costs ~20%
    # of CartPole's stepping time, so we leave it to gymnasium's check_env.
    try:
        envs = SyncVectorEnv([lambda: gym.make(env_id, disable_env_checker=True) for _ in range(num_envs)],
                             autoreset_mode=AutoresetMode.SAME_STEP)
    except gym.error.Error as e:  # e.g. DependencyNotInstalled for Box2D or MuJoCo envs
        raise ValueError(f"--env-id {env_id}: {e}") from None
    return RecordEpisodeStatistics(envs)


def require_box_obs_discrete_actions(observation_space, action_space, env_id: str) -> None:
    """The MLP scripts support flat Box observations and Discrete actions; say so early otherwise."""
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
    env.final_observations = rows[slot * env.num_agents:(slot + 1) * env.num_agents]
    return env


def make_tetris_vecenv(backend: str, num_envs: int, num_workers: int, seed: int, **tetris_kwargs):
    """`num_workers` Tetris objects of `num_envs // num_workers` games each, stepped in this process
    (backend "Serial") or one worker process each ("Multiprocessing").

    Tetris keeps the last observation of ended games in the env object, which with Multiprocessing is in
    another process; each env here writes them into one shared array instead, readable as
    `vecenv.final_observations` (num_envs, obs_size), valid on the rows that ended on the last step.
    """
    backends = {"Serial": pufferlib.vector.Serial, "Multiprocessing": pufferlib.vector.Multiprocessing}
    if backend not in backends:
        raise ValueError(f"--backend must be one of {sorted(backends)} (got {backend!r})")
    if num_workers < 1 or num_envs < 1:
        raise ValueError(f"--num-envs and --num-workers must be at least 1 (got {num_envs}, {num_workers})")
    if num_envs % num_workers:
        raise ValueError(f"--num-envs {num_envs} must be divisible by --num-workers {num_workers}")
    cores = psutil.cpu_count(logical=False) or 1
    if backend == "Multiprocessing" and num_workers > cores:
        raise ValueError(f"--num-workers {num_workers} exceeds the {cores} CPU cores; PufferLib's workers "
                         "busy-wait, so use at most one per core (or --backend Serial)")
    per_env = num_envs // num_workers
    obs_size = Tetris(num_envs=1, **tetris_kwargs).single_observation_space.shape[0]
    final_obs_buffer = multiprocessing.RawArray("f", num_envs * obs_size)
    # Ctrl-C reaches the whole process group; workers that inherit SIG_IGN leave the shutdown to the
    # learner (which saves, then closes them) instead of each printing a KeyboardInterrupt traceback.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        vecenv = pufferlib.vector.make(
            [_tetris_sharing_final_obs] * num_workers,
            env_args=[[final_obs_buffer, slot] for slot in range(num_workers)],
            env_kwargs=[dict(num_envs=per_env, **tetris_kwargs)] * num_workers,
            backend=backends[backend], num_envs=num_workers, num_workers=num_workers, seed=seed)
    finally:
        signal.signal(signal.SIGINT, previous)
    vecenv.final_observations = np.frombuffer(final_obs_buffer, dtype=np.float32).reshape(num_envs, obs_size)
    return vecenv
