"""Throughput of ppo_puffer_async.py: rollout SPS by backend and async factor, and whole-run training SPS.

    python benchmarks/bench_ppo_puffer_async.py                 # both parts, Tetris and mpe-spread
    python benchmarks/bench_ppo_puffer_async.py --part rollout --envs mpe-spread
    python benchmarks/bench_ppo_puffer_async.py --part lstm

Part "rollout": the script's own `rollout()` (recv -> policy -> store -> send, the same MLP policy,
untrained) filling the same buffer, for the synchronous in-process loop (--async-factor 1 --backend
Serial) and the worker backends; agent steps per second, and the ratio to the Serial loop, in one run.
Part "train": whole runs of `train()` (rollout + update), training SPS, in one run: mpe-spread async
(its default) vs the Serial loop; Tetris at ppo_tetris.py's batch and minibatch sizes and its 256-wide
network (our default is 128 wide) vs ppo_tetris.py.
Part "lstm": the cost of --lstm, training SPS on Tetris at the default flags with and without it.
Each row runs `--repeats` times interleaved and reports the median, since the machine is noisy.

The default run (no flags) also writes benchmarks/results/puffer-throughput.json (docs/ppo_puffer_async.md's table).
"""

import argparse
import os
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ppo_puffer_async  # noqa: E402
import ppo_tetris  # noqa: E402
import results as results_module  # noqa: E402
from common import presets  # noqa: E402
from common.puffer_envs import make_puffer_vecenv  # noqa: E402

ROLLOUT_ROWS = {  # (label, backend, async_factor, num_workers)
    "tetris": [
        ("Serial loop (K=1)", "Serial", 1, 1),
        ("Multiprocessing sync (W=1, K=1)", "Multiprocessing", 1, 1),
        ("Multiprocessing async (W=1, K=2)", "Multiprocessing", 2, 1),
        ("Multiprocessing async (W=2, K=2)", "Multiprocessing", 2, 2),
    ],
    "mpe-spread": [
        ("Serial loop (K=1)", "Serial", 1, 1),
        ("Multiprocessing sync (W=2, K=1)", "Multiprocessing", 1, 2),
        ("Multiprocessing async (W=1, K=2)", "Multiprocessing", 2, 1),
        ("Multiprocessing async (W=2, K=2, default)", "Multiprocessing", 2, 2),
    ],
}
NUM_ENVS = {"tetris": 1024, "mpe-spread": 64}


def rollout_sps(env_id, backend, async_factor, num_workers, seconds):
    # Tetris with ppo_tetris.py's 256-wide network, so the rows compare with its figures
    args = ppo_puffer_async.Args(
        **{**presets.ppo_puffer_async(env_id), **(dict(hidden_size=256) if env_id == "tetris" else {})}
    )
    vecenv = make_puffer_vecenv(
        env_id, NUM_ENVS[env_id], 1, backend=backend, num_workers=num_workers, async_factor=async_factor
    )
    try:
        obs_shape = vecenv.single_observation_space.shape
        policy = ppo_puffer_async.Policy(obs_shape, vecenv.single_action_space, args)
        experience = ppo_puffer_async.Experience(
            vecenv.num_agents, args.horizon, vecenv.num_agents, obs_shape, torch.device("cpu")
        )
        stats = ppo_puffer_async.EpisodeStats(vecenv.num_agents)
        timers = dict(env=0.0, inference=0.0)
        vecenv.async_reset(1)
        flags = dict(obs_rms=None, reward_scaler=None, gamma=0.99, reward_scale=1.0, reward_clamp=None)
        flags.update(device=torch.device("cpu"), timers=timers)
        ppo_puffer_async.rollout(vecenv, policy, experience, stats, **flags)  # warm-up
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            ppo_puffer_async.rollout(vecenv, policy, experience, stats, **flags)
            steps += experience.segments * experience.horizon
        return steps / (time.perf_counter() - start)
    finally:
        vecenv.close()


def train_sps(script, argv):
    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            if script == "ours":
                args = ppo_puffer_async.Args(**{**presets.ppo_puffer_async(argv.get("env_id", "tetris")), **argv})
                return ppo_puffer_async.train(args)["sps"]
            return ppo_tetris.train(ppo_tetris.Args(**argv))["sps"]
        finally:
            os.chdir(cwd)


def median_rows(rows, measure, repeats):
    results = {label: [] for label, *_ in rows}
    for _ in range(repeats):  # interleaved, so drift in the machine's load hits every row alike
        for label, *config in rows:
            results[label].append(measure(*config))
    return {label: float(np.median(values)) for label, values in results.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["rollout", "train", "lstm", "all"], default="all")
    parser.add_argument("--envs", nargs="+", default=["tetris", "mpe-spread"])
    parser.add_argument("--seconds", type=float, default=8.0, help="per rollout row and repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--train-updates", type=int, default=15, help="updates per whole-run row")
    opts = parser.parse_args()
    start = time.time()
    torch.set_num_threads(1)
    cells, runs = [], []
    print(f"cores: {os.cpu_count()}, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}")

    if opts.part in ("rollout", "all"):
        for env_id in opts.envs:
            rows = ROLLOUT_ROWS[env_id]
            sps = median_rows(rows, lambda *c: rollout_sps(env_id, *c, opts.seconds), opts.repeats)
            base = sps[rows[0][0]]
            print(f"\nrollout, {env_id}, {NUM_ENVS[env_id]} envs, median of {opts.repeats}:")
            print(f"| {'backend':<42} | agent steps/s | vs Serial loop |")
            part = f"rollout, {env_id} ({NUM_ENVS[env_id]} envs): agent steps/s"
            for label, value in sps.items():
                print(f"| {label:<42} | {value:13,.0f} | {value / base:13.2f}x |")
                cells.append([part, label, f"{value:,.0f}", f"{value / base:.2f}x"])
                runs.append(dict(part="rollout", env=env_id, run=label, sps=value))

    if opts.part in ("train", "lstm", "all"):
        rows = []
        if opts.part in ("lstm", "all"):
            # One torch thread, as the figures in docs/ppo_puffer_async.md were measured (Tetris's default is 2).
            tetris = dict(
                env_id="tetris", total_timesteps=opts.train_updates * 512 * 64, checkpoint_freq=0, torch_threads=1
            )
            rows += [
                ("tetris, ours, default flags (MLP)", "ours", tetris),
                ("tetris, ours, default flags --lstm", "ours", dict(tetris, lstm=True)),
            ]
        if opts.part == "lstm":
            opts.envs = []
        if "mpe-spread" in opts.envs:
            mpe = dict(env_id="mpe-spread", num_envs=128, checkpoint_freq=0)
            batch = 128 * 3 * 64
            rows += [
                (
                    "mpe-spread, ours, Serial loop",
                    "ours",
                    dict(
                        mpe, backend="Serial", async_factor=1, num_workers=1, total_timesteps=opts.train_updates * batch
                    ),
                ),
                (
                    "mpe-spread, ours, default (async W=2 K=2)",
                    "ours",
                    dict(mpe, total_timesteps=opts.train_updates * batch),
                ),
            ]
        if "tetris" in opts.envs:
            batch = 512 * 64
            rows += [
                (
                    "tetris, ppo_tetris.py (512 x 64, 8 mb, 2 epochs)",
                    "ppo_tetris",
                    dict(total_timesteps=opts.train_updates * batch, checkpoint_freq=0),
                ),
                (
                    "tetris, ours, same sizes and network",
                    "ours",
                    dict(
                        env_id="tetris",
                        hidden_size=256,
                        total_timesteps=opts.train_updates * batch,
                        checkpoint_freq=0,
                        torch_threads=1,  # as ppo_tetris.py: the same network on the same one thread
                    ),
                ),
            ]
        sps = median_rows(rows, train_sps, opts.repeats)
        print(f"\nwhole-run training SPS, {opts.train_updates} updates, median of {opts.repeats}:")
        print(f"| {'run':<50} | training SPS |")
        for label, value in sps.items():
            print(f"| {label:<50} | {value:12,.0f} |")
        labels = list(sps)
        ratios = {}
        for first, second in zip(labels[::2], labels[1::2]):
            ratios[second] = f"{sps[second] / sps[first]:.2f}x"
            print(f"ratio  {second} / {first}: {ratios[second]}")
        part = f"whole-run training SPS ({opts.train_updates} updates)"
        script_of = {label: script for label, script, _ in rows}
        for label, value in sps.items():
            # ppo_tetris.py's own speed is on its page (docs/ppo_tetris.md); here only ours against it
            shown = "" if script_of[label] == "ppo_tetris" else f"{value:,.0f}"
            cells.append([part, label, shown, ratios.get(label, "")])
            runs.append(dict(part="train", run=label, sps=value))

    default = (opts.part, opts.envs, opts.seconds) == ("all", ["tetris", "mpe-spread"], 8.0)
    if default and (opts.repeats, opts.train_updates) == (3, 15):
        notes = [
            f"Each row the median of {opts.repeats} interleaved repeats ({opts.seconds:g} s per rollout row); ratio: "
            "a rollout row's to the Serial loop of its env, a training row's to the row above it. ppo_tetris.py's "
            "own speed is on its page."
        ]
        table = dict(columns=["part", "run", "SPS", "ratio"], rows=cells, notes=notes)
        results_module.save("puffer-throughput", (time.time() - start) / 60, table=table, runs=runs)


if __name__ == "__main__":
    main()
