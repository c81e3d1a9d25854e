"""ppo_puffer_async.py knows no env family: a family defined here, outside the script (a small env and its preset),
trains with the script unedited, through its command line."""

import functools
import re

import gymnasium as gym
import numpy as np
import pytest
import torch

import ppo_puffer_async
from common import presets, puffer_envs


class MatchTheSignal(gym.Env):
    """Each step shows one of `n` signals (a one-hot); the action that names it earns 1, any other 0. Episodes are
    truncated after 10 steps, so a perfect policy returns 10 and a uniform one 10 / n."""

    def __init__(self, n: int):
        self.n = n
        self.observation_space = gym.spaces.Box(0.0, 1.0, (n,), np.float32)
        self.action_space = gym.spaces.Discrete(n)
        self.signal = 0
        self.steps = 0

    def observe(self):
        return np.eye(self.n, dtype=np.float32)[self.signal]

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.signal = int(self.np_random.integers(self.n))
        self.steps = 0
        return self.observe(), {}

    def step(self, action):
        reward = float(action == self.signal)
        self.signal = int(self.np_random.integers(self.n))
        self.steps += 1
        return self.observe(), reward, False, self.steps == 10, {}


def make_match(env_id: str):
    """match-<n>: a function building MatchTheSignal(n)."""
    return functools.partial(MatchTheSignal, int(env_id.split("-")[1]))


# The family's preset names every flag a preset holds: here the Gymnasium set with a few values of its own.
MATCH_PRESET = {
    **presets.PPO_PUFFER_ASYNC["gymnasium"],
    "total_timesteps": 16_384,
    "num_envs": 8,
    "horizon": 32,
    "learning_rate": 3e-3,
    "reward_scale": 1.0,
    "norm_obs": False,
    "eval_episodes": 8,
}


@pytest.fixture
def match_family(monkeypatch):
    family = puffer_envs.EnvFamily("match", lambda env_id: re.fullmatch(r"match-\d+", env_id) is not None, make_match)
    monkeypatch.setattr(puffer_envs, "FAMILIES", [family])
    monkeypatch.setitem(presets.PPO_PUFFER_ASYNC, "match", MATCH_PRESET)


def test_a_new_family_takes_its_preset_and_shows_it_in_help(match_family, capsys):
    with pytest.raises(SystemExit):
        ppo_puffer_async.main(["--env-id", "match-3", "--help"])
    out = capsys.readouterr().out
    assert "(default: 16384)" in out and "(default: 0.003)" in out


def test_a_new_family_trains_with_the_script_unedited(match_family, tmp_path, monkeypatch, capsys):
    """3 signals: uniform play returns 10 / 3; after 16k steps the greedy policy names nearly every signal. The run's
    first lines show the values it takes: its family's preset."""
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    ppo_puffer_async.main(["--env-id", "match-3", "--seed", "1"])
    flags = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("flags: "))
    assert "--env-id match-3 " in flags and "--learning-rate 0.003 " in flags and "--no-norm-obs " in flags
    (checkpoint,) = tmp_path.glob("runs/*/ppo_puffer_async.pt")
    saved = torch.load(checkpoint, weights_only=True)
    assert saved["args"]["learning_rate"] == 3e-3 and saved["global_step"] == 16_384
    result = ppo_puffer_async.evaluate_checkpoint(
        ppo_puffer_async.Args(**{**MATCH_PRESET, "env_id": "match-3", "eval_checkpoint": str(checkpoint)})
    )
    assert result["return"].mean() >= 9.5, result["return"]
