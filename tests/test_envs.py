"""common/gym_envs.py: our same-step vector env against gymnasium's own SAME_STEP vector env; which ids the Gymnasium
scripts take."""

import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.wrappers.vector import RecordEpisodeStatistics

from common.gym_envs import SameStepVectorEnv, make_gym_vector_env
from common.puffer_envs import make_puffer_vecenv
from conftest import ROOT


@pytest.mark.parametrize("env_id, max_episode_steps", [("CartPole-v1", None), ("CartPole-v1", 12), ("Acrobot-v1", 30)])
def test_same_step_vector_env_matches_gymnasium(env_id, max_episode_steps):
    """Step for step, with the same seeds and actions, we return what
    RecordEpisodeStatistics(SyncVectorEnv(autoreset_mode=SAME_STEP)) returns: observations, rewards,
    terminations, truncations, the true final observations and the finished episodes' stats.
    A short time limit makes truncations (and truncation-then-reset) happen often."""
    make = lambda: gym.make(env_id, max_episode_steps=max_episode_steps, disable_env_checker=True)  # noqa: E731
    ours = SameStepVectorEnv([make] * 3)
    theirs = RecordEpisodeStatistics(SyncVectorEnv([make] * 3, autoreset_mode=AutoresetMode.SAME_STEP))
    obs, _ = ours.reset(seed=7)
    expected_obs, _ = theirs.reset(seed=7)
    np.testing.assert_array_equal(obs, expected_obs)
    rng = np.random.default_rng(0)
    episodes = 0
    truncations = 0
    for _ in range(3000):
        actions = rng.integers(0, ours.single_action_space.n, size=3)
        obs, rewards, terminated, truncated, infos = ours.step(actions)
        expected = theirs.step(actions)
        for got, want in zip((obs, rewards, terminated, truncated), expected[:4]):
            np.testing.assert_array_equal(got, want)
        expected_infos = expected[4]
        assert ("final_obs" in infos) == ("final_obs" in expected_infos)
        if "final_obs" in infos:
            done = expected_infos["_final_obs"]
            np.testing.assert_array_equal(infos["_final_obs"], done)
            np.testing.assert_array_equal(
                np.stack(infos["final_obs"][done]), np.stack(expected_infos["final_obs"][done])
            )
            np.testing.assert_array_equal(infos["_episode"], expected_infos["_episode"])
            for key in ("r", "l"):
                np.testing.assert_array_equal(infos["episode"][key][done], expected_infos["episode"][key][done])
            episodes += int(done.sum())
            truncations += int(truncated.sum())
    assert episodes > 50
    if max_episode_steps is not None:
        assert truncations > 0
    ours.close()
    theirs.close()
    assert ours.closed


def test_make_gym_vector_env_rejects_other_spaces():
    with pytest.raises(ValueError, match="not supported; this script acts in Discrete"):
        make_gym_vector_env("MountainCarContinuous-v0", 2)
    with pytest.raises(ValueError, match="not a registered Gymnasium env"):
        make_gym_vector_env("NoSuchEnv-v0", 2)
    with pytest.raises(ValueError, match="--num-envs"):
        make_gym_vector_env("CartPole-v1", 0)


def test_deprecated_ids_say_what_gymnasium_says_and_popgym_ids_load_popgym():
    for make in (lambda env_id: make_gym_vector_env(env_id, 1), lambda env_id: make_puffer_vecenv(env_id, 1, 0)):
        with pytest.raises(ValueError) as e:
            make("Taxi-v3")
        assert str(e.value) == (
            "--env-id Taxi-v3: Environment version v3 for `Taxi` is deprecated. Please use `Taxi-v4` instead."
        )
    envs = make_gym_vector_env("popgym-PositionOnlyCartPoleEasy-v0", 2)  # registered by importing popgym
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (2, 2) and envs.single_action_space.n == 2  # the cart's and the pole's positions only
    envs.close()


def test_box2d_envs_build_with_the_base_install():
    envs = make_gym_vector_env("LunarLander-v3", 1)
    assert envs.reset(seed=0)[0].shape == (1, 8)
    envs.close()


def test_an_env_without_a_time_limit_is_truncated_at_the_step_cap_and_others_keep_theirs():
    """The evaluation envs of both Gymnasium scripts: CliffWalking (no time limit) walked into the top wall ends
    its episode at the cap, truncated, not terminated; CartPole keeps its own limit of 500."""
    envs = make_gym_vector_env("CliffWalking-v1", 2, step_cap=7)
    envs.reset(seed=0)
    for step in range(1, 8):
        _, rewards, terminated, truncated, infos = envs.step(np.zeros(2, dtype=np.int64))  # 0: up
        assert not terminated.any() and truncated.all() == (step == 7)
    assert list(infos["episode"]["l"]) == [7, 7] and list(infos["episode"]["r"]) == [-7, -7]
    envs.close()
    envs = make_gym_vector_env("CartPole-v1", 1, step_cap=7)
    assert envs.envs[0].spec.max_episode_steps == 500
    envs.close()


def test_mujoco_writes_no_log_file_into_the_working_directory(tmp_path, monkeypatch):
    """MuJoCo warns while it compiles HalfCheetah's model; the warning goes to the console only, not to a
    MUJOCO_LOG.TXT in the user's working directory (checked in a fresh process: the setting is per process)."""
    code = (
        "from common.gym_envs import make_gym_vector_env; make_gym_vector_env('HalfCheetah-v5', 1, (object,)).close()"
    )
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert "settotalmass" in out.stderr  # the warning was raised (else this test proves nothing)
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
