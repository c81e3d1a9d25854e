"""a2c_cartpole.py: GAE numbers, truncation bootstrap, learning bar, logging, bad input."""

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.nn as nn

import a2c_cartpole as a2c
from common.gym_envs import make_gym_vector_env
from conftest import ROOT, a2c_args


# ---------------------------------------------------------------- GAE
def seed_example():
    """A GAE example worked by hand: 5 steps x 4 envs (A, B, C, D), env B ends its episode at step 1."""
    rewards = torch.ones(5, 4)
    dones = torch.zeros(5, 4)
    dones[1, 1] = 1.0
    values = torch.tensor(
        [
            [15.0, 3.0, 8.0, 1.0],
            [16.0, 2.0, 9.0, 2.0],
            [17.0, 5.0, 10.0, 3.0],
            [18.0, 4.0, 11.0, 4.0],
            [19.0, 3.0, 12.0, 5.0],
        ]
    )
    next_value = torch.tensor([20.0, 6.0, 13.0, 6.0])
    return rewards, values, dones, next_value


def test_gae_matches_the_worked_example():
    rewards, values, dones, next_value = seed_example()
    advantages, returns = a2c.compute_gae(rewards, values, dones, next_value, gamma=0.99, gae_lambda=1.0)
    # step 4: delta = 1 + 0.99 * V(next) - V  (env C is 1.88, the seed rounds it to 1.89)
    torch.testing.assert_close(advantages[4], torch.tensor([1.8, 3.94, 1.87, 1.94]))
    # step 3: delta + 0.99 * A4, e.g. A: 1.81 + 0.99 * 1.8 = 3.592
    torch.testing.assert_close(advantages[3], torch.tensor([3.592, 3.8706, 3.7313, 3.8706]))
    # step 2, env A: (1 + 0.99 * 18 - 17) + 0.99 * 3.592 = 5.37608; env B: -0.04 + 0.99 * 3.8706
    torch.testing.assert_close(advantages[2, :2], torch.tensor([5.37608, 3.791894]))
    # step 1, env B ended: no V(next), no later advantages. The seed's trace keeps V(next) = 5 and
    # gets 3.95; the correct value is r - V = 1.0 - 2.0.
    assert advantages[1, 1].item() == pytest.approx(-1.0)
    # step 0, env B: (1 + 0.99 * 2 - 3) + 0.99 * (-1.0) = -1.01
    assert advantages[0, 1].item() == pytest.approx(-1.01)
    torch.testing.assert_close(returns, advantages + values)


def gae_reference(rewards, values, dones, next_value, gamma, lam):
    """Plain per-env, per-step loop over Python floats."""
    T = len(rewards)
    N = len(rewards[0])
    advantages = [[0.0] * N for _ in range(T)]
    for n in range(N):
        running = 0.0
        for t in reversed(range(T)):
            v_next = next_value[n] if t == T - 1 else values[t + 1][n]
            if dones[t][n]:
                running = rewards[t][n] - values[t][n]
            else:
                running = rewards[t][n] + gamma * v_next - values[t][n] + gamma * lam * running
            advantages[t][n] = running
    return advantages


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gae_random_against_plain_loop(seed):
    g = torch.Generator().manual_seed(seed)
    T = 17
    N = 6
    gamma = 0.97
    lam = 0.9
    rewards = torch.randn(T, N, generator=g)
    values = torch.randn(T, N, generator=g)
    dones = (torch.rand(T, N, generator=g) < 0.2).float()
    next_value = torch.randn(N, generator=g)
    advantages, returns = a2c.compute_gae(rewards, values, dones, next_value, gamma, lam)
    expected = gae_reference(rewards.tolist(), values.tolist(), dones.tolist(), next_value.tolist(), gamma, lam)
    torch.testing.assert_close(advantages, torch.tensor(expected))
    torch.testing.assert_close(returns, advantages + values)


# ---------------------------------------------------------------- truncation
class CounterEnv(gym.Env):
    """obs = [t]; reward 1 per step; terminates at t == 3 if `terminate`, else runs until a TimeLimit."""

    observation_space = gym.spaces.Box(-100.0, 100.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, terminate: bool):
        self.terminate = terminate
        self.t = 0

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t], np.float32), 1.0, self.terminate and self.t == 3, False, {}


gym.register("TestTerminateAt3-v0", entry_point=lambda: CounterEnv(terminate=True))
gym.register("TestTruncateAt3-v0", entry_point=lambda: CounterEnv(terminate=False), max_episode_steps=3)


class KnownValueAgent(nn.Module):
    """Uniform policy, V(s) = 10 + s[0]: bootstrap targets can be computed by hand."""

    def forward(self, x, state=None):
        return torch.zeros(x.shape[0], 2), 10.0 + x[:, 0], state

    def sample(self, out):
        return out.argmax(dim=-1)


@pytest.mark.parametrize("env_id, truncates", [("TestTerminateAt3-v0", False), ("TestTruncateAt3-v0", True)])
def test_rollout_bootstraps_truncation_not_termination(env_id, truncates):
    envs = make_gym_vector_env(env_id, 2)
    obs, _ = envs.reset(seed=0)
    storage = a2c.make_storage(num_steps=4, num_envs=2, obs_dim=1, action_space=envs.single_action_space)
    gamma = 0.9
    next_obs, _, ep_returns, ep_lengths = a2c.collect_rollout(
        envs,
        KnownValueAgent(),
        storage,
        obs,
        None,
        a2c.Args(reward_scale=0.5, gamma=gamma),
        obs_rms=None,
        reward_norm=None,
        device=torch.device("cpu"),
        autocast=contextlib.nullcontext,
    )
    envs.close()
    # The 3rd transition (t = 2) ends both episodes; its final observation is [3], V = 13. Rewards
    # are scaled (reward_scale 0.5) before the bootstrap, which is already in value units.
    expected_last_reward = 0.5 + gamma * 13.0 if truncates else 0.5
    np.testing.assert_allclose(storage["rewards"][:, 0], [0.5, 0.5, expected_last_reward, 0.5], rtol=1e-6)
    np.testing.assert_array_equal(storage["dones"][:, 0], [0.0, 0.0, 1.0, 0.0])
    # SAME_STEP autoreset: the observation after the episode end is the new episode's first one.
    np.testing.assert_array_equal(storage["obs"][:, 0, 0], [0.0, 1.0, 2.0, 0.0])
    assert ep_returns == [3.0, 3.0] and ep_lengths == [3, 3]
    # The value target at the last step of the episode: the bootstrapped reward and nothing after it.
    batch = {key: torch.as_tensor(array) for key, array in storage.items()}
    _, returns = a2c.compute_gae(
        batch["rewards"], batch["values"], batch["dones"], torch.full((2,), 10.0 + next_obs[0, 0]), gamma, 1.0
    )
    assert returns[2, 0].item() == pytest.approx(expected_last_reward)


# ---------------------------------------------------------------- normalization
def test_running_mean_std_and_frozen_normalization():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, (8, 4)) for _ in range(50)]
    obs_rms = a2c.RunningMeanStd((4,))
    for b in batches:
        obs_rms.update(b)
    data = np.concatenate(batches)
    np.testing.assert_allclose(obs_rms.mean, data.mean(0), rtol=1e-4)
    np.testing.assert_allclose(obs_rms.var, data.var(0), rtol=1e-3)
    x = rng.normal(3.0, 2.0, (5, 4))
    np.testing.assert_allclose(a2c.normalize_obs(x, obs_rms), (x - data.mean(0)) / data.std(0), rtol=1e-3, atol=1e-4)
    assert a2c.normalize_obs(np.full((1, 4), 1e6), obs_rms).max() == pytest.approx(10.0)  # clipped


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("shape", [(1, 17), (16, 4), (1,), (8,)])
def test_running_mean_std_takes_numpys_mean_and_var_bit_for_bit(shape, dtype):
    """The update sums where numpy's batch.mean(0) / batch.var(0) would be called: the same numbers, bit for bit."""
    rng = np.random.default_rng(1)
    obs_rms = a2c.RunningMeanStd(shape[1:])
    reference = a2c.RunningMeanStd(shape[1:])
    for _ in range(30):
        batch = (rng.normal(3.0, 2.0, shape) * 10).astype(dtype)
        obs_rms.update(batch)
        b = batch.reshape(-1, *reference.mean.shape)
        delta = b.mean(0) - reference.mean
        total = reference.count + len(b)
        m2 = reference.var * reference.count + b.var(0) * len(b) + delta**2 * reference.count * len(b) / total
        reference.mean = reference.mean + delta * len(b) / total
        reference.var = m2 / total
        reference.count = total
        assert np.array_equal(obs_rms.mean, reference.mean) and np.array_equal(obs_rms.var, reference.var)
    assert obs_rms.count == reference.count


def test_loss_gradient_direction():
    """Positive advantage raises the action's log-prob; value loss is half the MSE (as CleanRL's cleanrl/ppo.py at
    fe8d8a03), so --vf-coef 1.0 gives SB3's total loss at its vf_coef 0.5 (SB3 2.9.2's a2c/a2c.py: plain MSE)."""
    logprobs = torch.tensor([-0.5, -1.0], requires_grad=True)
    values = torch.tensor([1.0, 2.0], requires_grad=True)
    policy_loss, value_loss = a2c.a2c_loss(logprobs, torch.tensor([2.0, -1.0]), values, torch.tensor([3.0, 2.0]))
    assert policy_loss.item() == pytest.approx(-(2.0 * -0.5 + -1.0 * -1.0) / 2)
    assert value_loss.item() == pytest.approx(0.5 * (2.0**2 + 0.0) / 2)
    loss = policy_loss + 1.0 * value_loss  # train()'s, at --vf-coef 1.0 and --ent-coef 0
    assert loss.item() == pytest.approx(policy_loss.item() + 0.5 * (2.0**2 + 0.0) / 2)  # SB3's, at its vf_coef 0.5
    loss.backward()
    assert logprobs.grad[0] < 0 < logprobs.grad[1]  # descent raises action 0, lowers action 1


def test_gumbel_max_sampling_draws_from_the_softmax():
    """The one speed trick a2c_cartpole.py keeps (docs/benchmarks.md gives the SPS it pays): argmax(logits + Gumbel
    noise) draws each action as often as softmax(logits) says, as Categorical(logits).sample() would."""
    torch.manual_seed(0)
    agent = a2c.Agent(3, gym.spaces.Discrete(4), a2c.Args(hidden_size=8))
    constant_head(agent, [1.0, 0.0, -1.0, 0.5])
    out = agent(torch.zeros(40_000, 3))[0]
    frequencies = torch.bincount(agent.sample(out), minlength=4) / 40_000
    torch.testing.assert_close(frequencies, out[0].softmax(-1), atol=0.01, rtol=0)
    assert frequencies[0] > 0.35 and frequencies[2] < 0.1  # not uniform: the logits matter


# ---------------------------------------------------------------- end to end
@pytest.mark.fixed_seed
def test_learns_cartpole_with_defaults(tmp_path, monkeypatch):
    """Default flags and a fixed seed: deterministic eval mean >= 475 (CartPole-v1 solved)."""
    monkeypatch.chdir(tmp_path)
    result = a2c.train(a2c.Args(seed=1))
    evals = [mean for _, mean in result["eval_history"]]
    assert result["solved_at"] is not None, f"never solved; evals {evals}"
    assert evals[-1] >= 475, f"final eval {evals[-1]}; evals {evals}"


@pytest.mark.fixed_seed
def test_learns_with_minibatches_adam_and_advantage_normalization(tmp_path, monkeypatch):
    """The non-default update paths (4 shuffled mini-batches per update, Adam, per-mini-batch
    advantage normalization) also solve CartPole-v1, well inside 40k steps."""
    monkeypatch.chdir(tmp_path)
    result = a2c.train(
        a2c.Args(seed=1, mini_batches=4, optimizer="adam", norm_adv=True, total_timesteps=40_000, eval_freq=50)
    )
    assert result["solved_at"] is not None, f"never solved; evals {result['eval_history']}"


def test_smoke_logs_scalars_and_checkpoint_roundtrip(tmp_path, monkeypatch):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.chdir(tmp_path)
    result = a2c.train(a2c.Args(seed=3, total_timesteps=2_000, eval_freq=10, eval_episodes=2))
    events = EventAccumulator(result["run_dir"]).Reload()
    expected = {
        "charts/episodic_return",
        "charts/episodic_length",
        "charts/SPS",
        "perf/train_SPS",
        "charts/learning_rate",
        "losses/policy_loss",
        "losses/value_loss",
        "losses/entropy",
        "losses/explained_variance",
        "losses/grad_norm",
        "eval/return_mean",
        "eval/return_std",
    }
    assert expected <= set(events.Tags()["scalars"])
    # A2C has no old policy to compare with: no KL, no clipped fraction (the PPO scripts' losses/approx_kl, ...)
    assert not [tag for tag in events.Tags()["scalars"] if "kl" in tag or "clipfrac" in tag]
    assert "hyperparameters/text_summary" in events.Tags()["tensors"]
    checkpoint = os.path.join(result["run_dir"], "a2c_cartpole.pt")
    out = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "a2c_cartpole.py"),
            "--eval-checkpoint",
            checkpoint,
            "--eval-episodes",
            "3",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "3 episodes (greedy actions):" in out.stdout and "return" in out.stdout


def test_non_finite_loss_stops_with_a_clear_message(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    real_loss = a2c.a2c_loss

    def nan_loss(*args, **kwargs):
        policy_loss, value_loss = real_loss(*args, **kwargs)
        return policy_loss * float("nan"), value_loss

    monkeypatch.setattr(a2c, "a2c_loss", nan_loss)
    with pytest.raises(SystemExit, match=r"^error: loss became nan at update 1 .*--learning-rate"):
        a2c.main(["--total-timesteps", "800", "--eval-freq", "0"])


def test_ctrl_c_saves_and_exits_130(tmp_path):
    # A process started in the background by a non-interactive shell inherits SIGINT ignored (and Python
    # keeps it so): give the script the disposition a terminal's Ctrl-C meets.
    proc = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "a2c_cartpole.py"), "--total-timesteps", "10000000"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert proc.stdout.readline().startswith("run CartPole-v1__a2c_cartpole__1__")  # training has started
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130 and not err, err
    (run,) = os.listdir(tmp_path / "runs")
    path = os.path.join("runs", run, "a2c_cartpole.pt")
    checkpoint = torch.load(tmp_path / path, weights_only=True)
    assert 0 < checkpoint["global_step"] < 10_000_000
    (line,) = [line for line in out.splitlines() if "interrupted" in line]
    assert line == (
        f"interrupted at step {checkpoint['global_step']:,}: saved {path}, envs closed; continue with --resume {path}"
    )
    # and the saved model evaluates
    out = run_script("--eval-checkpoint", path, "--eval-episodes", "1", cwd=tmp_path)
    assert out.returncode == 0, out.stderr


def scalar_points(run_dir, tag):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(run_dir, size_guidance={"scalars": 0}).Reload()
    return sorted([(e.step, e.value) for e in events.Scalars(tag)], key=lambda pair: pair[0])  # files: name order


def interrupt_at_update(monkeypatch, update):
    """Makes the rollout of `update` press Ctrl-C (a real SIGINT), as a user would."""
    real_rollout = a2c.collect_rollout
    calls = []

    def rollout(*args, **kwargs):
        calls.append(1)
        if len(calls) == update:
            signal.raise_signal(signal.SIGINT)
        return real_rollout(*args, **kwargs)

    monkeypatch.setattr(a2c, "collect_rollout", rollout)


def test_ctrl_c_stops_after_the_update_it_came_in_not_at_the_next_log(tmp_path, monkeypatch):
    """Ctrl-C during update 3 of 40 (--log-freq 10): the run stops after update 3, as it says, saves it, and writes
    that update's scalars and the episodes finished since the last write."""
    monkeypatch.chdir(tmp_path)
    interrupt_at_update(monkeypatch, 3)
    result = a2c.train(a2c.Args(total_timesteps=40 * 80, eval_freq=0, checkpoint_freq=0))
    assert result["interrupted"] and result["update"] == 3 and result["global_step"] == 240
    assert torch.load(result["checkpoint"], weights_only=True)["update"] == 3
    assert [step for step, _ in scalar_points(result["run_dir"], "losses/policy_loss")] == [240]
    assert {step for step, _ in scalar_points(result["run_dir"], "charts/episodic_return")} <= {80, 160, 240}


def record_training_steps(monkeypatch):
    """Keeps what the training envs (the first vector env the run makes) return at each step: (rewards, dones)."""
    make = a2c.make_gym_vector_env
    steps = []

    def recording(*args, **kwargs):
        envs = make(*args, **kwargs)
        if not steps:
            step = envs.step

            def recording_step(actions):
                out = step(actions)
                steps.append((np.array(out[1]), out[2] | out[3]))
                return out

            envs.step = recording_step
            steps.append(None)  # the first env is the training's
        return envs

    monkeypatch.setattr(a2c, "make_gym_vector_env", recording)
    return steps


def test_one_point_per_finished_episode_at_the_step_of_its_update(tmp_path, monkeypatch):
    """As CleanRL's ppo.py: charts/episodic_return and charts/episodic_length hold one point per finished episode,
    its return (the env's raw rewards, summed by the test from what the env returned) at the global step of the update
    it finished in, though they are written only every --log-freq updates (3 here, and after the last, 7th)."""
    monkeypatch.chdir(tmp_path)
    steps = record_training_steps(monkeypatch)
    result = a2c.train(a2c.Args(total_timesteps=7 * 80, log_freq=3, eval_freq=0, checkpoint_freq=0))
    running = np.zeros(16)
    length = np.zeros(16, dtype=np.int64)
    expected = []
    for t, (rewards, dones) in enumerate(steps[1:]):
        running += rewards
        length += 1
        update = t // 5 + 1  # 5 steps per env and update
        expected += [(update * 80, float(np.float32(running[i])), int(length[i])) for i in np.flatnonzero(dones)]
        running[dones] = 0
        length[dones] = 0
    assert len(steps) - 1 == 7 * 5 and len({step for step, _, _ in expected}) >= 4, expected
    returns = scalar_points(result["run_dir"], "charts/episodic_return")
    lengths = scalar_points(result["run_dir"], "charts/episodic_length")
    assert returns == [(step, ret) for step, ret, _ in expected]
    assert lengths == [(step, length) for step, _, length in expected]
    # the loss scalars stay every --log-freq updates
    assert [step for step, _ in scalar_points(result["run_dir"], "losses/policy_loss")] == [240, 480, 560]


def test_every_evaluation_plays_the_same_episodes_with_its_own_random_stream(tmp_path, monkeypatch):
    """--eval-actions sampled, a policy that does not change (no optimizer step, no observation statistics): the
    evaluations at updates 1, 2, 3 play the same episodes (seed + 10,000) with the same draws, --eval-checkpoint plays
    them again, and a run that evaluates every update trains exactly as one that does not."""
    monkeypatch.chdir(tmp_path)
    flags = dict(total_timesteps=3 * 80, norm_obs=False, eval_actions="sampled", eval_episodes=4, checkpoint_freq=0)
    with monkeypatch.context() as m:
        m.setattr(torch.optim.RMSprop, "step", lambda self, closure=None: None)
        result = a2c.train(a2c.Args(eval_freq=1, exp_name="frozen", **flags))
    evals = scalar_points(result["run_dir"], "eval/return_mean")
    assert [step for step, _ in evals] == [80, 160, 240] and len({mean for _, mean in evals}) == 1, evals
    stats = a2c.evaluate_checkpoint(
        a2c.Args(eval_checkpoint=result["checkpoint"], eval_episodes=4, eval_actions="sampled")
    )
    assert np.float32(stats["return"].mean()) == evals[-1][1]
    assert stats["length"].std() > 0  # sampled, not one action repeated
    every = a2c.train(a2c.Args(eval_freq=1, exp_name="every", **flags))
    end = a2c.train(a2c.Args(eval_freq=0, exp_name="end", **flags))
    assert every["run_dir"] != end["run_dir"]
    for tag in ("losses/policy_loss", "losses/value_loss"):
        assert scalar_points(every["run_dir"], tag) == scalar_points(end["run_dir"], tag)


def test_one_episode_evaluation_prints_no_spread(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    result = a2c.train(a2c.Args(total_timesteps=800, eval_freq=0))
    capsys.readouterr()
    a2c.main(["--eval-checkpoint", os.path.join(result["run_dir"], "a2c_cartpole.pt"), "--eval-episodes", "1"])
    out = capsys.readouterr().out
    assert "1 episode (greedy actions):" in out and "+/-" not in out, out


def test_total_rounded_down_to_whole_updates_is_said_once(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    result = a2c.train(a2c.Args(total_timesteps=1000, eval_freq=0))
    assert result["global_step"] == 960
    out = capsys.readouterr().out
    assert out.count("rounded down") == 1
    assert (
        "training to step 960: 12 updates of 80 agent steps (--total-timesteps 1,000 rounded down to whole updates)"
        in out
    )


def run_script(*argv, cwd):
    return subprocess.run(
        [sys.executable, os.path.join(ROOT, "a2c_cartpole.py"), *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--env-id", "NoSuchEnv-v0"], ["--env-id", "not a registered Gymnasium env"]),
        (["--num-envs", "0"], ["--num-envs"]),
        (["--mini-batches", "3"], ["--mini-batches"]),
        (["--lstm", "--mini-batches", "3"], ["--mini-batches 3 must divide --num-envs 16 with --lstm"]),
        (["--rnn-type", "gru"], ["--rnn-type gru", "add --lstm"]),
        (["--eval-checkpoint", "does_not_exist.pt"], ["--eval-checkpoint", "not found"]),
        (
            ["--eval-checkpoint", "corrupt.pt"],
            ["--eval-checkpoint", "it is text, beginning 'this is not a checkpoint'"],
        ),
        (["--eval-checkpoint", "truncated.pt"], ["--eval-checkpoint", "it is truncated (the file ends early, after"]),
        (
            ["--eval-checkpoint", "other.pt"],
            ["--eval-checkpoint", "lacks the entries args: it was not written"],
        ),
    ],
)
def test_bad_input_gives_one_line_error(tmp_path, argv, words):
    (tmp_path / "corrupt.pt").write_bytes(b"this is not a checkpoint")
    torch.save({"model": {"w": torch.zeros(1000)}}, tmp_path / "other.pt")
    (tmp_path / "truncated.pt").write_bytes((tmp_path / "other.pt").read_bytes()[:2000])
    out = run_script(*argv, cwd=tmp_path)
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), out.stderr
    for word in words:
        assert word in lines[0], lines[0]


def test_defaults_follow_the_env(tmp_path):
    """One set per action space, POPGym's memory set, and LunarLander-v3's own (as RL Zoo's hyperparams/a2c.yml keeps
    one per env), which --help shows."""
    assert a2c_args("CartPole-v1") == a2c.Args()  # Args shows the Discrete defaults
    assert dataclasses.replace(a2c_args("Acrobot-v1"), env_id="CartPole-v1") == a2c.Args()
    lunar = a2c_args("LunarLander-v3")
    assert (lunar.gamma, lunar.reward_scale, lunar.norm_adv, lunar.hidden_size) == (0.995, 0.01, True, 128)
    assert lunar.total_timesteps == 500_000 and lunar.num_envs == 64
    assert a2c_args("popgym-RepeatPreviousEasy-v0").num_steps == 16
    assert a2c_args("Pendulum-v1").norm_reward is True
    assert a2c_args("Pendulum-v1", norm_reward=False).norm_reward is False
    out = run_script("--env-id", "LunarLander-v3", "--help", cwd=tmp_path)
    assert out.returncode == 0 and "(default: 0.995)" in out.stdout, out.stdout


def test_side_by_side_evaluation_equals_one_episode_at_a_time(tmp_path, monkeypatch):
    """The vectorized evaluation plays the same episodes (env i seeded seed + i) as a plain loop over single
    envs, so moving to it changed no reported return; a partly trained agent gives episodes of unequal length."""
    monkeypatch.chdir(tmp_path)
    result = a2c.train(a2c.Args(seed=2, total_timesteps=12_000, eval_freq=0, checkpoint_freq=0))
    agent = result["policy"]
    ckpt = torch.load(result["checkpoint"], weights_only=True)
    obs_rms = a2c.RunningMeanStd.from_state(ckpt["obs_rms"])
    forward = agent.forward
    calls = []
    agent.forward = lambda x, state: (calls.append(len(x)), forward(x, state))[1]
    stats = a2c.evaluate(agent, a2c.Args(), obs_rms, episodes=6, seed=50, device=torch.device("cpu"))
    agent.forward = forward
    # one forward pass per step for all 6 episodes, as long as the longest lasts (not one per episode step)
    assert calls == [6] * int(stats["length"].max())
    expected = []
    for episode in range(6):
        env = gym.make("CartPole-v1")
        obs, _ = env.reset(seed=50 + episode)
        total = 0.0
        done = False
        while not done:
            with torch.inference_mode():
                logits, _, _ = agent(torch.as_tensor(a2c.normalize_obs(obs[None], obs_rms)))
            obs, reward, terminated, truncated, _ = env.step(int(logits.argmax()))
            total = total + reward
            done = terminated or truncated
        expected.append(total)
    assert len(set(expected)) > 1, expected  # not a trivial policy
    np.testing.assert_array_equal(stats["return"], expected)
    np.testing.assert_array_equal(stats["length"], expected)  # CartPole: +1 per step


# ---------------------------------------------------------------- action and observation spaces
def constant_head(agent, bias):
    """Makes the policy head output `bias` whatever the observation."""
    with torch.no_grad():
        agent.policy_head.weight.zero_()
        agent.policy_head.bias.copy_(torch.as_tensor(bias, dtype=torch.float32))


def test_gaussian_logprob_and_entropy_by_hand_and_against_torch():
    # Mean 0, std 2 in both dimensions: log N(2; 0, 2) = -1/2 - ln 2 - ln(2 pi)/2 = -2.1121,
    # log N(0; 0, 2) = -ln 2 - ln(2 pi)/2 = -1.6121, summed -3.7242; entropy 2 x (1/2 + ln(2 pi)/2 + ln 2) = 4.2242.
    agent = a2c.Agent(3, gym.spaces.Box(-1, 1, (2,)), a2c.Args(hidden_size=8, log_std_init=float(np.log(2.0))))
    constant_head(agent, [0.0, 0.0])
    logprob, entropy, _ = agent.get_logprob_entropy_value(torch.randn(1, 3), torch.tensor([[2.0, 0.0]]))
    assert logprob.item() == pytest.approx(-3.7242, abs=1e-4) and entropy.item() == pytest.approx(4.2242, abs=1e-4)
    agent = a2c.Agent(3, gym.spaces.Box(-1, 1, (4,)), a2c.Args(hidden_size=8, log_std_init=-0.7))
    x = torch.randn(6, 3)
    actions = torch.randn(6, 4) * 3  # actions beyond the bounds too: never clipped here
    logprob, entropy, _ = agent.get_logprob_entropy_value(x, actions)
    normal = torch.distributions.Normal(agent(x)[0], agent.log_std.exp())
    torch.testing.assert_close(logprob, normal.log_prob(actions).sum(-1))
    torch.testing.assert_close(entropy, normal.entropy().sum(-1))


def test_a_gaussian_mean_stays_inside_the_action_bounds():
    """mid + half * tanh(head): a head of 0 gives the middle of the bounds, one of +-50 the bounds, never beyond them
    (where every sample would clip to the same action); an unbounded Box keeps the head's output as its mean."""
    agent = a2c.Agent(
        3, gym.spaces.Box(np.array([0.0, -1.0], np.float32), np.array([2.0, 3.0], np.float32)), a2c.Args(hidden_size=8)
    )
    for head, mean in [([0.0, 0.0], [1.0, 1.0]), ([50.0, -50.0], [2.0, -1.0]), ([0.5, -0.5], [1.4621, 0.0757])]:
        constant_head(agent, head)  # tanh(0.5) = 0.4621: 1 + 1 x 0.4621 and 1 - 2 x 0.4621
        torch.testing.assert_close(agent(torch.randn(4, 3))[0], torch.tensor([mean] * 4), atol=1e-4, rtol=0)
    unbounded = a2c.Agent(3, gym.spaces.Box(-np.inf, np.inf, (2,)), a2c.Args(hidden_size=8))
    constant_head(unbounded, [50.0, -50.0])
    assert unbounded(torch.zeros(1, 3))[0].tolist() == [[50.0, -50.0]]
    assert "action_mid" not in agent.state_dict()  # checkpoints hold weights only: the bounds come from the env


def test_multidiscrete_logprob_and_entropy_are_sums_over_dimensions():
    agent = a2c.Agent(3, gym.spaces.MultiDiscrete([3, 2, 4]), a2c.Args(hidden_size=8))
    constant_head(agent, [0.0, 1.0, 2.0, 0.5, -0.5, 0.0, 0.0, 1.0, -1.0])  # 3 + 2 + 4 logits
    actions = torch.tensor([[2, 0, 1], [0, 1, 3]])
    logprob, entropy, _ = agent.get_logprob_entropy_value(torch.randn(2, 3), actions)
    logits = torch.tensor([0.0, 1.0, 2.0, 0.5, -0.5, 0.0, 0.0, 1.0, -1.0]).split([3, 2, 4])
    dists = [torch.distributions.Categorical(logits=chunk) for chunk in logits]
    for row in range(2):
        expected = sum(dist.log_prob(actions[row, i]) for i, dist in enumerate(dists))
        assert logprob[row].item() == pytest.approx(expected.item(), abs=1e-6)
        assert entropy[row].item() == pytest.approx(sum(dist.entropy() for dist in dists).item(), abs=1e-6)
    samples = torch.stack([agent.sample(agent(torch.zeros(1, 3))[0])[0] for _ in range(3000)])
    assert samples.shape == (3000, 3) and all(samples[:, i].max() == n - 1 for i, n in enumerate([3, 2, 4]))
    assert agent.greedy(agent(torch.zeros(1, 3))[0]).tolist() == [[2, 0, 2]]  # the largest logit per dimension


class RecordingPendulum:
    """A vector env of 2 one-dimensional tasks with actions bounded to [-1, 1]: records what it is sent."""

    single_action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self):
        self.sent = []

    def step(self, actions):
        self.sent.append(np.array(actions))
        return np.zeros((2, 3), np.float32), np.zeros(2), np.zeros(2, bool), np.zeros(2, bool), {}


def test_the_env_gets_clipped_actions_and_the_update_the_sampled_ones():
    torch.manual_seed(0)
    agent = a2c.Agent(
        3, RecordingPendulum.single_action_space, a2c.Args(hidden_size=8, log_std_init=float(np.log(3.0)))
    )  # std 3
    envs = RecordingPendulum()
    storage = a2c.make_storage(4, 2, 3, envs.single_action_space)
    a2c.collect_rollout(
        envs,
        agent,
        storage,
        np.zeros((2, 3), np.float32),
        None,
        a2c.Args(reward_scale=1.0),
        obs_rms=None,
        reward_norm=None,
        device="cpu",
        autocast=contextlib.nullcontext,
    )
    sampled = storage["actions"]
    sent = np.stack(envs.sent)
    assert np.abs(sampled).max() > 1.5  # std 3: most samples fall outside the bounds
    np.testing.assert_array_equal(sent, np.clip(sampled, -1, 1))
    # The update's log-probability is that of the stored (unclipped) sample.
    logprob, _, _ = agent.get_logprob_entropy_value(torch.zeros(8, 3), torch.as_tensor(sampled.reshape(8, 1)))
    normal = torch.distributions.Normal(agent(torch.zeros(8, 3))[0], agent.log_std.exp())
    torch.testing.assert_close(logprob, normal.log_prob(torch.as_tensor(sampled.reshape(8, 1))).sum(-1))


class CartPoleDict(gym.ObservationWrapper):
    """CartPole observing a Dict of two Boxes (cart, pole): flattened in sorted key order, the same 4 numbers."""

    def __init__(self):
        super().__init__(gym.make("CartPole-v1"))
        box = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.observation_space = gym.spaces.Dict({"pole": box, "cart": box})

    def observation(self, obs):
        return {"cart": obs[:2], "pole": obs[2:]}


class CartPoleMultiDiscrete(gym.ActionWrapper):
    """CartPole acting with MultiDiscrete([2, 3]): the first dimension pushes, the second does nothing."""

    def __init__(self):
        super().__init__(gym.make("CartPole-v1"))
        self.action_space = gym.spaces.MultiDiscrete([2, 3])

    def action(self, action):
        return int(action[0])


@pytest.mark.parametrize(
    "env_id,make",
    [("CartPole-v1", None), ("CartPoleDict-v1", CartPoleDict), ("CartPoleMultiDiscrete-v1", CartPoleMultiDiscrete)],
)
@pytest.mark.fixed_seed
def test_dict_observations_and_multidiscrete_actions_learn_as_plain_cartpole(tmp_path, monkeypatch, env_id, make):
    """The defaults, seed 1, 60k steps: each variant is solved (evaluation >= 475 at the end), as plain CartPole is."""
    monkeypatch.chdir(tmp_path)
    if make is not None:
        gym.register(env_id, entry_point=make, max_episode_steps=500, reward_threshold=475.0)
    try:
        result = a2c.train(a2c_args(env_id, seed=1, total_timesteps=60_000, checkpoint_freq=0))
    finally:
        gym.registry.pop(env_id, None) if make is not None else None
    assert result["eval_history"][-1][1] >= 475, result["eval_history"]


@pytest.mark.fixed_seed
def test_pendulum_beats_the_random_policy(tmp_path, monkeypatch):
    """Box actions learn: Pendulum-v1 at its defaults, 300k steps instead of 1M (the rate anneals 3x faster),
    ends 700+ above a uniform-random policy (-1201 over 50 episodes). Measured, seeds 1 / 2 / 3: -186 / -200 / -180
    (10 deterministic episodes); the 1M-step runs are in docs/a2c.md."""
    monkeypatch.chdir(tmp_path)
    args = a2c_args("Pendulum-v1", seed=1, total_timesteps=300_000, checkpoint_freq=0)
    result = a2c.train(args)
    assert result["eval_history"][-1][1] >= -1201 + 700, result["eval_history"]


def test_discrete_observations_are_one_hot():
    envs = make_gym_vector_env("FrozenLake-v1", 2)
    obs, _ = envs.reset(seed=0)
    assert envs.single_observation_space.shape == (16,) and obs.shape == (2, 16)
    assert (obs.sum(1) == 1).all() and obs[:, 0].all()  # both start in square 0


class Odd(gym.Env):
    """A one-step env whose observation or action space is set per test."""

    def __init__(self, observation_space, action_space=gym.spaces.Discrete(2)):
        self.observation_space = observation_space
        self.action_space = action_space

    def reset(self, *, seed=None, options=None):
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, True, False, {}


@pytest.mark.parametrize(
    "observation_space,action_space,words",
    [
        (gym.spaces.Box(0, 255, (32, 32, 3), np.uint8), gym.spaces.Discrete(2), "holds images, which need a CNN"),
        (gym.spaces.Text(8), gym.spaces.Discrete(2), "Text observations do not flatten"),
        (gym.spaces.Dict({"g": gym.spaces.Graph(gym.spaces.Box(0, 1, (2,)), None)}), gym.spaces.Discrete(2), "Graph"),
        (
            gym.spaces.Box(0, 1, (3,)),
            gym.spaces.Tuple((gym.spaces.Discrete(2),)),
            "acts in Discrete, MultiDiscrete, Box",
        ),
    ],
)
def test_unsupported_spaces_are_one_line_naming_the_space(tmp_path, observation_space, action_space, words):
    gym.register("Odd-v0", entry_point=lambda: Odd(observation_space, action_space))
    try:
        with pytest.raises(SystemExit) as e:
            a2c.main(["--env-id", "Odd-v0"])
    finally:
        gym.registry.pop("Odd-v0")
    assert str(e.value).startswith("error: --env-id Odd-v0: ") and words in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("space", [gym.spaces.Discrete(3), gym.spaces.Box(-1, 1, (2,))])
def test_amp_losses_match_float32_on_a_fixed_batch(space):
    """bfloat16 autocast on the CPU: the A2C loss within 0.1% of float32's (measured: at most 0.02% over 20 seeds of
    this batch), the weights float32."""
    torch.manual_seed(0)
    agent = a2c.Agent(6, space, a2c.Args(hidden_size=64))
    x = torch.randn(256, 6)
    actions = torch.randint(0, 3, (256,)) if isinstance(space, gym.spaces.Discrete) else torch.randn(256, 2)
    advantages = torch.randn(256)
    returns = torch.randn(256) * 3

    def loss():
        logprobs, entropy, values = agent.get_logprob_entropy_value(x, actions)
        policy_loss, value_loss = a2c.a2c_loss(logprobs, advantages, values, returns)
        return policy_loss + 1.0 * value_loss - 0.01 * entropy.mean()

    full = loss()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        half = loss()
    assert half.dtype == torch.float32 and all(p.dtype == torch.float32 for p in agent.parameters())
    assert abs(half.item() - full.item()) <= 0.001 * abs(full.item()), (half.item(), full.item())


def test_every_preset_names_every_learning_and_evaluation_flag():
    """common/presets.py's A2C_CARTPOLE: each preset complete (no layer to merge in one's head); Args is CartPole's."""
    import dataclasses

    from common import presets

    not_preset = set(
        "exp_name seed device resume eval_checkpoint dist_backend capture_video gif track wandb_project_name "
        "wandb_entity env_id".split()
    )
    preset_flags = {field.name for field in dataclasses.fields(a2c.Args)} - not_preset
    for name, preset in presets.A2C_CARTPOLE.items():
        assert set(preset) == preset_flags, name
    assert a2c.Args(**presets.a2c_cartpole("CartPole-v1")) == a2c.Args()
    assert a2c.Args(**presets.a2c_cartpole("Pendulum-v1")).gamma == 0.95
