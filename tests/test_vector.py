"""common.vector: Serial and Multiprocessing agree step for step; groups come back in turn; dead
workers, env errors and a killed learner end cleanly; idle processes sleep."""

import functools
import os
import signal
import subprocess
import sys
import textwrap
import time

import gymnasium
import numpy as np
import psutil
import pufferlib
import pufferlib.emulation
import pufferlib.vector
import pytest

from common.tetris import Tetris
from common.vector import WorkerError, make
from conftest import ROOT

CORES = psutil.cpu_count(logical=False) or 1
needs_two_cores = pytest.mark.skipif(CORES < 2, reason="two workers need two physical cores")


class Scripted(pufferlib.PufferEnv):
    """A native env of 2 agents whose observation counts its steps. `delay` seconds of sleep per step
    make it slow; `fail_at` makes step number `fail_at` raise ValueError."""

    def __init__(self, delay=0.0, fail_at=None, buf=None, seed=0):
        self.single_observation_space = gymnasium.spaces.Box(0, 1e9, (1,), np.float32)
        self.single_action_space = gymnasium.spaces.Discrete(2)
        self.num_agents = 2
        self.delay = delay
        self.fail_at = fail_at
        self.steps = 0
        super().__init__(buf)

    def reset(self, seed=None):
        self.steps = 0
        self.observations[:] = 0
        return self.observations, []

    def step(self, actions):
        self.steps += 1
        if self.steps == self.fail_at:
            raise ValueError(f"scripted failure at step {self.steps}")
        time.sleep(self.delay)
        self.observations[:] = self.steps
        return self.observations, self.rewards, self.terminals, self.truncations, []

    def close(self):
        pass


def short_cartpole():
    return gymnasium.make("CartPole-v1", max_episode_steps=5)


CARTPOLE = functools.partial(pufferlib.emulation.GymnasiumPufferEnv, env_creator=short_cartpole)
SMALL_TETRIS = dict(num_envs=8, n_rows=8, max_ticks=20, log_interval=4)


def rollout(vecenv, steps, seed=7):
    """recv/send until every group has been received `steps` times, with actions that depend only on
    (group, round), so any backend and any group order see the same inputs; return each group's list of
    (obs, rewards, terminals, truncations, infos) copies. (A busy machine can return one group many
    times in a row: that is readiness order, not a fault.)"""
    vecenv.async_reset(seed)
    seen = {g: [] for g in range(vecenv.num_groups)}
    while min(len(steps_of_group) for steps_of_group in seen.values()) < steps:
        obs, rewards, terminals, truncations, infos, agent_ids, masks = vecenv.recv()
        group = int(agent_ids[0]) // vecenv.agents_per_group
        assert np.array_equal(
            agent_ids, np.arange(group * vecenv.agents_per_group, (group + 1) * vecenv.agents_per_group)
        )
        seen[group].append((obs.copy(), rewards.copy(), terminals.copy(), truncations.copy(), infos))
        rng = np.random.default_rng([group, len(seen[group])])
        vecenv.send(rng.integers(0, vecenv.single_action_space.n, vecenv.agents_per_group))
    return seen


def assert_same(a, b):
    for group in a:
        n = min(len(a[group]), len(b[group]))
        for step_a, step_b in zip(a[group][:n], b[group][:n]):
            for x, y in zip(step_a[:4], step_b[:4]):
                np.testing.assert_array_equal(x, y)
            assert step_a[4] == step_b[4]


def gone(pid):
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("workers,groups", [(1, 1), (1, 2), (2, 2), (2, 1)])
def test_multiprocessing_matches_serial_on_tetris(workers, groups):
    if workers > CORES:
        pytest.skip("two workers need two physical cores")
    args = dict(num_envs=4, num_groups=groups, seed=3)
    with make(Tetris, [], SMALL_TETRIS, backend="Serial", **args) as serial:
        expected = rollout(serial, 60)
    with make(Tetris, [], SMALL_TETRIS, backend="Multiprocessing", num_workers=workers, **args) as multi:
        got = rollout(multi, 60)
    assert_same(expected, got)
    steps = [step for group in expected.values() for step in group]
    # The run must exercise game overs, time limits and the infos Tetris reports every 4 steps.
    assert any(s[2].any() for s in steps) and any(s[3].any() for s in steps) and any(s[4] for s in steps)


@pytest.mark.parametrize("backend,workers", [("Serial", 1), ("Multiprocessing", 2)])
def test_emulated_cartpole_matches_pufferlib_serial(backend, workers):
    """A time-limit end is followed, on the next send, by a reset observation with reward 0, exactly as
    pufferlib.vector.Serial does (which seeds object i with seed + i too)."""
    if workers > CORES:
        pytest.skip("two workers need two physical cores")
    reference = pufferlib.vector.make(CARTPOLE, backend=pufferlib.vector.Serial, num_envs=4)
    reference.async_reset(11)
    with make(CARTPOLE, backend=backend, num_envs=4, num_workers=workers, num_groups=2) as vecenv:
        got = rollout(vecenv, 12, seed=11)
    expected = {0: [], 1: []}
    for _ in range(12):
        # pufferlib-core 3.0.16 and later return teacher_actions fifth: the first four are the same in every release
        obs, rewards, terminals, truncations = reference.recv()[:4]
        for g, rows in ((0, slice(0, 2)), (1, slice(2, 4))):
            expected[g].append(
                (obs[rows].copy(), rewards[rows].copy(), terminals[rows].copy(), truncations[rows].copy(), [])
            )
        reference.send(np.concatenate([np.random.default_rng([g, len(expected[g])]).integers(0, 2, 2) for g in (0, 1)]))
    reference.close()
    assert_same(expected, got)
    steps = got[0]
    ends = [t for t, step in enumerate(steps) if step[3].any()]
    assert ends and ends[0] + 1 < len(steps)
    after = steps[ends[0] + 1]
    ended = steps[ends[0]][3]
    assert (after[1][ended] == 0).all() and not after[3][ended].any()
    assert (np.abs(after[0][ended]) <= 0.05).all()  # CartPole's reset state is uniform in [-0.05, 0.05]


@needs_two_cores
def test_seeds_differ_per_object_across_workers():
    """Object i is reset with seed + i in whichever worker it lives. (PufferLib's Multiprocessing sends
    worker w seed + w and each worker's inner Serial adds only the local index j, so object j of worker w gets
    seed + w + j: with two objects per worker, object 1 of worker 0 and object 0 of worker 1 start the same games;
    pufferlib-core 3.0.5's pufferlib/vector.py.)"""
    with make(Tetris, [], dict(num_envs=8), backend="Multiprocessing", num_envs=2, num_workers=2, seed=5) as vecenv:
        vecenv.async_reset(5)
        obs = vecenv.recv()[0]
        assert not np.array_equal(obs[:8], obs[8:])
    with make(Tetris, [], dict(num_envs=8), backend="Serial", num_envs=2, seed=5) as vecenv:
        vecenv.async_reset(5)
        np.testing.assert_array_equal(vecenv.recv()[0], obs)


@needs_two_cores
def test_round_robin_order_returns_the_groups_in_turn_whoever_is_faster():
    """Group 0, 1, 0, 1, ... even when group 0 is much slower, so a run's data (and with a fixed
    seed, its learning) does not depend on how the workers happened to be scheduled."""
    kwargs = [dict(delay=0.2), dict(delay=0.0)]  # group 0 slow, group 1 fast
    with make(Scripted, [], kwargs, "Multiprocessing", 2, 2, 2) as vecenv:
        vecenv.async_reset(0)
        groups = []
        for _ in range(6):
            groups.append(int(vecenv.recv()[5][0]) // 2)
            vecenv.send(np.zeros(2))
        assert groups == [0, 1, 0, 1, 0, 1]


def test_learner_sleeps_while_waiting():
    with make(Scripted, [], dict(delay=0.5), backend="Multiprocessing", num_envs=1) as vecenv:
        vecenv.async_reset(0)
        vecenv.recv()
        vecenv.send(np.zeros(2))
        learner = psutil.Process()
        cpu = sum(learner.cpu_times()[:2])
        vecenv.recv()
        waited = sum(learner.cpu_times()[:2]) - cpu
    assert waited < 0.1, f"the learner used {waited:.2f} s of CPU while waiting 0.5 s for its worker"


@needs_two_cores
def test_killed_worker_raises_worker_error_and_reaps_the_others():
    vecenv = make(Tetris, [], dict(num_envs=8), backend="Multiprocessing", num_envs=2, num_workers=2, num_groups=2)
    vecenv.async_reset(0)
    pids = [p.pid for p in vecenv.processes]
    victim = vecenv.processes[1].pid
    start = time.time()
    with pytest.raises(WorkerError) as error:
        for step in range(100000):
            vecenv.recv()
            vecenv.send(np.zeros(vecenv.agents_per_group))
            if step == 10:
                os.kill(victim, signal.SIGKILL)
                start = time.time()
    assert time.time() - start < 3
    assert str(error.value) == f"worker 1 (pid {victim}) was killed by SIGKILL"
    assert all(gone(pid) for pid in pids)
    with pytest.raises(RuntimeError, match="closed"):
        vecenv.recv()
    vecenv.close()  # idempotent


@pytest.mark.parametrize("workers", [1, 2])
def test_env_error_in_worker_names_the_exception(workers):
    if workers > CORES:
        pytest.skip("two workers need two physical cores")
    kwargs = [dict(), dict(fail_at=3)]
    vecenv = make(Scripted, [], kwargs, backend="Multiprocessing", num_envs=2, num_workers=workers, num_groups=2)
    vecenv.async_reset(0)
    with pytest.raises(
        WorkerError,
        match=r"worker \d \(pid \d+\): env raised ValueError: scripted failure at "
        r"step 3 at .*test_vector\.py:\d+$",
    ):
        for _ in range(10000):  # until group 1 has stepped 3 times, however often group 0 comes first
            vecenv.recv()
            vecenv.send(np.zeros(2))
    assert not any(p.is_alive() for p in vecenv.processes)


def test_env_construction_error_in_worker():
    with pytest.raises(WorkerError, match=r"worker 0 \(pid \d+\): env raised TypeError: .*bogus"):
        make(Scripted, [], [dict(), dict(bogus=1)], backend="Multiprocessing", num_envs=2)


@needs_two_cores
def test_worker_sees_eof_when_only_the_learner_held_its_pipe():
    """Worker 1 is forked after worker 0 and must not keep a copy of the learner's end of worker 0's
    command pipe, or worker 0 could never see EOF when the learner goes."""
    with make(Scripted, backend="Multiprocessing", num_envs=2, num_workers=2) as vecenv:
        vecenv._commands[0].close()
        vecenv.processes[0].join(timeout=3)
        assert vecenv.processes[0].exitcode == 0 and vecenv.processes[1].is_alive()


def test_killed_learner_leaves_no_workers():
    learner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {ROOT!r})
        from common.tetris import Tetris
        from common.vector import make
        vecenv = make(Tetris, [], dict(num_envs=8), backend="Multiprocessing", num_envs={CORES},
                      num_workers={CORES}, num_groups={CORES})
        vecenv.async_reset(0)
        print(*[p.pid for p in vecenv.processes], flush=True)
        time.sleep(60)
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        pids = [int(pid) for pid in learner.stdout.readline().split()]
        assert len(pids) == CORES and not any(gone(pid) for pid in pids)
    finally:
        learner.kill()
        learner.wait()
    deadline = time.time() + 3
    while not all(gone(pid) for pid in pids) and time.time() < deadline:
        time.sleep(0.05)
    assert all(gone(pid) for pid in pids)


def test_close_reaps_workers_and_idle_workers_sleep():
    vecenv = make(
        Tetris, [], dict(num_envs=64), backend="Multiprocessing", num_envs=CORES, num_workers=CORES, num_groups=CORES
    )
    vecenv.async_reset(0)
    for _ in range(CORES):
        vecenv.recv()  # every group done: the workers wait for commands
        vecenv.send(np.zeros(vecenv.agents_per_group))
    while any(vecenv._pending):
        vecenv._wait()
    workers = [psutil.Process(p.pid) for p in vecenv.processes]
    for worker in workers:
        worker.cpu_percent()
        worker.send_signal(signal.SIGINT)  # Ctrl-C is the learner's to handle
    time.sleep(0.5)
    assert all(worker.cpu_percent() < 10 for worker in workers)
    assert all(p.is_alive() for p in vecenv.processes)
    vecenv.close()
    assert all(p.exitcode == 0 for p in vecenv.processes)
    assert not {p.pid for p in psutil.Process().children()} & {w.pid for w in workers}


def test_protocol_errors():
    with make(Scripted, backend="Serial", num_envs=2, num_groups=2) as vecenv:
        with pytest.raises(RuntimeError, match="async_reset"):
            vecenv.recv()
        vecenv.async_reset(0)
        with pytest.raises(RuntimeError, match="recv"):
            vecenv.send(np.zeros(2))
        vecenv.recv()
        with pytest.raises(RuntimeError, match="twice"):
            vecenv.recv()
        with pytest.raises(ValueError, match="shape"):
            vecenv.send(np.zeros(4))
        vecenv.send(np.zeros(2))
        with pytest.raises(RuntimeError, match="recv"):
            vecenv.send(np.zeros(2))


@pytest.mark.parametrize(
    "kwargs,flag",
    [
        (dict(backend="Threads"), "--backend"),
        (dict(num_envs=3, num_groups=2), "--async-factor"),
        (dict(backend="Multiprocessing", num_envs=4, num_workers=CORES + 1, num_groups=1), "--num-workers"),
        (dict(backend="Multiprocessing", num_envs=6, num_workers=2, num_groups=3), "--num-workers"),
        (dict(backend="Multiprocessing", num_envs=3, num_workers=2, num_groups=1), "--num-envs"),
    ],
)
def test_bad_sizes_name_the_flag(kwargs, flag):
    if kwargs.get("num_workers", 1) == 2 and CORES < 2:
        pytest.skip("needs two physical cores to get past the core check")
    with pytest.raises(ValueError, match=flag):
        make(Scripted, **kwargs)
