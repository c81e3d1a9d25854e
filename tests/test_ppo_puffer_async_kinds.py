"""ppo_puffer_async.py on PettingZoo envs whose agents differ (common/puffer_envs.AgentKinds): the padding and the
kind one-hot, masks that keep padded actions from being sampled or scored, every mpe2 task, per-kind logging, the
evaluation against random teams, and a small heterogeneous game that random play cannot win."""

import os
import sys
import types

import gymnasium as gym
import numpy as np
import psutil
import pytest
import torch
from pettingzoo.utils.env import ParallelEnv
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import ppo_puffer_async
from common import puffer_envs
from common.puffer_envs import SameStepAgents, agent_kinds, make_puffer_vecenv
from conftest import puffer_args
from ppo_puffer_async import Args, EpisodeStats, Experience, Policy, evaluate, rollout, train

CPU = torch.device("cpu")
MPE2 = sorted(name.split("/")[1] for name in __import__("mpe2.all_modules").all_modules.mpe_environments)


class SignalGame(ParallelEnv):
    """A speaker sees a target (one of 2, one-hot) and says a word (Discrete(2)); the next step the listener, who
    sees only the word (and a flag: its turn), picks one of 4 cards (Discrete(4)). Both get 1 when the card is the
    target. Random play wins 1 time in 4; a listener that reads a speaker who names the target, every time."""

    metadata = {"name": "signal_game_v0"}
    possible_agents = ["speaker_0", "listener_0"]

    def __init__(self):
        self.agents = []
        self.rng = np.random.default_rng(0)

    def observation_space(self, agent):
        return gym.spaces.Box(0.0, 1.0, (2,) if agent == "speaker_0" else (3,), np.float32)

    def action_space(self, agent):
        return gym.spaces.Discrete(2 if agent == "speaker_0" else 4)

    def observe(self, word=None):
        heard = np.zeros(3, np.float32)
        if word is not None:
            heard[word] = 1.0
            heard[2] = 1.0
        return {"speaker_0": np.eye(2, dtype=np.float32)[self.target], "listener_0": heard}

    def reset(self, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.target = int(self.rng.integers(2))
        self.turn = 0
        return self.observe(), {agent: {} for agent in self.agents}

    def step(self, actions):
        self.turn += 1
        won = self.turn == 2 and int(actions["listener_0"]) == self.target
        obs = self.observe(int(actions["speaker_0"]) if self.turn == 1 else None)
        rewards = {agent: float(won) for agent in self.agents}
        ends = {agent: self.turn == 2 for agent in self.agents}
        if self.turn == 2:
            self.agents = []
        return obs, rewards, ends, {agent: False for agent in ends}, {agent: {} for agent in ends}


class MixedActions(SignalGame):
    """The listener acts in a Box: one policy cannot act in Discrete and Box at once."""

    def action_space(self, agent):
        return gym.spaces.Discrete(2) if agent == "speaker_0" else gym.spaces.Box(-1.0, 1.0, (2,))


@pytest.fixture
def signal_game(monkeypatch):
    for name, env in (("signal_game_v0", SignalGame), ("mixed_actions_v0", MixedActions)):
        module = types.ModuleType(f"pz_test.{name}")
        module.parallel_env = env
        monkeypatch.setitem(sys.modules, f"pz_test.{name}", module)
    return "pz_test.signal_game_v0"


def test_observations_are_padded_to_the_widest_and_end_with_the_kinds_one_hot():
    """speaker_listener: the speaker's 3 observations, zeros to the listener's 11, then [1, 0]; the listener's 11,
    then [0, 1]. Env i is seeded seed + i, as the raw env would be."""
    from mpe2 import simple_speaker_listener_v4

    vecenv = make_puffer_vecenv("mpe2.simple_speaker_listener_v4", 2, seed=7)
    try:
        assert vecenv.kinds.names == ["speaker", "listener"] and list(vecenv.agent_kinds) == [0, 1, 0, 1]
        assert vecenv.single_observation_space.shape == (13,) and vecenv.single_action_space.n == 5
        vecenv.async_reset(7)
        obs = vecenv.recv()[0]
    finally:
        vecenv.close()
    raw, _ = simple_speaker_listener_v4.parallel_env().reset(seed=8)  # env object 1: agents 2 and 3
    np.testing.assert_array_equal(obs[2, :3], raw["speaker_0"])
    np.testing.assert_array_equal(obs[2, 3:], np.r_[np.zeros(8), 1.0, 0.0])
    np.testing.assert_array_equal(obs[3], np.r_[raw["listener_0"], 0.0, 1.0])
    np.testing.assert_array_equal(vecenv.kinds.masks, [[True] * 3 + [False] * 2, [True] * 5])


def test_a_kinds_missing_actions_are_never_sampled_nor_scored():
    """The speaker has 3 of the shared head's 5 actions: the env hands its action mask over (speaker first, then
    listener, in each env), the last two actions get -inf logits, so sampling never draws them and the
    log-probabilities and entropy are the speaker's own 3-way categorical's."""
    vecenv = make_puffer_vecenv("mpe2.simple_speaker_listener_v4", 1, seed=0)
    vecenv.close()
    assert vecenv.action_masks.tolist() == [[True, True, True, False, False], [True] * 5]
    torch.manual_seed(0)
    policy = Policy((13,), gym.spaces.Discrete(5), Args(hidden_size=8))
    masks = torch.as_tensor(vecenv.action_masks[[0] * 3000 + [1] * 3000])
    out = torch.randn(1, 5).expand(6000, 5)
    actions, logprobs = policy.sample(out, masks)
    assert actions[:3000].max() <= 2 and actions[3000:].max() == 4  # the listener's do reach its 5th
    logprobs_again, entropy = policy.logprob_and_entropy(out, actions, masks)
    own = torch.distributions.Categorical(logits=out[0, :3])
    torch.testing.assert_close(logprobs_again[:3000], own.log_prob(actions[:3000]))
    torch.testing.assert_close(logprobs, logprobs_again)
    torch.testing.assert_close(entropy[0], own.entropy())
    torch.testing.assert_close(entropy[-1], torch.distributions.Categorical(logits=out[0]).entropy())
    greedy = policy.choose(torch.tensor([[0.0, 0.0, 0.0, 9.0, 9.0]]), "greedy", masks[:1])
    assert torch.equal(greedy, torch.tensor([0]))


def test_a_gaussians_padded_dimensions_are_left_out_of_logprob_entropy_and_gradients():
    """Box actions of widths 1 and 3: a narrow agent's log-probability and entropy are those of its one dimension,
    and its padded dimensions send no gradient to their log-std."""
    box = lambda width: gym.spaces.Box(-1.0, 1.0, (width,))  # noqa: E731
    kinds = agent_kinds("test", {"small_0": (box(2), box(1)), "large_0": (box(2), box(3))})
    assert kinds.action_space.shape == (3,) and kinds.masks.tolist() == [[True, False, False], [True] * 3]
    policy = Policy((4,), kinds.action_space, Args(hidden_size=8))
    small = torch.as_tensor(kinds.masks[:1])  # a small agent's action mask
    out = torch.zeros(1, 3)
    actions = torch.tensor([[0.5, 3.0, -3.0]])
    logprob, entropy = policy.logprob_and_entropy(out, actions, small)
    one = torch.distributions.Normal(0.0, 1.0)
    torch.testing.assert_close(logprob, one.log_prob(torch.tensor([0.5])))
    torch.testing.assert_close(entropy, one.entropy().reshape(1))
    (logprob + entropy).sum().backward()
    assert policy.log_std.grad[0] != 0 and (policy.log_std.grad[1:] == 0).all()
    assert policy.action_std(kinds.masks) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "env_id,teams,words",
    [
        ("pz_test.mixed_actions_v0", "", "act in different kinds of space (speaker: Discrete(2), listener: Box"),
        ("pz_test.signal_game_v0", "speaker", "--teams 'speaker': name each kind of pz_test.signal_game_v0"),
        ("mpe-spread", "agent", "--teams 'agent': mpe-spread's agents are all of one kind; drop --teams"),
        ("tetris", "a,b", "--teams 'a,b': teams are kinds of agent of a PettingZoo env, not of tetris"),
    ],
)
def test_agents_one_policy_cannot_share_and_bad_teams_are_one_line(signal_game, env_id, teams, words):
    with pytest.raises(ValueError) as e:
        make_puffer_vecenv(env_id, 1, seed=0, teams=teams)
    assert words in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_random_opponents_need_two_teams(signal_game, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:  # speaker and listener are one team
        ppo_puffer_async.main(["--env-id", "mpe2.simple_speaker_listener_v4", "--eval-opponents", "random"])
    assert str(e.value).startswith("error: --eval-opponents random plays teams against each other")
    assert not psutil.Process().children()  # the run's Multiprocessing workers were closed with the error


@pytest.mark.parametrize("task", MPE2)
def test_every_mpe2_task_trains(tmp_path, monkeypatch, task):
    """Each of mpe2's tasks, two small updates: one kind or several, every agent a row of the buffer."""
    monkeypatch.chdir(tmp_path)
    vecenv = make_puffer_vecenv(f"mpe2.{task}", 2, seed=0)
    agents = vecenv.agents_per_env
    vecenv.close()
    flags = dict(
        num_envs=2, horizon=5, num_minibatches=1, backend="Serial", num_workers=1, async_factor=1, eval_episodes=1
    )
    result = train(puffer_args(f"mpe2.{task}", total_timesteps=2 * 2 * agents * 5, checkpoint_freq=0, **flags))
    assert result["update"] == 2 and torch.isfinite(result["policy"].critic.weight).all()


@pytest.mark.fixed_seed
def test_a_heterogeneous_game_is_learned_where_random_play_fails(signal_game, tmp_path, monkeypatch):
    """SignalGame: random play wins a quarter of the games; after 40k agent steps (~15 s) the speaker names the target
    and the listener reads it: the mean return over 40 games is at least 0.9 (measured: 1.0 on seeds 1-3)."""
    monkeypatch.chdir(tmp_path)
    flags = dict(num_envs=16, horizon=8, backend="Serial", async_factor=1, num_workers=1, update_epochs=4)
    result = train(puffer_args(signal_game, total_timesteps=40_960, checkpoint_freq=0, eval_episodes=20, **flags))
    args = result["args"]
    stats = evaluate(result["policy"], args, None, episodes=40, seed=5, device=CPU)
    assert stats["return"].mean() >= 0.9 and stats["return/listener"].mean() >= 0.9, stats
    events = EventAccumulator(result["run_dir"], size_guidance={"scalars": 0}).Reload()
    tags = events.Tags()["scalars"]
    assert {"charts/episodic_return/speaker", "charts/episodic_return/listener", "eval/return_mean/listener"} <= set(
        tags
    )
    # the random baseline: uniform actions in each agent's own space
    rng = np.random.default_rng(0)
    wins = []
    for game in range(400):
        env = SignalGame()
        env.reset(seed=game)
        for _ in range(2):
            _, rewards, *_ = env.step({"speaker_0": rng.integers(2), "listener_0": rng.integers(4)})
        wins.append(rewards["listener_0"])
    assert np.mean(wins) < 0.35


def test_a_mixed_run_resumes_evaluates_against_random_teams_and_records(tmp_path, monkeypatch, capsys):
    """simple_push (an adversary against an agent, observations of 8 and 19): --resume goes on, and --eval-checkpoint
    with --eval-opponents random reports each kind against random play; with --lstm too; --gif records the first
    episode."""
    monkeypatch.chdir(tmp_path)
    for lstm in (False, True):
        flags = dict(num_envs=4, horizon=5, num_minibatches=1, backend="Serial", num_workers=1, async_factor=1)
        flags["eval_episodes"] = 2
        flags.update(lstm=lstm, eval_opponents="random", exp_name=f"lstm{lstm}")
        first = train(puffer_args("mpe2.simple_push_v3", total_timesteps=2 * 40, **flags))
        ppo_puffer_async.main(["--resume", first["checkpoint"], "--total-timesteps", "120"])
        capsys.readouterr()
        gif = str(tmp_path / f"push{lstm}.gif")
        argv = ["--eval-checkpoint", first["checkpoint"], "--eval-episodes", "4", "--eval-opponents", "random"]
        ppo_puffer_async.main([*argv, "--gif", gif])
        out = capsys.readouterr().out
        for key in ("return/adversary", "return/agent", "return_vs_random/adversary", "return_vs_random/agent"):
            assert key in out, out
        assert os.path.getsize(gif) > 0
    events = EventAccumulator(first["run_dir"], size_guidance={"scalars": 0}).Reload()
    assert "eval/return_vs_random/adversary" in events.Tags()["scalars"]


def test_random_opponents_play_each_team_in_turn_with_uniform_actions(tmp_path, monkeypatch):
    """In env i team i % 2 plays the policy: a policy that always stays put (action 0) against random opponents.
    The scripted agents' actions cover every action of their own space; the trained ones' are all 0."""
    sent = []
    real = puffer_envs.PaddedAgents.step

    def record(self, actions):
        sent.append(dict(actions))
        return real(self, actions)

    monkeypatch.setattr(puffer_envs.PaddedAgents, "step", record)
    vecenv_args = puffer_args("mpe2.simple_tag_v3", eval_actions="greedy")
    kinds = make_puffer_vecenv("mpe2.simple_tag_v3", 1, seed=0)
    kinds.close()
    policy = Policy(kinds.single_observation_space.shape, kinds.single_action_space, Args(hidden_size=8))
    with torch.no_grad():
        policy.actor.weight.zero_()
        policy.actor.bias.copy_(torch.tensor([5.0, 0, 0, 0, 0]))
    result = evaluate(policy, vecenv_args, None, episodes=2, seed=3, device=CPU, opponents=True)
    assert set(result) == {"return_vs_random/adversary", "return_vs_random/agent"}
    assert len(result["return_vs_random/adversary"]) == 3 and len(result["return_vs_random/agent"]) == 1
    env0 = sent[0::2]  # Serial: env 0 steps, then env 1, in turn; in env 0 the adversaries (team 0) play the policy
    assert {int(step["adversary_0"]) for step in env0} == {0}
    assert {int(step["agent_0"]) for step in env0} == {0, 1, 2, 3, 4}
    assert {int(step["agent_0"]) for step in sent[1::2]} == {0}  # env 1: the agent's team


def test_help_shows_the_mpe_defaults(capsys):
    with pytest.raises(SystemExit):
        ppo_puffer_async.main(["--env-id", "mpe2.simple_speaker_listener_v4", "--help"])
    out = capsys.readouterr().out
    assert "(default: 0.977)" in out and "(default: 0.916)" in out  # the MPE set's gamma and lambda


def test_the_rollout_samples_each_agent_from_its_own_actions_and_stores_its_mask():
    """speaker_listener: the speaker's 3 actions of the shared 5. Over a rollout of a fresh policy, no speaker step
    draws action 3 or 4, every listener action is drawn, and each stored step carries its agent's mask, which the
    update scores with."""
    vecenv = make_puffer_vecenv("mpe2.simple_speaker_listener_v4", 16, seed=0)
    torch.manual_seed(0)
    policy = Policy(vecenv.single_observation_space.shape, vecenv.single_action_space, Args(hidden_size=8))
    experience = Experience(32, 20, 32, vecenv.single_observation_space.shape, torch.device("cpu"), mask_size=5)
    try:
        vecenv.async_reset(0)
        rollout(
            vecenv,
            policy,
            experience,
            EpisodeStats(32),
            obs_rms=None,
            reward_scaler=None,
            gamma=0.99,
            reward_scale=1.0,
            reward_clamp=None,
            device=torch.device("cpu"),
            timers=dict(env=0.0, inference=0.0),
        )
    finally:
        vecenv.close()
    speaker = vecenv.agent_kinds == 0  # agent a fills row a first
    assert experience.actions[speaker].max() <= 2
    assert set(experience.actions[~speaker].flatten().tolist()) == {0, 1, 2, 3, 4}
    assert (experience.action_masks[speaker] == [True, True, True, False, False]).all()
    assert experience.action_masks[~speaker].all()


class Relay(ParallelEnv):
    """Two agents; "short_0" terminates at its 2nd step while "long_0" plays on until its 4th, truncated there.
    Observations [agent index, step]; a step's reward is 10 * agent index + the step it ends."""

    metadata = {"name": "relay_v0"}
    possible_agents = ["short_0", "long_0"]

    def observation_space(self, agent):
        return gym.spaces.Box(0.0, 100.0, (2,), np.float32)

    def action_space(self, agent):
        return gym.spaces.Discrete(2)

    def observe(self):
        return {
            agent: np.array([i, self.t], np.float32)
            for i, agent in enumerate(self.possible_agents)
            if agent in self.agents
        }

    def reset(self, seed=None, options=None):
        self.t = 0
        self.agents = list(self.possible_agents)
        return self.observe(), {agent: {} for agent in self.agents}

    def step(self, actions):
        assert set(actions) == set(self.agents), (actions, self.agents)  # absent agents are sent no action
        self.t += 1
        obs = self.observe()
        rewards = {agent: 10.0 * self.possible_agents.index(agent) + self.t for agent in self.agents}
        terminations = {agent: agent == "short_0" and self.t == 2 for agent in self.agents}
        truncations = {agent: agent == "long_0" and self.t == 4 for agent in self.agents}
        self.agents = [a for a in self.agents if not (terminations[a] or truncations[a])]
        return obs, rewards, terminations, truncations, {agent: {} for agent in obs}


def test_pettingzoo_agents_reset_in_the_step_the_last_episode_ends():
    """common/puffer_envs.py's contract for a parallel env: the ending step's reward and flags are kept, its last
    observation goes to final_observations, an agent whose episode ended while the other plays on is absent (mask
    False, zero observation, no reward) until the env resets, in the same step the last agent's episode ends."""
    env = SameStepAgents(Relay)
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs, [[0, 0], [1, 0]])
    seen = []
    for _ in range(5):
        obs, rewards, terminals, truncations, _ = env.step(np.zeros(2, np.int32))
        seen.append((obs.tolist(), rewards.tolist(), terminals.tolist(), truncations.tolist(), env.masks.tolist()))
        if terminals.any() or truncations.any():
            seen[-1] += (env.final_observations.tolist(),)
    assert seen[0] == ([[0, 1], [1, 1]], [1, 11], [False, False], [False, False], [True, True])
    # short_0 ends: its reward and terminal flag, its last observation kept, then absent
    assert seen[1] == ([[0, 0], [1, 2]], [2, 12], [True, False], [False, False], [False, True], [[0, 2], [0, 0]])
    assert seen[2] == ([[0, 0], [1, 3]], [0, 13], [False, False], [False, False], [False, True])
    # long_0 is truncated: the env resets in this step, both agents present again with the first observations
    assert seen[3] == ([[0, 0], [1, 0]], [0, 14], [False, False], [False, True], [True, True], [[0, 2], [1, 4]])
    assert seen[4] == ([[0, 1], [1, 1]], [1, 11], [False, False], [False, False], [True, True])
