"""a2c_cartpole.py --lstm: the update replays what the rollout saw, truncation bootstraps from the ended episode's
state, memory is learned and used (the refusal of --mini-batches that split an env's sequence: test_a2c.py)."""

import contextlib
import dataclasses
import os

import gymnasium as gym
import numpy as np
import pytest
import torch

import a2c_cartpole as a2c
from common.gym_envs import make_gym_vector_env
from conftest import a2c_args


class RememberCue(gym.Env):
    """A cue (+1 or -1) is shown at the first step only; two blank steps follow; at the fourth step (a query flag
    shown) the action must name the cue: reward +1 if right, -1 if wrong, and the episode ends. Without memory the
    best policy is a coin flip (expected return 0); with it, +1."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)  # (cue, query flag)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.cue = int(self.np_random.integers(2))
        self.t = 0
        return np.array([2.0 * self.cue - 1.0, 0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        if self.t < 4:
            return np.array([0.0, float(self.t == 3)], np.float32), 0.0, False, False, {}
        return np.zeros(2, np.float32), 1.0 if int(action) == self.cue else -1.0, True, False, {}


gym.register("RememberCue-v0", entry_point=RememberCue)


class CounterEnv(gym.Env):
    """Observation = steps taken so far; truncated (time limit) after 3 steps."""

    observation_space = gym.spaces.Box(0.0, 10.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t], np.float32), 1.0, False, False, {}


gym.register("RecurrentTruncateAt3-v0", entry_point=CounterEnv, max_episode_steps=3)


@pytest.mark.parametrize("rnn_type", ["lstm", "gru"])
@pytest.mark.parametrize(
    "space", [gym.spaces.Discrete(3), gym.spaces.MultiDiscrete([3, 2]), gym.spaces.Box(-1.0, 1.0, (2,))]
)
def test_unroll_with_resets_equals_stepping_one_observation_at_a_time(space, rnn_type):
    """The update's one unroll over a rollout (envs, steps), the state zeroed after each step that ended an episode,
    gives the logits and values the rollout got stepping one observation at a time from the same first state."""
    torch.manual_seed(0)
    agent = a2c.Agent(5, space, a2c.Args(hidden_size=16, lstm=True, rnn_type=rnn_type))
    assert isinstance(agent.lstm, torch.nn.GRUCell if rnn_type == "gru" else torch.nn.LSTMCell)
    envs = 3
    steps = 7
    obs = torch.randn(envs, steps, 5)
    dones = torch.zeros(envs, steps)
    # an episode ends mid-rollout in every env
    dones[0, 2] = 1.0
    dones[1, 5] = 1.0
    dones[2, 0] = 1.0
    first = tuple(torch.randn(envs, 16) for _ in "hc")  # carried over from an earlier rollout
    state = first
    outs = []
    values = []
    with torch.no_grad():
        for t in range(steps):
            out, value, state = agent(obs[:, t], state)
            outs.append(out)
            values.append(value)
            state = a2c.forget(state, dones[:, t].bool().numpy())
        out, value, last = agent(obs, first, dones)
    torch.testing.assert_close(out, torch.stack(outs, 1), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(value, torch.stack(values, 1), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(last, state, rtol=1e-5, atol=1e-6)  # the state the next rollout starts from
    # The reset is real: without it env 0's steps after its episode end see other numbers.
    out_no_reset, _, _ = agent(obs, first)
    assert not torch.allclose(out_no_reset[0, 3:], out[0, 3:])
    assert torch.equal(out_no_reset[0, :3], out[0, :3])


def test_rollout_and_replay_see_the_same_values():
    """collect_rollout (one step at a time, state carried and forgotten) then the update's replay from the stored
    first state, as train() lays the batch out (envs, steps): the same values at every step, across episode ends."""
    torch.manual_seed(1)
    envs = make_gym_vector_env("RememberCue-v0", 4)
    obs, _ = envs.reset(seed=0)
    agent = a2c.Agent(2, envs.single_action_space, a2c.Args(hidden_size=16, lstm=True))
    storage = a2c.make_storage(10, 4, 2, envs.single_action_space)
    state = agent.initial_state(4, torch.device("cpu"))
    for _ in range(2):  # the second rollout starts from a state carried over mid-episode
        first = tuple(x.clone() for x in state)
        obs, state, _, _ = a2c.collect_rollout(
            envs,
            agent,
            storage,
            obs,
            state,
            a2c.Args(reward_scale=1.0),
            obs_rms=None,
            reward_norm=None,
            device=torch.device("cpu"),
            autocast=contextlib.nullcontext,
        )
    envs.close()
    assert storage["dones"].sum() >= 8  # episodes of 4 steps: every env ends two or more in 10 steps
    batch = {key: torch.as_tensor(array).transpose(0, 1) for key, array in storage.items()}
    with torch.no_grad():
        _, _, values = agent.get_logprob_entropy_value(batch["obs"], batch["actions"], first, batch["dones"])
    torch.testing.assert_close(values, batch["values"], rtol=1e-5, atol=1e-6)


class CountingAgent(torch.nn.Module):
    """A recurrent stand-in: h counts the observations its episode has shown; V = 100 * h + obs, after the step."""

    def forward(self, x, state, dones=None):
        h, c = state
        h = h + 1
        return torch.zeros(x.shape[0], 2), 100.0 * h[:, 0] + x[:, 0], (h, c)

    def sample(self, out):
        return out.argmax(dim=-1)


def test_truncation_bootstraps_from_the_ended_episodes_state():
    """The episode (observations 0, 1, 2) is truncated at its 3rd step; its final observation [3] is the 4th that
    episode shows, so V(final) = 100 * 4 + 3 = 403. From the reset state it would be 100 * 1 + 3 = 103. The next
    episode's first step starts from zero again: V = 100 * 1 + 0."""
    envs = make_gym_vector_env("RecurrentTruncateAt3-v0", 2)
    obs, _ = envs.reset(seed=0)
    storage = a2c.make_storage(5, 2, 1, envs.single_action_space)
    state = (torch.zeros(2, 1), torch.zeros(2, 1))
    gamma = 0.9
    a2c.collect_rollout(
        envs,
        CountingAgent(),
        storage,
        obs,
        state,
        a2c.Args(reward_scale=0.5, gamma=gamma),
        obs_rms=None,
        reward_norm=None,
        device="cpu",
        autocast=contextlib.nullcontext,
    )
    envs.close()
    np.testing.assert_allclose(storage["rewards"][:, 0], [0.5, 0.5, 0.5 + gamma * 403.0, 0.5, 0.5], rtol=1e-6)
    np.testing.assert_array_equal(storage["values"][:, 0], [100.0, 201.0, 302.0, 100.0, 201.0])


@pytest.mark.fixed_seed
@pytest.mark.parametrize("rnn_type", ["lstm", "gru"])
def test_memory_is_learned_and_used(tmp_path, monkeypatch, rnn_type):
    """RememberCue needs memory: the answer is shown three steps before it is asked for. At the Discrete defaults,
    20k steps (~2 s), final deterministic evaluation of 20 episodes: --lstm 1.0 on seeds 1-5 (all reach 1.0 by
    12k steps), with --rnn-type gru 1.0 on seeds 1-5 too; the same run without --lstm 0.0 on seeds 1-3 (its one
    answer is right on 10 of the 20 cues)."""
    monkeypatch.chdir(tmp_path)
    args = a2c_args("RememberCue-v0", lstm=True, rnn_type=rnn_type, total_timesteps=20_000, eval_freq=0)
    result = a2c.train(dataclasses.replace(args, eval_episodes=20, checkpoint_freq=0))
    assert result["eval_history"][-1][1] >= 0.8, result["eval_history"]


@pytest.mark.parametrize("rnn_type", ["lstm", "gru"])
def test_resume_and_eval_checkpoint_rebuild_the_cell(tmp_path, monkeypatch, capsys, rnn_type):
    """--resume and --eval-checkpoint rebuild the LSTM (or GRU) from the saved flags; the resumed run starts its
    state from zeros (its envs play fresh episodes)."""
    monkeypatch.chdir(tmp_path)
    args = a2c_args("RememberCue-v0", lstm=True, rnn_type=rnn_type, total_timesteps=4000, eval_freq=0)
    result = a2c.train(dataclasses.replace(args, checkpoint_freq=0))
    checkpoint = os.path.join(result["run_dir"], "a2c_cartpole.pt")
    assert any(key.startswith("lstm.") for key in torch.load(checkpoint, weights_only=True)["model"])
    resumed = a2c.train(a2c.Args(resume=checkpoint, total_timesteps=8000))
    cell = torch.nn.GRUCell if rnn_type == "gru" else torch.nn.LSTMCell
    assert resumed["global_step"] == 8000 and isinstance(resumed["policy"].lstm, cell)
    a2c.main(["--eval-checkpoint", checkpoint, "--eval-episodes", "2"])
    assert "2 episodes (greedy actions):" in capsys.readouterr().out


def test_lstm_minibatches_are_whole_env_sequences():
    """With --lstm the update's rows are envs (envs, steps, ...), each in step order, so a mini-batch of rows is
    whole sequences; without it they are single steps."""
    steps = 5
    envs = 4
    batch = dict(
        obs=torch.randn(steps, envs, 3), actions=torch.randint(0, 2, (steps, envs)), dones=torch.zeros(steps, envs)
    )
    advantages = torch.randn(steps, envs)
    returns = torch.randn(steps, envs)
    obs, actions, adv, ret, dones = a2c.update_rows(batch, advantages, returns, lstm=True)
    assert obs.shape == (envs, steps, 3) and actions.shape == dones.shape == adv.shape == (envs, steps)
    assert torch.equal(obs[2], batch["obs"][:, 2]) and torch.equal(ret[1], returns[:, 1])
    obs, actions, adv, ret, dones = a2c.update_rows(batch, advantages, returns, lstm=False)
    assert obs.shape == (steps * envs, 3) and adv.shape == (steps * envs,)


@pytest.mark.parametrize("rnn_type", ["lstm", "gru"])
def test_amp_with_lstm_matches_float32_on_a_fixed_batch(rnn_type):
    """bfloat16 autocast on the CPU through a 6-step unroll: the A2C loss within 1% of float32's."""
    torch.manual_seed(0)
    agent = a2c.Agent(6, gym.spaces.Discrete(3), a2c.Args(lstm=True, rnn_type=rnn_type))
    x = torch.randn(16, 6, 6)
    actions = torch.randint(0, 3, (16, 6))
    dones = (torch.rand(16, 6) < 0.2).float()
    advantages = torch.randn(16, 6)
    returns = torch.randn(16, 6)
    state = agent.initial_state(16, torch.device("cpu"))

    def loss():
        logprobs, entropy, values = agent.get_logprob_entropy_value(x, actions, state, dones)
        policy_loss, value_loss = a2c.a2c_loss(logprobs, advantages, values, returns)
        return policy_loss + 1.0 * value_loss - 0.01 * entropy.mean()

    full = loss()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        half = loss()
    assert half.dtype == torch.float32
    assert abs(half.item() - full.item()) <= 0.01 * abs(full.item()), (half.item(), full.item())
