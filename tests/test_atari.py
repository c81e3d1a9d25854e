"""Atari in ppo_puffer_async.py (common/atari.py): the Nature CNN's shapes, frames kept as uint8 in the buffer, whole
games' returns against the learner's per-life episodes on a scripted game, a few real updates on Breakout, and the
one-line errors. Needs the atari extra (ale-py, which bundles the ROMs: its README at 0.12.1)."""

import numpy as np
import pytest
import torch
from gymnasium.spaces import Discrete

pytest.importorskip("ale_py", reason='the Atari tests need the atari extra: pip install -e ".[atari]"')

from common import atari  # noqa: E402
from common.puffer_envs import make_puffer_vecenv  # noqa: E402
from conftest import ROOT, puffer_args  # noqa: E402
from ppo_puffer_async import EpisodeStats, Experience, Policy, rollout, train  # noqa: E402

CPU = torch.device("cpu")
FRAMES = (4, 84, 84)


def test_nature_cnn_has_cleanrls_shapes_and_scales_frames_by_255():
    args = puffer_args("atari-breakout")
    policy = Policy(FRAMES, Discrete(4), args)
    convs = [m for m in policy.encoder if isinstance(m, torch.nn.Conv2d)]
    assert [(c.in_channels, c.out_channels, c.kernel_size, c.stride) for c in convs] == [
        (4, 32, (8, 8), (4, 4)),
        (32, 64, (4, 4), (2, 2)),
        (64, 64, (3, 3), (1, 1)),
    ]
    linear = policy.encoder[-2]
    assert (linear.in_features, linear.out_features) == (3136, 512)
    frames = torch.randint(0, 256, (3, *FRAMES), dtype=torch.uint8)
    out, values, state = policy.step(frames)
    assert out.shape == (3, 4) and values.shape == (3,) and state is None
    # the network sees frames / 255, whatever their dtype
    hidden = policy.encoder(frames.float() / 255.0)
    torch.testing.assert_close(out, policy.actor(hidden))
    # rows of steps: (rows, horizon, 4, 84, 84) -> (rows, horizon, actions)
    rows = torch.randint(0, 256, (2, 5, *FRAMES), dtype=torch.uint8)
    out, values = policy.unroll(rows)
    assert out.shape == (2, 5, 4) and values.shape == (2, 5)
    torch.testing.assert_close(out[1, 3], policy.step(rows[1, 3:4])[0][0])


def test_lstm_on_the_cnn_replays_what_it_stepped():
    policy = Policy(FRAMES, Discrete(4), puffer_args("atari-breakout", lstm=True))
    assert (policy.lstm.input_size, policy.lstm.hidden_size) == (512, 128)
    rows = torch.randint(0, 256, (2, 4, *FRAMES), dtype=torch.uint8)
    state = policy.initial_state(2, CPU)
    stepped = []
    for t in range(4):
        out, _, state = policy.step(rows[:, t], state)
        stepped.append(out)
    out, _ = policy.unroll(rows, policy.initial_state(2, CPU))
    torch.testing.assert_close(out, torch.stack(stepped, 1))


def test_frames_are_stored_as_uint8_and_the_update_views_them_without_a_copy():
    experience = Experience(16, 16, 8, FRAMES, CPU, action_space=Discrete(4))
    assert experience.obs.dtype == np.uint8
    assert experience.obs.nbytes == 16 * 16 * 4 * 84 * 84  # float32 would be 4x
    batch = experience.tensors(CPU)
    assert batch["obs"].dtype == torch.uint8
    assert batch["obs"].data_ptr() == experience.obs.ctypes.data  # the same memory: no copy, no float buffer
    vector = Experience(4, 8, 2, (6,), CPU)
    assert vector.obs.dtype == np.float32


class ScriptedALE:
    """Stands in for one AtariVectorEnv of 2 games, returning a script of steps: (rewards, terminals,
    episode frame numbers) per recv. A game that ends is reset by ALE in the same step (autoreset_mode="SameStep"):
    its frame number drops (ale-py 0.12.1's PreprocessedEnv::reset calls reset_game)."""

    def __init__(self, script):
        self.script = list(script)
        self.single_observation_space = None

    def reset(self, seed=None):
        return np.zeros((2, *FRAMES), np.uint8), {"episode_frame_number": np.array([12, 12])}

    def send(self, actions):
        self.sent = actions

    def recv(self):
        rewards, terminals, frames = self.script.pop(0)
        obs = np.full((2, *FRAMES), len(self.script), np.uint8)
        info = {"episode_frame_number": np.array(frames), "final_obs": np.full((2, *FRAMES), 255, np.uint8)}
        return obs, np.array(rewards, np.int32), np.array(terminals), np.zeros(2, bool), info

    def close(self):
        pass


def test_a_game_of_several_lives_is_one_logged_return_and_the_learner_sees_each_life_clipped(monkeypatch):
    # Game 0 (Breakout-like): 1 and 4 points, a life lost (no reset: frames go on), 7 points, the last life lost
    # (ALE resets the game: frames drop). Game 1 (Pong-like, no lives): -1, then the game ends.
    script = [
        ([1, -1], [False, False], [16, 16]),
        ([4, 0], [False, True], [20, 13]),
        ([0, 0], [True, False], [24, 17]),
        ([7, 0], [False, False], [28, 21]),
        ([0, 0], [True, False], [14, 25]),
        ([0, 0], [False, False], [18, 29]),
        ([0, 0], [False, False], [22, 33]),
        ([0, 0], [False, False], [26, 37]),
        ([0, 0], [False, False], [30, 41]),
    ]
    vecenv = atari.AtariEnvs("breakout", 2)
    vecenv.envs = [ScriptedALE(script)]
    vecenv.async_reset(0)
    policy = Policy(FRAMES, Discrete(4), puffer_args("atari-breakout"))
    experience = Experience(2, 4, 2, FRAMES, CPU, action_space=Discrete(4))
    episodes = EpisodeStats(2)
    timers = dict(env=0.0, inference=0.0)
    rollout(
        vecenv,
        policy,
        experience,
        episodes,
        obs_rms=None,
        reward_scaler=None,
        gamma=0.99,
        reward_scale=1.0,
        reward_clamp=1.0,
        device=CPU,
        timers=timers,
    )
    # the learner: rewards clipped to [-1, 1], an episode ends at each lost life
    np.testing.assert_array_equal(experience.rewards, [[1, 1, 0, 1], [-1, 0, 0, 0]])
    np.testing.assert_array_equal(experience.terminals, [[0, 0, 1, 0], [0, 1, 0, 0]])
    # the log: whole games, unclipped, counted in steps
    returns, lengths, agents = episodes.log.pop()
    assert sorted(zip(agents, returns, lengths)) == [(1, -1.0, 2)]
    rollout(
        vecenv,
        policy,
        experience,
        episodes,
        obs_rms=None,
        reward_scaler=None,
        gamma=0.99,
        reward_scale=1.0,
        reward_clamp=1.0,
        device=CPU,
        timers=timers,
    )
    returns, lengths, agents = episodes.log.pop()
    assert sorted(zip(agents, returns, lengths)) == [(0, 12.0, 5)]


def test_the_vector_env_steps_real_games_reproducibly_in_groups():
    def play(groups):
        vecenv = make_puffer_vecenv("atari-breakout", 4, 0, async_factor=groups)
        vecenv.async_reset(3)
        rng = np.random.default_rng(0)
        seen = {}
        for _ in range(60 * groups):
            obs, rewards, terminals, truncations, _, agents, masks = vecenv.recv()
            assert obs.dtype == np.uint8 and obs.shape == (4 // groups, *FRAMES) and masks.all()
            for agent, frame in zip(agents, obs):
                seen.setdefault(int(agent), []).append(frame.sum())
            vecenv.send(rng.integers(0, 4, len(agents)))
        vecenv.close()
        return seen

    one_group = play(1)
    assert play(1) == one_group  # a fixed seed: the same games
    assert set(play(2)) == {0, 1, 2, 3}


def test_a_short_atari_run_trains_logs_whole_games_and_resumes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    flags = dict(num_envs=4, batch_size=256, eval_episodes=2, eval_max_steps=200, checkpoint_freq=1)
    first = train(puffer_args("atari-breakout", total_timesteps=512, **flags))
    assert first["global_step"] == 512
    ckpt = torch.load(first["checkpoint"], weights_only=True)
    assert ckpt["args"]["env_id"] == "atari-breakout" and ckpt["args"]["reward_clamp"] == 1.0
    resumed = train(puffer_args("atari-breakout", resume=first["checkpoint"], total_timesteps=768))
    assert resumed["global_step"] == 768


@pytest.mark.parametrize(
    "flags,words",
    [
        (dict(env_id="atari-brekout"), "ALE has no game 'brekout'"),
        (dict(env_id="BreakoutNoFrameskip-v4"), "Atari games are atari-<game>"),
        (dict(env_id="ALE/Breakout-v5"), "Atari games are atari-<game>"),
        (dict(env_id="CarRacing-v3"), "images, which need a CNN"),
        (dict(env_id="atari-breakout", norm_obs=True), "--norm-obs"),
        (dict(env_id="atari-breakout", backend="Multiprocessing", num_workers=2), "--backend Multiprocessing"),
        (dict(env_id="atari-breakout", env_kwargs="mode=1"), "--env-kwargs"),
    ],
)
def test_bad_atari_input_is_one_line(tmp_path, monkeypatch, flags, words):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace("[", r"\[")) as e:
        train(puffer_args(**flags))
    assert "\n" not in str(e.value)


def test_without_ale_py_an_atari_id_says_how_to_install_it(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_ale(name, *args, **kwargs):
        if name.startswith("ale_py"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ale)
    with pytest.raises(ValueError, match=r'pip install -e "\.\[atari\]"'):
        atari.import_ale()


def test_the_script_does_not_import_ale_py_until_an_atari_env_is_built():
    import subprocess
    import sys

    code = "import sys, ppo_puffer_async; print('ale_py' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "False", out.stderr


def test_the_video_twin_plays_the_very_game_it_records():
    """--capture-video's frames come from a twin of game 0 (ale-py 0.12.1's AtariVectorEnv has no render()): the same
    seed and the same actions give the same game (rewards, lost lives, frame counts, resets), and the twin's full RGB
    screen."""
    vecenv = atari.AtariEnvs("breakout", 1, render=True)
    twin_steps = []
    twin_step = vecenv.twin.step

    def recording_step(actions):
        out = twin_step(actions)
        twin_steps.append((float(out[1][0]), bool(out[2][0]), int(out[4]["episode_frame_number"][0])))
        return out

    vecenv.twin.step = recording_step
    vecenv.async_reset(7)
    rng = np.random.default_rng(0)
    game_steps = []
    for t in range(800):
        obs, rewards, terminals, truncations, _, agents, _ = vecenv.recv()
        if t > 0:
            game_steps.append((float(rewards[0]), bool(terminals[0]), int(vecenv.frame_numbers[0])))
        vecenv.send(rng.integers(0, 4, 1))
    assert any(terminal for _, terminal, _ in game_steps)  # lives were lost on the way
    assert any(after[2] < before[2] for before, after in zip(game_steps, game_steps[1:]))  # and games reset
    assert game_steps == twin_steps[: len(game_steps)]
    assert vecenv.frame().shape == (210, 160, 3) and vecenv.frame().dtype == np.uint8
    vecenv.close()


def test_a_second_reset_ends_no_game_in_its_own_step():
    vecenv = atari.AtariEnvs("breakout", 2)
    vecenv.async_reset(0)
    for _ in range(50):  # the games' frame counts grow past a fresh game's
        vecenv.recv()
        vecenv.send(np.ones(2, np.int64))
    vecenv.recv()
    vecenv.async_reset(1)  # as a resumed run does
    vecenv.recv()
    assert not vecenv.game_over.any()
    vecenv.close()
