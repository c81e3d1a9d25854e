"""Watching and tracking runs: evaluation videos and GIFs (recording changes nothing evaluated), the Tetris frame,
the flags in TensorBoard's HParams table (read back from the event files, as TensorBoard reads them), eval/lines,
and --track with Weights & Biases offline (a resumed run continues the same W&B run)."""

import glob
import importlib.util
import os
import subprocess
import sys

import gymnasium as gym
import imageio.v2 as imageio
import numpy as np
import pytest
import torch
from PIL import Image, ImageSequence
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import plugin_data_pb2

import a2c_cartpole
import ppo_puffer_async
import ppo_tetris
from common.tetris import BACKGROUND, LOCKED, PIECE_COLORS, PIECE_NAMES, Tetris
from conftest import ROOT, puffer_args

CPU = torch.device("cpu")


def frames_in(path):
    return len(imageio.mimread(path, memtest=False))


def gif_milliseconds(path):
    """A GIF's playing time (Pillow merges identical consecutive frames and adds up their durations)."""
    with Image.open(path) as gif:
        return sum(frame.info["duration"] for frame in ImageSequence.Iterator(gif))


def test_recording_a2c_evaluation_changes_nothing_and_records_env_0s_whole_episode(tmp_path):
    torch.manual_seed(0)
    args = a2c_cartpole.Args(hidden_size=16)
    agent = a2c_cartpole.Agent(4, gym.spaces.Discrete(2), args)
    plain = a2c_cartpole.evaluate(agent, args, None, episodes=3, seed=7, device=CPU)
    paths = [str(tmp_path / "videos" / "a.mp4"), str(tmp_path / "a.gif")]
    recorded = a2c_cartpole.evaluate(agent, args, None, episodes=3, seed=7, device=CPU, videos=paths)
    np.testing.assert_array_equal(plain["return"], recorded["return"])
    np.testing.assert_array_equal(plain["length"], recorded["length"])
    # One frame per state env 0 acted in: as many as its first episode's steps, at CartPole's 50 frames a second.
    assert frames_in(paths[0]) == int(recorded["length"][0])
    assert gif_milliseconds(paths[1]) == pytest.approx(20 * recorded["length"][0])
    assert imageio.mimread(paths[0], memtest=False)[0].shape == (400, 600, 3)  # CartPole's rgb_array


def test_recording_tetris_play_changes_nothing(tmp_path):
    torch.manual_seed(0)
    agent = ppo_tetris.Agent(Tetris(num_envs=1).single_observation_space.shape[0], 7)
    with torch.random.fork_rng():
        plain = ppo_tetris.play(agent, 2, seed=3, max_ticks=60, device=CPU)
    with torch.random.fork_rng():
        recorded = ppo_tetris.play(agent, 2, seed=3, max_ticks=60, device=CPU, videos=[str(tmp_path / "t.gif")])
    for key in plain:
        np.testing.assert_array_equal(plain[key], recorded[key])
    assert gif_milliseconds(str(tmp_path / "t.gif")) == pytest.approx(100 * recorded["length"][0])


def test_recording_puffer_tetris_evaluation_changes_nothing(tmp_path):
    args = ppo_puffer_async.Args(max_ticks=50, hidden_size=16)
    game = Tetris(num_envs=1)
    policy = ppo_puffer_async.Policy(game.single_observation_space.shape, game.single_action_space, args)
    with torch.random.fork_rng():
        plain = ppo_puffer_async.evaluate(policy, args, None, episodes=2, seed=5, device=CPU)
    with torch.random.fork_rng():
        videos = [str(tmp_path / "p.mp4")]
        recorded = ppo_puffer_async.evaluate(policy, args, None, episodes=2, seed=5, device=CPU, videos=videos)
    for key in plain:
        np.testing.assert_array_equal(plain[key], recorded[key])
    assert frames_in(str(tmp_path / "p.mp4")) == int(recorded["length"][0])


def test_recording_puffer_mpe_evaluation_changes_nothing(tmp_path):
    args = puffer_args("mpe-spread", hidden_size=16)
    policy = ppo_puffer_async.Policy((18,), gym.spaces.Discrete(5), args)  # simple_spread: 18 observations, 5 actions
    with torch.random.fork_rng():
        plain = ppo_puffer_async.evaluate(policy, args, None, episodes=2, seed=5, device=CPU)
    with torch.random.fork_rng():
        videos = [str(tmp_path / "m.mp4")]
        recorded = ppo_puffer_async.evaluate(policy, args, None, episodes=2, seed=5, device=CPU, videos=videos)
    for key in plain:
        np.testing.assert_array_equal(plain[key], recorded[key])
    assert frames_in(str(tmp_path / "m.mp4")) == int(recorded["length"][0]) == 25  # MPE's max_cycles


def test_the_tetris_frame_draws_the_board_the_piece_and_the_next_pieces():
    game = Tetris(num_envs=1, seed=0)
    game.reset(seed=0)
    board = ["." * 10] * 19 + ["##########"[:9] + "."]  # the bottom row locked but for its last cell
    game.set_position(board=board, piece="T", rot=0, row=0, col=4, upcoming=["I", "O"])
    cell = 12
    image = game.frame(cell=cell)
    assert image.shape == (22 * cell, 17 * cell, 3) and image.dtype == np.uint8

    def at(row, col):  # the centre pixel of board cell (row, col); the board starts one cell in
        return tuple(image[(row + 1) * cell + cell // 2, (col + 1) * cell + cell // 2])

    assert at(19, 0) == tuple(LOCKED) and at(19, 9) == tuple(BACKGROUND) and at(10, 5) == tuple(BACKGROUND)
    t = tuple(PIECE_COLORS[PIECE_NAMES.index("T")])
    assert at(0, 5) == at(1, 4) == at(1, 5) == at(2, 5) == t and at(0, 4) == tuple(BACKGROUND)  # T, rotation 0
    # The next piece (an I, upright) in the first box beside the board, in its own colour.
    i_color = tuple(PIECE_COLORS[PIECE_NAMES.index("I")])
    assert tuple(image[1 * cell + cell // 2, 12 * cell + cell // 2]) == i_color


def session_hparams(run_dir):
    """The run's flags as TensorBoard's HParams plugin reads them from the run's own event files."""
    events = EventAccumulator(run_dir).Reload()
    content = events.PluginTagToContent("hparams")["_hparams_/session_start_info"]
    hparams = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info.hparams
    return {
        key: value.WhichOneof("kind") and getattr(value, value.WhichOneof("kind")) for key, value in hparams.items()
    }


def test_every_script_writes_its_flags_for_the_hparams_table_and_tetris_writes_eval_lines(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a2c = a2c_cartpole.train(a2c_cartpole.Args(total_timesteps=160, learning_rate=2e-3, eval_episodes=1))
    tetris = ppo_tetris.train(
        ppo_tetris.Args(total_timesteps=128, num_envs=8, num_steps=8, num_minibatches=2, max_ticks=20, eval_episodes=2)
    )
    for result in (a2c, tetris):
        assert [p for p in os.listdir(result["run_dir"]) if os.path.isdir(os.path.join(result["run_dir"], p))] == []
    flags = session_hparams(a2c["run_dir"])
    assert flags["learning_rate"] == pytest.approx(2e-3) and flags["env_id"] == "CartPole-v1"
    assert flags["num_envs"] == 16 and flags["optimizer"] == "rmsprop"  # the env's effective defaults, filled in
    assert "resume" not in flags  # None: no value, as TensorBoard shows an unset flag
    assert session_hparams(tetris["run_dir"])["num_steps"] == 8
    scalars = EventAccumulator(tetris["run_dir"]).Reload().Tags()["scalars"]
    assert "eval/lines" in scalars and "eval/return_mean" in scalars


def test_video_and_track_flags_fail_early_in_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        a2c_cartpole.main(["--gif", "agent.gif"])
    assert (
        str(e.value)
        == "error: --gif needs --eval-checkpoint PATH (the agent to record); in training use --capture-video"
    )
    with pytest.raises(SystemExit) as e:
        ppo_puffer_async.main(["--env-id", "cartpole-novel", "--capture-video"])
    assert str(e.value) == "error: --capture-video and --gif: cartpole-novel has no frames to record; drop them"
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name in ("wandb", "imageio_ffmpeg") else real(name)
    )
    with pytest.raises(SystemExit) as e:
        ppo_tetris.main(["--track"])
    assert str(e.value) == 'error: --track needs wandb (Weights & Biases), not installed: pip install -e ".[track]"'
    with pytest.raises(SystemExit) as e:
        a2c_cartpole.main(["--capture-video"])
    assert 'not installed: pip install -e ".[video]"' in str(e.value)
    assert not os.path.exists("runs")  # nothing started


def test_track_offline_logs_the_run_and_a_resume_continues_the_same_wandb_run(tmp_path):
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "PYTHONPATH": ROOT}
    first = [sys.executable, os.path.join(ROOT, "a2c_cartpole.py"), "--total-timesteps", "800", "--eval-episodes", "1"]
    out = subprocess.run(first + ["--track"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    (checkpoint,) = glob.glob(str(tmp_path / "runs" / "*" / "a2c_cartpole.pt"))
    wandb_id = torch.load(checkpoint, weights_only=True)["wandb_id"]
    more = first[:2] + ["--resume", checkpoint, "--total-timesteps", "1600"]
    out = subprocess.run(more, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    runs = sorted(glob.glob(str(tmp_path / "wandb" / "offline-run-*")))
    assert len(runs) == 2 and all(path.endswith(f"-{wandb_id}") for path in runs)  # one W&B run, twice opened
    assert all(glob.glob(os.path.join(path, "*.wandb")) for path in runs)  # each holds its logged data
    assert torch.load(checkpoint, weights_only=True)["wandb_id"] == wandb_id
