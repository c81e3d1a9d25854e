"""What watching and tracking cost: --capture-video per evaluation, and --track's training SPS.

    pip install -e ".[video,track]"
    python benchmarks/bench_watch.py            # ~2 minutes on 2 cores; run it on a quiet machine

Videos: one evaluation played with and without recording its first episode (the same episodes: recording changes
nothing that is played), for Acrobot-v1 (classic control, drawn by pygame) and HalfCheetah-v5 (MuJoCo, 320x240)
through a2c_cartpole.py's evaluate (an untrained agent: its episodes then last 500 and 1,000 steps), and for
Tetris through ppo_tetris.py's play; the extra seconds, in all and per recorded frame. --track: a2c_cartpole.py's
default CartPole run (100k steps) with and without --track (WANDB_MODE=offline), one after the other; training
SPS as the script prints it.

Every run (it takes no flags) also writes benchmarks/results/watch-costs.json (docs/watch_and_track.md's table).
"""

import argparse
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
import results as results_module  # noqa: E402
from common import presets  # noqa: E402
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
    row = [name, str(frames), f"{plain_seconds:.2f} s", f"{video_seconds:.2f} s", f"+{extra:.2f} s"]
    row.append(f"{1000 * extra / frames:.1f} ms")
    print("| " + " | ".join(row) + " |", flush=True)
    return row, dict(env=name, frames=frames, seconds=plain_seconds, seconds_with_video=video_seconds)


def training_sps(extra_flags, directory):
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    command = [sys.executable, os.path.join(ROOT, "a2c_cartpole.py"), *extra_flags]
    out = subprocess.run(command, cwd=directory, env=env, capture_output=True, text=True, check=True)
    return float(re.search(r"^done: .*SPS ([\d,]+)", out.stdout, re.M).group(1).replace(",", ""))


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    start = time.time()
    torch.set_num_threads(1)
    rows, runs = [], []
    with tempfile.TemporaryDirectory() as directory:
        print("| env | frames | evaluation | with --capture-video | extra | per frame |\n|---|---|---|---|---|---|")
        for env_id, obs_dim, space in [
            ("Acrobot-v1", 6, a2c_cartpole.gym.spaces.Discrete(3)),
            ("HalfCheetah-v5", 17, a2c_cartpole.gym.spaces.Box(-1, 1, (6,))),
        ]:
            torch.manual_seed(0)
            args = a2c_cartpole.Args(**presets.a2c_cartpole(env_id))  # 64 wide for both
            agent = a2c_cartpole.Agent(obs_dim, space, args)
            evaluate = lambda videos: a2c_cartpole.evaluate(
                agent, args, None, episodes=10, seed=1, device=CPU, videos=videos
            )
            row, run = video_cost(env_id, evaluate, directory)
            rows.append(["--capture-video", *row])
            runs.append(run)
        torch.manual_seed(0)
        agent = ppo_tetris.Agent(Tetris(num_envs=1).single_observation_space.shape[0], 7)
        row, run = video_cost("Tetris", lambda videos: ppo_tetris.play(agent, 10, 1, 10_000, CPU, videos), directory)
        rows.append(["--capture-video", *row])
        runs.append(run)

        plain = training_sps([], directory)
        tracked = training_sps(["--track"], directory)
        print(
            f"\na2c_cartpole.py default run: {plain:,.0f} SPS, with --track (offline) {tracked:,.0f} SPS "
            f"({tracked / plain:.2f}x)"
        )
    label = "a2c_cartpole.py default run (CartPole-v1, 100k steps), training SPS"
    rows.append(["--track (offline)", label, "", f"{plain:,.0f}", f"{tracked:,.0f}", f"{tracked / plain:.2f}x", ""])
    runs.append(dict(env="a2c_cartpole.py default run", sps=plain, sps_with_track=tracked))
    columns = ["option", "env / run", "frames", "without it", "with it", "extra (--track: ratio)", "per frame"]
    notes = [
        "Videos: one evaluation of 10 episodes by an untrained agent (one torch thread), its first episode recorded; "
        "--track: WANDB_MODE=offline, the two runs one after the other."
    ]
    table = dict(columns=columns, rows=rows, notes=notes)
    results_module.save("watch-costs", (time.time() - start) / 60, table=table, runs=runs)


if __name__ == "__main__":
    main()
