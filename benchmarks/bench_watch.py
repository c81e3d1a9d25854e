"""What watching and tracking cost: --capture-video per evaluation, and --track's training SPS.

    pip install -e ".[video,track]"
    python benchmarks/bench_watch.py            # ~2 minutes on 2 cores; run it on a quiet machine

Videos: one evaluation played with and without recording its first episode (the same episodes: recording changes
nothing that is played), for Acrobot-v1 (classic control, drawn by pygame) and HalfCheetah-v5 (MuJoCo, 320x240)
through a2c_cartpole.py's evaluate (an untrained agent: its episodes then last 500 and 1,000 steps), and for
Tetris through ppo_tetris.py's play; the extra seconds, in all and per recorded frame. --track: a2c_cartpole.py's
default CartPole run (100k steps) with and without --track (WANDB_MODE=offline), one after the other; training
SPS as the script prints it.
"""

import os
import re
import subprocess
import sys
import tempfile
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import a2c_cartpole  # noqa: E402
import ppo_tetris  # noqa: E402
from common.tetris import Tetris  # noqa: E402

CPU = torch.device("cpu")


def timed(play, videos):
    start = time.perf_counter()
    stats = play(videos)
    return time.perf_counter() - start, stats


def video_cost(name, play, directory):
    plain_seconds, _ = timed(play, [])
    video_seconds, stats = timed(play, [os.path.join(directory, f"{name}.mp4")])
    frames = int(stats["length"][0])
    extra = video_seconds - plain_seconds
    print(
        f"| {name} | {frames} | {plain_seconds:.2f} s | {video_seconds:.2f} s | +{extra:.2f} s | "
        f"{1000 * extra / frames:.1f} ms |",
        flush=True,
    )


def training_sps(extra_flags, directory):
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    command = [sys.executable, os.path.join(ROOT, "a2c_cartpole.py"), *extra_flags]
    out = subprocess.run(command, cwd=directory, env=env, capture_output=True, text=True, check=True)
    return float(re.search(r"^done: .*SPS ([\d,]+)", out.stdout, re.M).group(1).replace(",", ""))


def main():
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as directory:
        print("| env | frames | evaluation | with --capture-video | extra | per frame |\n|---|---|---|---|---|---|")
        for env_id, obs_dim, space in [
            ("Acrobot-v1", 6, a2c_cartpole.gym.spaces.Discrete(3)),
            ("HalfCheetah-v5", 17, a2c_cartpole.gym.spaces.Box(-1, 1, (6,))),
        ]:
            torch.manual_seed(0)
            agent = a2c_cartpole.Agent(obs_dim, space, 64)
            evaluate = a2c_cartpole.evaluate
            video_cost(env_id, lambda videos: evaluate(agent, env_id, None, 10, 1, CPU, videos), directory)
        torch.manual_seed(0)
        agent = ppo_tetris.Agent(Tetris(num_envs=1).single_observation_space.shape[0], 7)
        video_cost("Tetris", lambda videos: ppo_tetris.play(agent, 10, 1, 10_000, CPU, videos), directory)

        plain = training_sps([], directory)
        tracked = training_sps(["--track"], directory)
        print(f"\na2c_cartpole.py default run: {plain:,.0f} SPS, with --track (offline) {tracked:,.0f} SPS "
              f"({tracked / plain:.2f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
