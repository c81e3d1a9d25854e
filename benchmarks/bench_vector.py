"""Rollout throughput of common.vector against pufferlib.vector: the env loop with an MLP forward as the
policy (torch, one thread), no training, same envs, one run per row. Prints agent steps/s and the ratio
to the first (pufferlib Serial sync) row of each env, and the CPU time all processes spent per agent step.

    python benchmarks/bench_vector.py                          # Tetris and MPE, ~5 s per row
    python benchmarks/bench_vector.py --envs mpe --seconds 2
    python benchmarks/bench_vector.py --latency                # round trip of one empty step

Sync = one group (--async-factor 1): the learner waits for every env, then runs the policy. Async = two
groups: the policy runs on one group while the other steps; ours returns the groups in turn (round-robin,
reproducible, as pufferlib's Multiprocessing does at its default, sync_traj=True: pufferlib-core 3.0.5's vector.py).
Rows with workers need as many physical cores as workers; on a shared machine the figures are noisy, so compare rows
of the same run.

The default run (no flags) also writes benchmarks/results/vector.json (docs/ppo_puffer_async.md's table).
"""

import argparse
import functools
import multiprocessing
import sys
import time
from pathlib import Path

import gymnasium
import numpy as np
import psutil
import pufferlib
import pufferlib.emulation
import pufferlib.vector
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script, package not installed
import results as results_module  # noqa: E402
from common import vector  # noqa: E402
from common.tetris import Tetris  # noqa: E402

TETRIS_GAMES = 1024
MPE_ENVS = 64


def mpe_spread():
    from mpe2 import simple_spread_v3

    return simple_spread_v3.parallel_env(N=3, max_cycles=25, continuous_actions=False)


MPE = functools.partial(pufferlib.emulation.PettingZooPufferEnv, env_creator=mpe_spread)


def policy_for(vecenv):
    """Linear(obs, 128)-ReLU-Linear(128, actions), sampled: the forward pass a small PPO agent runs."""
    obs_size = int(np.prod(vecenv.single_observation_space.shape))
    net = torch.nn.Sequential(
        torch.nn.Linear(obs_size, 128), torch.nn.ReLU(), torch.nn.Linear(128, vecenv.single_action_space.n)
    )

    @torch.inference_mode()
    def act(obs):
        logits = net(torch.from_numpy(obs).reshape(len(obs), -1))
        return torch.multinomial(logits.softmax(-1), 1).squeeze(1).numpy().astype(np.int32)

    return act


def cpu_seconds(processes):
    """User + system CPU seconds used so far by `processes` (psutil.Process)."""
    return sum(sum(process.cpu_times()[:2]) for process in processes)


def rollout_speed(vecenv, seconds):
    """recv -> policy -> send rounds for `seconds` after a short warm-up: (agent steps per second, CPU
    microseconds per agent step summed over the learner and the workers). The CPU figure is the one to
    trust on a busy machine: a backend that spins pays for it there whether or not it gets the core."""
    act = policy_for(vecenv)
    vecenv.async_reset(0)
    for _ in range(20):
        vecenv.send(act(vecenv.recv()[0]))
    processes = [psutil.Process()] + [psutil.Process(p.pid) for p in getattr(vecenv, "processes", [])]
    steps, cpu, start = 0, cpu_seconds(processes), time.perf_counter()
    while time.perf_counter() - start < seconds:
        obs, rewards, terminals, truncations, infos, agent_ids, masks = vecenv.recv()
        vecenv.send(act(obs))
        steps += len(agent_ids)
    elapsed, cpu = time.perf_counter() - start, cpu_seconds(processes) - cpu
    return steps / elapsed, cpu / steps * 1e6


def close(vecenv):
    vecenv.close()
    for process in getattr(vecenv, "processes", []):
        process.join()  # pufferlib's close() only terminates its workers


def rows(env):
    """(label, constructor) per row. pufferlib groups are its batch_size in env objects."""
    if env == "tetris":
        creator, whole, half, objects = Tetris, dict(num_envs=TETRIS_GAMES), dict(num_envs=TETRIS_GAMES // 2), 2
        puffer_serial = lambda: pufferlib.vector.make(creator, env_kwargs=whole, backend=pufferlib.vector.Serial)
        ours_serial = lambda: vector.make(creator, [], whole, backend="Serial")
        ours_mp_sync_1 = lambda: vector.make(creator, [], whole, backend="Multiprocessing")
        ours = lambda w, k: vector.make(
            creator, [], half, backend="Multiprocessing", num_envs=2, num_workers=w, num_groups=k
        )
    else:
        creator, whole, half, objects = MPE, {}, {}, MPE_ENVS
        puffer_serial = lambda: pufferlib.vector.make(creator, backend=pufferlib.vector.Serial, num_envs=MPE_ENVS)
        ours_serial = lambda: vector.make(creator, backend="Serial", num_envs=MPE_ENVS)
        ours_mp_sync_1 = lambda: vector.make(creator, backend="Multiprocessing", num_envs=MPE_ENVS)
        ours = lambda w, k: vector.make(
            creator, backend="Multiprocessing", num_envs=MPE_ENVS, num_workers=w, num_groups=k
        )
    puffer_async = lambda: pufferlib.vector.make(
        creator,
        env_kwargs=half,
        backend=pufferlib.vector.Multiprocessing,
        num_envs=objects,
        num_workers=2,
        batch_size=objects // 2,
    )
    return [
        ("pufferlib Serial, sync", puffer_serial),
        ("pufferlib Multiprocessing, 2 workers, async (2 groups)", puffer_async),
        ("ours Serial, sync", ours_serial),
        ("ours Multiprocessing, 1 worker, sync", ours_mp_sync_1),
        ("ours Multiprocessing, 2 workers, sync", lambda: ours(2, 1)),
        ("ours Multiprocessing, 1 worker, async (2 groups)", lambda: ours(1, 2)),
        ("ours Multiprocessing, 2 workers, async (2 groups)", lambda: ours(2, 2)),
    ]


class Noop(pufferlib.PufferEnv):
    """One agent, nothing to compute: a step costs only the round trip."""

    def __init__(self, buf=None, seed=0):
        self.single_observation_space = gymnasium.spaces.Box(0, 1, (1,), np.float32)
        self.single_action_space = gymnasium.spaces.Discrete(2)
        self.num_agents = 1
        super().__init__(buf)

    def reset(self, seed=None):
        return self.observations, []

    def step(self, actions):
        return self.observations, self.rewards, self.terminals, self.truncations, []

    def close(self):
        pass


def _echo_pipe(connection):
    while connection.recv_bytes():
        connection.send_bytes(b"x")


def _echo_semaphore(ping, pong, rounds):
    for _ in range(rounds):
        ping.acquire()
        pong.release()


def latency(seconds):
    """Microseconds per round trip: our worker stepping a no-op env, and the bare primitives it could
    block on (a pipe, as used; a POSIX semaphore, which cannot be waited on together with the workers'
    process sentinels)."""
    context = multiprocessing.get_context("fork")
    with vector.make(Noop, backend="Multiprocessing", num_envs=1) as vecenv:
        vecenv.async_reset(0)
        actions = np.zeros(1, dtype=np.int32)
        rounds, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            vecenv.recv()
            vecenv.send(actions)
            rounds += 1
        yield "common.vector step round trip", (time.perf_counter() - start) / rounds

    ours, theirs = context.Pipe()
    echo = context.Process(target=_echo_pipe, args=(theirs,), daemon=True)
    echo.start()
    rounds, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        ours.send_bytes(b"x")
        ours.recv_bytes()
        rounds += 1
    yield "bare Pipe send_bytes/recv_bytes", (time.perf_counter() - start) / rounds
    ours.send_bytes(b"")
    echo.join()

    ping, pong, rounds = context.Semaphore(0), context.Semaphore(0), 20000
    echo = context.Process(target=_echo_semaphore, args=(ping, pong, rounds), daemon=True)
    echo.start()
    start = time.perf_counter()
    for _ in range(rounds):
        ping.release()
        pong.acquire()
    yield "bare Semaphore release/acquire", (time.perf_counter() - start) / rounds
    echo.join()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="timed seconds per row")
    parser.add_argument("--envs", nargs="+", choices=["tetris", "mpe"], default=["tetris", "mpe"])
    parser.add_argument("--latency", action="store_true", help="also time one empty step's round trip")
    args = parser.parse_args()
    start = time.time()
    torch.set_num_threads(1)
    cells, runs = [], []
    for env in args.envs:
        title = f"Tetris, {TETRIS_GAMES} games" if env == "tetris" else f"MPE simple_spread, {MPE_ENVS} envs x 3 agents"
        print(f"\n{title}, MLP policy, {args.seconds:g} s per row")
        print(f"  {'':<52} {'steps/s':>10} {'ratio':>6} {'CPU us/step':>12}")
        baseline = None
        for label, build in rows(env):
            vecenv = build()
            try:
                sps, cpu_per_step = rollout_speed(vecenv, args.seconds)
            finally:
                close(vecenv)
            baseline = baseline or sps
            print(f"  {label:<52} {sps:>10,.0f} {sps / baseline:5.2f}x {cpu_per_step:>12.2f}", flush=True)
            cells.append([title, label, f"{sps:,.0f}", f"{sps / baseline:.2f}x", f"{cpu_per_step:.2f}"])
            runs.append(dict(env=env, backend=label, sps=sps, cpu_us_per_step=cpu_per_step))
    if args.latency:
        print("\nround trip, microseconds")
        for label, seconds in latency(min(args.seconds, 2.0)):
            print(f"  {label:<52} {seconds * 1e6:8.1f}")
    if args.seconds == 5.0 and args.envs == ["tetris", "mpe"] and not args.latency:
        columns = ["env", "vector env", "agent steps/s", "vs pufferlib Serial", "CPU us per agent step"]
        notes = [f"MLP policy (torch, one thread), no training; one run of {args.seconds:g} s per row."]
        table = dict(columns=columns, rows=cells, notes=notes)
        results_module.save("vector", (time.time() - start) / 60, table=table, runs=runs)


if __name__ == "__main__":
    main()
