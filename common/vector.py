"""Vector envs with PufferLib's protocol (`async_reset`, `recv`, `send`, shared buffers written in place by
the envs) whose idle side sleeps instead of spinning, and whose workers cannot outlive the learner.

    vecenv = make(env_creators, env_args, env_kwargs, backend="Multiprocessing",
                  num_envs=E, num_workers=W, num_groups=K, seed=S)
    vecenv.async_reset(S)
    while training:
        obs, rewards, terminals, truncations, infos, agent_ids, masks = vecenv.recv()  # one group
        vecenv.send(policy(obs))                                                         # that group

Why not `pufferlib.vector.Multiprocessing` (pufferlib-core 3.0.5's pufferlib/vector.py): its workers and its
`recv()` poll shared flags in a loop, so two workers plus the learner are three busy processes; on a 2-core machine
async then loses to sync. It also waits forever on a worker that died, and its workers outlive a learner killed with
SIGKILL. Here a worker blocks on its command pipe, the learner blocks on the reply pipes and the workers' process
sentinels (one `select`), so every process uses a core only while it has work, and a dead worker wakes the learner
at once.

Layout. E env objects (each a `pufferlib.PufferEnv`, or an object with its interface) of A agents
each; object i owns agent rows [i*A, (i+1)*A) of every buffer. K groups of E/K consecutive objects: `recv`
returns one group whose step is done, `send` starts that group's next step, so the learner can run the
policy on one group while another steps (double buffering when K = 2). W workers own E/W consecutive
objects each: either each worker hosts K/W whole groups and steps them in the order they were sent, or
each group spans W/K whole workers.

Step semantics are exactly `pufferlib.vector.Serial.send`'s, per object: `env.step(actions)`, or
`env.reset()` when the object says `done`. The project's env objects never do (common/tetris.py,
common/puffer_envs.py): they reset their own agents in the step that ends an episode.
"""

import collections
import ctypes
import multiprocessing
import os
import pickle
import selectors
import signal
import struct
import sys
import threading
import traceback

import numpy as np
import psutil
import pufferlib
import pufferlib.spaces

# Commands to a worker: (op, group, seed), 11 bytes, so the hot path pickles nothing.
STEP, RESET, RESET_SEEDED, CLOSE = range(4)
COMMAND = struct.Struct("<Bhq")
# A worker's reply: b"" (done, no infos), a pickled list of info dicts, or a pickled str (its error).

# Seconds close() gives workers to exit on their own before it terminates them.
CLOSE_TIMEOUT = 2.0


class WorkerError(ConnectionError):
    """A worker process died or one of its envs raised: the connection to it is lost; the vecenv is closed and its
    workers reaped."""

    env_worker = True  # what tells it from the error a lost torchrun rank raises (run.lost_error)


def make(
    env_creators,
    env_args=None,
    env_kwargs=None,
    backend="Serial",
    num_envs=1,
    num_workers=1,
    num_groups=1,
    seed=0,
):
    """A `Serial` (in this process) or `Multiprocessing` vecenv of `num_envs` env objects in `num_groups`
    groups. `env_creators`, `env_args`, `env_kwargs` are lists with one entry per object, or a single
    callable / args list / kwargs dict used for all; object i is built as
    `env_creators[i](*env_args[i], buf=views of its rows, seed=seed + i, **env_kwargs[i])`.
    `num_workers` is ignored by Serial. recv() returns the groups in turn, 0, 1, ..., K-1, 0, ... (round-robin:
    the same data every run, whatever the workers' timing; pufferlib.vector.Multiprocessing's default order too,
    sync_traj=True, the only one pufferlib.vector.make accepts)."""
    env_creators, env_args, env_kwargs = _per_object(env_creators, env_args, env_kwargs, num_envs)
    if backend not in ("Serial", "Multiprocessing"):
        raise ValueError(f"--backend must be Serial or Multiprocessing (got {backend!r})")
    if num_envs < 1 or num_groups < 1:
        raise ValueError(f"--num-envs and --async-factor must be at least 1 (got {num_envs}, {num_groups})")
    if num_envs % num_groups:
        raise ValueError(
            f"--num-envs {num_envs} must be divisible by --async-factor {num_groups} "
            "(the envs are split into that many equal groups)"
        )
    if backend == "Serial":
        return Serial(env_creators, env_args, env_kwargs, num_envs, num_groups, seed)
    cores = psutil.cpu_count(logical=False) or 1
    if not 1 <= num_workers <= num_envs:
        raise ValueError(f"--num-workers must be between 1 and --num-envs {num_envs} (got {num_workers})")
    if num_workers > cores:
        raise ValueError(
            f"--num-workers {num_workers} exceeds the {cores} physical CPU cores: use at most "
            f"{cores}, or --backend Serial"
        )
    if num_groups % num_workers and num_workers % num_groups:
        raise ValueError(
            f"--async-factor {num_groups} and --num-workers {num_workers} must divide one another "
            "(each worker hosts whole groups, or each group spans whole workers)"
        )
    if num_envs % num_workers:
        raise ValueError(f"--num-envs {num_envs} must be divisible by --num-workers {num_workers}")
    return Multiprocessing(env_creators, env_args, env_kwargs, num_envs, num_workers, num_groups, seed)


def _per_object(env_creators, env_args, env_kwargs, num_envs):
    """Broadcast a single creator / args list / kwargs dict to `num_envs` objects. An args list counts as
    per-object when it has `num_envs` entries that are all lists or tuples."""
    if callable(env_creators):
        env_creators = [env_creators] * num_envs
    env_args = [] if env_args is None else env_args
    if not (len(env_args) == num_envs and all(isinstance(a, (list, tuple)) for a in env_args)):
        env_args = [env_args] * num_envs
    env_kwargs = {} if env_kwargs is None else env_kwargs
    if isinstance(env_kwargs, dict):
        env_kwargs = [env_kwargs] * num_envs
    if not len(env_creators) == len(env_args) == len(env_kwargs) == num_envs:
        raise ValueError(
            f"--num-envs {num_envs}: got {len(env_creators)} env creators, {len(env_args)} args "
            f"lists and {len(env_kwargs)} kwargs dicts; give one per env object, or a single one"
        )
    return env_creators, env_args, env_kwargs


class _VecEnv:
    """Buffers, groups and the recv/send protocol; subclasses start a group's reset or step (`_start`) and
    wait for replies (`_wait`)."""

    def __init__(self, env_creators, env_args, env_kwargs, num_envs, num_groups, seed, allocate):
        # A driver env in this process gives the spaces and the agent count before the buffers exist.
        self.driver_env = env_creators[0](*env_args[0], **env_kwargs[0])
        self.single_observation_space = self.driver_env.single_observation_space
        self.single_action_space = self.driver_env.single_action_space
        self.agents_per_env = self.driver_env.num_agents
        self.num_environments = num_envs
        self.num_agents = num_envs * self.agents_per_env
        self.num_groups = num_groups
        self.agents_per_group = self.num_agents // num_groups
        self.envs_per_group = num_envs // num_groups
        self.action_space = pufferlib.spaces.joint_space(self.single_action_space, self.agents_per_group)
        self.observation_space = pufferlib.spaces.joint_space(self.single_observation_space, self.agents_per_group)
        self.agent_ids = np.arange(self.num_agents, dtype=np.int64)

        # Integer actions are int32, as in pufferlib.set_buffers; envs index with them.
        atn = self.single_action_space
        atn_dtype = atn.dtype if isinstance(atn, pufferlib.spaces.Box) else np.int32
        obs = self.single_observation_space
        n = self.num_agents
        self.observations = allocate((n, *obs.shape), obs.dtype)
        self.rewards = allocate((n,), np.float32)
        self.terminals = allocate((n,), bool)
        self.truncations = allocate((n,), bool)
        self.masks = allocate((n,), bool)
        self.masks[:] = True
        self.actions = allocate((n, *atn.shape), atn_dtype)
        self._seed = seed  # object i is built with seed + i

        self._pending = [0] * num_groups  # replies still to come per group; > 0 means in flight
        self._ready = collections.deque()  # groups whose step is done and that recv() has not returned yet
        self._next = 0  # the group recv() returns next (round-robin)
        self._infos = [[] for _ in range(num_groups)]
        self._held = None  # the group returned by recv() and waiting for send()
        self._closed = False

    def _buffers(self, index):
        """Views of env object `index`'s agent rows, the `buf` it is built with."""
        rows = slice(index * self.agents_per_env, (index + 1) * self.agents_per_env)
        return dict(
            observations=self.observations[rows],
            rewards=self.rewards[rows],
            terminals=self.terminals[rows],
            truncations=self.truncations[rows],
            masks=self.masks[rows],
            actions=self.actions[rows],
            # pufferlib-core 3.0.16 and later: set_buffers() reads this too (supervisor policies' actions, in
            # pufferlib/pufferlib.py); nothing here writes or reads it, so each object gets a private array.
            teacher_actions=np.zeros_like(self.actions[rows]),
        )

    @property
    def game_over(self):
        """Which agents' last step ended a whole game (the episode accounting the logs need): here every episode is
        a game. (common/atari.py's vecenv, whose lost life ends the learner's episode, keeps its own.)"""
        return self.terminals | self.truncations

    def _rows(self, group):
        return slice(group * self.agents_per_group, (group + 1) * self.agents_per_group)

    def _check_open(self):
        if self._closed:
            raise RuntimeError("the vecenv is closed")

    def async_reset(self, seed=None):
        """Reset every env object, object i with `seed + i` (None: no reseed). Steps still in flight are
        finished and their results dropped."""
        self._check_open()
        while any(self._pending):
            self._wait()
        self._ready.clear()
        self._infos = [[] for _ in range(self.num_groups)]
        self._held = None
        self._next = 0
        for group in range(self.num_groups):
            self._start(group, RESET if seed is None else RESET_SEEDED, 0 if seed is None else seed)

    def recv(self):
        """(observations, rewards, terminals, truncations, infos, agent_ids, masks) of one group whose step
        or reset is done (the next in turn, waited for if need be): views into the shared buffers, valid until that
        group is sent again. infos is the list of info dicts the group's env objects returned as lists."""
        self._check_open()
        if self._held is not None:
            raise RuntimeError(f"recv() called twice: send() the actions for group {self._held} first")
        while self._next not in self._ready:
            if not self._pending[self._next]:
                raise RuntimeError("recv() with no group in flight: call async_reset() first")
            self._wait()
        group = self._next
        self._held = group
        self._ready.remove(group)
        self._next = (group + 1) % self.num_groups
        infos = self._infos[group]
        self._infos[group] = []
        rows = self._rows(group)
        return (
            self.observations[rows],
            self.rewards[rows],
            self.terminals[rows],
            self.truncations[rows],
            infos,
            self.agent_ids[rows],
            self.masks[rows],
        )

    def send(self, actions):
        """Actions (agents_per_group, ...) for the group last returned by recv(); starts its step."""
        self._check_open()
        if self._held is None:
            raise RuntimeError("send() without a group to send to: call recv() first, once per send()")
        rows = self._rows(self._held)
        actions = np.asarray(actions)
        if actions.shape != self.actions[rows].shape:
            raise ValueError(
                f"send() expects actions of shape {self.actions[rows].shape} for one group (got {actions.shape})"
            )
        self.actions[rows] = actions
        group = self._held
        self._held = None
        self._start(group, STEP, 0)

    def reset(self, seed=None):
        """Synchronous use, as pufferlib.vector's reset(): (observations, infos) of all agents (one group)."""
        self._check_one_group("reset")
        self.async_reset(seed)
        obs, _, _, _, infos, _, _ = self.recv()
        return obs, infos

    def step(self, actions):
        """Synchronous use, as pufferlib.vector's step(): (observations, rewards, terminals, truncations,
        infos) of all agents (one group)."""
        self._check_one_group("step")
        self.send(actions)
        obs, rewards, terminals, truncations, infos, _, _ = self.recv()
        return obs, rewards, terminals, truncations, infos

    def _check_one_group(self, name):
        if self.num_groups != 1:
            raise RuntimeError(f"{name}() steps all envs at once: use recv()/send() with {self.num_groups} groups")

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


def _check_env(env, index, buf, driver):
    """An env object must have the driver's spaces and agent count and write into the `buf` it was given
    (an env that ignores `buf` would leave the learner reading zeros)."""
    if (
        env.single_observation_space != driver.single_observation_space
        or env.single_action_space != driver.single_action_space
        or env.num_agents != driver.num_agents
    ):
        raise ValueError(f"env object {index} has different spaces or num_agents than env object 0")
    if not np.shares_memory(env.observations, buf["observations"]):
        raise ValueError(f"env object {index} does not write into the buffers given to it as buf=")


def _reset_objects(envs, op, seed):
    """Reset `envs` [(global index, env)], object i with seed + i when `op` is RESET_SEEDED."""
    infos = []
    for index, env in envs:
        _, info = env.reset() if op == RESET else env.reset(seed=seed + index)
        if isinstance(info, list):
            infos.extend(info)
    return infos


def _step_objects(envs):
    """Step `envs` [(global index, env)] on the actions in their buffers, as pufferlib.vector.Serial does.
    Only list-valued infos (PufferEnv's convention, which the project's env objects follow) are kept: an
    env returning a dict every step would cost a pickle per step; learners compute episode returns themselves."""
    infos = []
    for _, env in envs:
        if env.done:
            _, info = env.reset()
        else:
            *_, info = env.step(env.actions)
        if isinstance(info, list):
            infos.extend(info)
    return infos


class Serial(_VecEnv):
    """All env objects in this process; `send` steps the group right away, so groups come back in turn."""

    def __init__(self, env_creators, env_args, env_kwargs, num_envs, num_groups, seed):
        super().__init__(
            env_creators,
            env_args,
            env_kwargs,
            num_envs,
            num_groups,
            seed,
            allocate=lambda shape, dtype: np.zeros(shape, dtype),
        )
        driver = self.driver_env
        self.envs = []
        for i in range(num_envs):
            buf = self._buffers(i)
            env = env_creators[i](*env_args[i], buf=buf, seed=None if seed is None else seed + i, **env_kwargs[i])
            _check_env(env, i, buf, driver)
            self.envs.append(env)
        driver.close()
        self.driver_env = self.envs[0]
        self.processes = []
        self.num_workers = 0  # no worker processes; make()'s num_workers is ignored
        per = self.envs_per_group
        self._groups = [list(enumerate(self.envs))[g * per : (g + 1) * per] for g in range(num_groups)]

    def _start(self, group, op, seed):
        objects = self._groups[group]
        self._infos[group] = _step_objects(objects) if op == STEP else _reset_objects(objects, op, seed)
        self._ready.append(group)

    def close(self):
        if not self._closed:
            self._closed = True
            for env in self.envs:
                env.close()


def _shared_array(shape, dtype):
    """A zeroed numpy array in shared memory, seen by forked workers."""
    raw = multiprocessing.RawArray("b", max(1, int(np.prod(shape)) * np.dtype(dtype).itemsize))
    return np.frombuffer(raw, dtype=dtype, count=int(np.prod(shape))).reshape(shape)


def _die_with_parent(parent_pid):
    """Ask Linux to SIGKILL this process when the learner dies (even by SIGKILL, where no cleanup runs),
    and exit now if it died before we asked. On other OSes the command pipe's EOF ends the worker."""
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(1)


def _worker(parent_pid, make_objects, commands, replies, learner_ends):
    """A worker process: build its env objects, then block on `commands` and answer each on `replies`."""
    # Ctrl-C reaches the whole process group; the learner handles it, saves, then closes us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent_pid)
    # A forked child holds copies of the learner's pipe ends (its own and earlier workers'); closing them
    # lets EOF tell every worker that the learner is gone.
    for end in learner_ends:
        end.close()
    envs = None
    try:
        envs = make_objects()
        replies.send_bytes(b"")
        while True:
            try:
                op, group, seed = COMMAND.unpack(commands.recv_bytes())
            except EOFError:  # the learner is gone
                return
            if op == CLOSE:
                return
            infos = _step_objects(envs[group]) if op == STEP else _reset_objects(envs[group], op, seed)
            replies.send_bytes(pickle.dumps(infos) if infos else b"")
    except (BrokenPipeError, ConnectionResetError):  # the learner is gone; nobody to tell
        return
    except BaseException as e:
        frame = traceback.extract_tb(e.__traceback__)[-1]
        try:
            replies.send_bytes(pickle.dumps(f"env raised {type(e).__name__}: {e} at {frame.filename}:{frame.lineno}"))
        except OSError:
            pass
        raise SystemExit(1)
    finally:
        if envs is not None:
            for objects in envs.values():
                for _, env in objects:
                    env.close()


class Multiprocessing(_VecEnv):
    """Env objects in `num_workers` worker processes writing into shared memory; see the module docstring.

    `processes` are the workers (multiprocessing.Process). A worker that dies or whose env raises makes
    the next recv()/send() close the vecenv and raise WorkerError naming the worker and the cause.
    Build it on a thread that lives as long as the learner (the main thread): Linux's parent-death
    signal fires when the thread that forked a worker exits.
    """

    def __init__(self, env_creators, env_args, env_kwargs, num_envs, num_workers, num_groups, seed):
        super().__init__(env_creators, env_args, env_kwargs, num_envs, num_groups, seed, allocate=_shared_array)
        self.num_workers = num_workers
        per_worker = num_envs // num_workers
        per_group = num_envs // num_groups
        # The workers each group is on; each worker owns objects [w * per_worker, (w + 1) * per_worker).
        self._group_workers = [
            sorted({i // per_worker for i in range(g * per_group, (g + 1) * per_group)}) for g in range(num_groups)
        ]
        self._outstanding = [collections.deque() for _ in range(num_workers)]  # groups sent, FIFO per worker
        self._infos_by_worker = [[] for _ in range(num_groups)]  # (worker, infos) of a group's replies so far

        # fork starts a worker in milliseconds and hands it the shared arrays, views and creators as they
        # are; spawn would pickle the views into private copies.
        if "fork" not in multiprocessing.get_all_start_methods():
            raise ValueError("--backend Multiprocessing needs the fork start method (Linux, macOS); use Serial")
        context = multiprocessing.get_context("fork")
        self.processes = []
        self._commands = []
        self._replies = []
        parent_pid = os.getpid()
        for w in range(num_workers):
            objects = range(w * per_worker, (w + 1) * per_worker)
            spec = [(i, env_creators[i], env_args[i], env_kwargs[i]) for i in objects]
            make_objects = _ObjectBuilder(spec, self, per_group)
            commands, worker_commands = context.Pipe(duplex=False)[::-1]
            worker_replies, replies = context.Pipe(duplex=False)[::-1]
            self._commands.append(commands)
            self._replies.append(replies)
            learner_ends = self._commands + self._replies
            process = context.Process(
                target=_worker,
                name=f"vector-worker-{w}",
                daemon=True,
                args=(parent_pid, make_objects, worker_commands, worker_replies, learner_ends),
            )
            with _sigint_ignored():
                process.start()
            # Only the worker may hold its ends, so that its death reads as EOF here and ours as EOF there.
            worker_commands.close()
            worker_replies.close()
            self.processes.append(process)

        # One selector over the reply pipes and the process sentinels: recv() sleeps in a single select.
        self._selector = selectors.DefaultSelector()
        for w, (replies, process) in enumerate(zip(self._replies, self.processes)):
            self._selector.register(replies, selectors.EVENT_READ, (w, False))
            self._selector.register(process.sentinel, selectors.EVENT_READ, (w, True))
        # Wait for every worker to build its envs, so construction errors surface here.
        started = set()
        while len(started) < num_workers:
            started.update(w for w, _ in self._poll())

    def _start(self, group, op, seed):
        command = COMMAND.pack(op, group, seed)
        for w in self._group_workers[group]:
            try:
                self._commands[w].send_bytes(command)
            except OSError:  # the worker is gone; say why
                self._fail(w, None)
            self._outstanding[w].append(group)
            self._pending[group] += 1

    def _wait(self):
        """Sleep until some worker replies (or dies), then count its reply towards its group. Infos are
        joined in worker order once the group is complete, so they do not depend on who finished first."""
        for w, infos in self._poll():
            group = self._outstanding[w].popleft()
            self._infos_by_worker[group].append((w, infos))
            self._pending[group] -= 1
            if self._pending[group] == 0:
                parts = sorted(self._infos_by_worker[group], key=lambda part: part[0])
                self._infos_by_worker[group] = []
                self._infos[group] = [info for _, infos in parts for info in infos]
                self._ready.append(group)

    def _poll(self):
        """Block until workers reply; read one reply from each that did and return [(worker, infos)]. A
        worker that died or reported an error raises WorkerError."""
        events = self._selector.select()
        replies = []
        # Replies first: a worker whose env raised sends the error, then exits; report the error.
        for key, _ in sorted(events, key=lambda event: event[0].data[1]):
            w, is_sentinel = key.data
            try:
                message = self._replies[w].recv_bytes() if not is_sentinel or self._replies[w].poll() else None
            except (EOFError, OSError):
                message = None
                is_sentinel = True
            if message is not None:
                infos = pickle.loads(message) if message else []
                if isinstance(infos, str):
                    self._fail(w, infos)
                replies.append((w, infos))
            if is_sentinel:
                self._fail(w, None)
        return replies

    def _fail(self, w, error):
        """Close everything and raise WorkerError for worker `w`: its env's `error`, or how it ended."""
        process = self.processes[w]
        if error is None:
            process.join(timeout=1.0)
            code = process.exitcode
            if code is None:
                error = "closed its pipe but is still running"
            elif code < 0:
                error = f"was killed by {signal.Signals(-code).name}"
            else:
                error = f"exited with code {code}"
            message = f"worker {w} (pid {process.pid}) {error}"
        else:
            message = f"worker {w} (pid {process.pid}): {error}"
        self.close()
        raise WorkerError(message)

    def close(self):
        """Stop the workers and reap them: ask, then terminate, then kill stragglers. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for commands in self._commands:
            try:
                commands.send_bytes(COMMAND.pack(CLOSE, 0, 0))
            except OSError:  # already dead
                pass
        for process in self.processes:
            process.join(timeout=CLOSE_TIMEOUT)
        for stop in ("terminate", "kill"):
            for process in self.processes:
                if process.is_alive():
                    getattr(process, stop)()
                    process.join(timeout=CLOSE_TIMEOUT)
        self._selector.close()
        for end in self._commands + self._replies:
            end.close()
        self.driver_env.close()


class _ObjectBuilder:
    """Builds one worker's env objects inside the worker, on views of the shared buffers: a dict from
    group to [(global index, env)]."""

    def __init__(self, spec, vecenv, per_group):
        self.spec = spec
        self.per_group = per_group
        self.seed = vecenv._seed
        self.buffers = [vecenv._buffers(i) for i, *_ in spec]
        self.driver = vecenv.driver_env

    def __call__(self):
        envs = {}
        for (i, creator, args, kwargs), buf in zip(self.spec, self.buffers):
            env = creator(*args, buf=buf, seed=None if self.seed is None else self.seed + i, **kwargs)
            _check_env(env, i, buf, self.driver)
            envs.setdefault(i // self.per_group, []).append((i, env))
        return envs


class _sigint_ignored:
    """Ignore SIGINT while a worker forks (when on the main thread, where Python handles signals), so a
    Ctrl-C at that moment cannot hit the child before it ignores SIGINT itself."""

    def __enter__(self):
        self.main = threading.current_thread() is threading.main_thread()
        if self.main:
            self.previous = signal.signal(signal.SIGINT, signal.SIG_IGN)

    def __exit__(self, *exc_info):
        if self.main:
            signal.signal(signal.SIGINT, self.previous)
