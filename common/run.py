"""A training run's life, the same in every script, so the scripts can hold only the learning:

    with Run("ppo_tetris", args) as run:        # torchrun ranks, device, --resume's saved flags
        args = run.args
        envs = run.closing(make_envs(...))      # closed however the run ends
        agent, optimizer = ...
        run.begin(args, agent, optimizer, update_size)   # restores a resumed run; run dir, TensorBoard
        for update in run.updates():            # from the first update left to the last
            lr = run.annealed_lr()
            ... rollout, advantages, losses ...
            approx_kl = run.allreduce_gradients(agent.parameters(), loss, approx_kl)
            ... pooled = run.gather(...); run.log(scalars, ret=...) ...
    return run.summary(policy=agent)

What it takes care of:
  * torchrun (common/distributed.py): rank 0's weights on every rank, rank r's seeds, a Ctrl-C that all
    ranks agree on, episode stats pooled on rank 0, which alone logs and saves.
  * checkpoints (common/checkpoint.py): written atomically every --checkpoint-freq updates, at the end, on
    Ctrl-C and when an env worker or another rank dies; a save that fails (a full disk) warns and training
    goes on, a final save that fails is a one-line error; the previous checkpoint is never damaged.
  * --resume: the saved run's flags and total (a new --total-timesteps extends it), its weights, optimizer,
    RNG state and learning-rate schedule, the same TensorBoard run at the same step.
  * exits: 0 when done, 130 after Ctrl-C (128 + SIGINT, the shell's convention, so a calling script can
    tell a stopped run from a finished one), 1 with one line for bad flags, a non-finite loss, a dead
    worker or rank, or a failed final save.
"""

import dataclasses
import os
import sys
import time
from dataclasses import dataclass
from typing import Literal, Optional

import torch
import tyro

from common.checkpoint import SaveError, load_run_checkpoint, save_checkpoint
from common.distributed import RANK_SEED_OFFSET, StopRequest, allreduce_mean, broadcast_parameters, gather, init_world
from common.logs import Progress, make_run_name, make_writer
from common.vector import WorkerError

EXIT_INTERRUPTED = 130  # 128 + SIGINT


@dataclass
class RunArgs:
    """The flags of the run itself, the same in every script; each script's Args adds the learning's."""

    exp_name: Optional[str] = None
    """the name of this experiment, part of the run name (None: the script's name)"""
    seed: int = 1
    """seed of the experiment (torch, numpy, envs; with --eval-checkpoint: of the evaluation episodes)"""
    device: Literal["cpu", "cuda", "auto"] = "cpu"
    """where the network runs (auto: cuda if available); these small networks are fastest on the CPU"""
    torch_threads: Optional[int] = None
    """torch CPU threads per process (None: 1, or the script's default for the env; one per rank under torchrun)"""
    eval_freq: int = 0
    """evaluate every this many updates and after the last one (0: only after the last)"""
    eval_episodes: int = 10
    """episodes per evaluation (per agent for multi-agent envs)"""
    checkpoint_freq: int = 50
    """save runs/<run>/<script>.pt every this many updates (0: only at the end and on Ctrl-C)"""
    resume: Optional[str] = None
    """continue this checkpoint's run with its flags (only --total-timesteps, to extend it, and --device change)"""
    eval_checkpoint: Optional[str] = None
    """load this checkpoint and only evaluate it over --eval-episodes episodes"""
    dist_backend: Literal["auto", "gloo", "nccl"] = "auto"
    """torch.distributed backend under torchrun (auto: nccl with --device cuda, gloo on CPU)"""


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was asked for but torch sees no CUDA GPU; use --device cpu")
    return torch.device(name)


def annealed_lr(anchor: dict, step: int, end_step: int) -> float:
    """The learning rate at `step`: linear from anchor["lr"] at anchor["step"] down to 0 at `end_step`.

    A fresh run anchors at (0, --learning-rate): CleanRL's schedule. The anchor is saved in the checkpoint,
    so a resume with the same total replays the schedule exactly; a resume with a new total re-anchors at
    the saved step with the last update's rate, so the rate goes on without a jump and reaches 0 at the
    new end (restarting a schedule for the new total would jump up)."""
    return anchor["lr"] * (1.0 - (step - anchor["step"]) / (end_step - anchor["step"]))


def check_flags(args, at_least_one="", positive="", positive_or_none="", non_negative="") -> None:
    """One line naming the flag unless each flag named in `at_least_one` is >= 1, in `positive` > 0, in
    `positive_or_none` None or > 0, and in `non_negative` >= 0 (names as in Args, space-separated)."""
    for names, bad, need in [
        (at_least_one, lambda v: v < 1, "at least 1"),
        (positive, lambda v: v <= 0, "positive"),
        (positive_or_none, lambda v: v is not None and v <= 0, "positive, or left out"),
        (non_negative, lambda v: v < 0, ">= 0"),
    ]:
        for name in names.split():
            if bad(getattr(args, name)):
                raise ValueError(f"--{name.replace('_', '-')} must be {need} (got {getattr(args, name)})")


def check_run_flags(args) -> None:
    """The flags every script shares; one line naming the flag otherwise."""
    problems = [
        (
            args.torch_threads is not None and args.torch_threads < 1,
            f"--torch-threads must be at least 1 (got {args.torch_threads})",
        ),
        (args.checkpoint_freq < 0, f"--checkpoint-freq must be >= 0 (got {args.checkpoint_freq})"),
        ((args.eval_freq or 0) < 0, f"--eval-freq must be >= 0 (got {args.eval_freq})"),
        (
            getattr(args, "eval_episodes", 1) < 1,
            f"--eval-episodes must be at least 1 (got {getattr(args, 'eval_episodes', 1)})",
        ),
        (
            args.total_timesteps is not None and args.total_timesteps < 1,
            f"--total-timesteps must be positive (got {args.total_timesteps})",
        ),
        (
            bool(args.resume and args.eval_checkpoint),
            "--resume and --eval-checkpoint exclude each other: pass "
            "--eval-checkpoint alone to evaluate a checkpoint, or --resume alone to train it further",
        ),
        (
            getattr(args, "render", False) and not args.eval_checkpoint,
            "--render needs --eval-checkpoint PATH (the agent to watch)",
        ),
    ]
    for failed, message in problems:
        if failed:
            raise ValueError(message)


def saved_args(Args, ckpt: dict, flag: str, path: str):
    """The flags a checkpoint was saved with, as this script's Args. A flag newer than the checkpoint takes
    the value its runs had before the flag existed (`Args.BEFORE_FLAG`), not today's default."""
    try:
        return Args(**{**getattr(Args, "BEFORE_FLAG", {}), **ckpt["args"]})
    except TypeError as e:  # a flag this version of the script no longer has
        raise ValueError(
            f"{flag}: {path} was saved by a different version of this script ({e}); train a new run"
        ) from None


class Run:
    """One training run; see the module docstring. A context manager: leaving it saves (once training has
    begun), closes the envs, the writer and the process group, and prints how the run ended."""

    def __init__(self, script: str, args, required: tuple = ()):
        check_run_flags(args)
        self.script, self.started, self.interrupted, self.closers = script, False, False, []
        self.world, self.device = init_world(args.dist_backend, resolve_device(args.device))
        self.main = self.world.rank == 0  # rank 0 alone prints, logs, evaluates and saves
        self.checkpoint, self.total_given = None, args.total_timesteps is not None
        if args.resume:  # the saved run's flags, so it continues as it started
            self.checkpoint = load_run_checkpoint(args.resume, script, "--resume", resume=True, required=required)
            saved = saved_args(type(args), self.checkpoint, "--resume", args.resume)
            total = args.total_timesteps if args.total_timesteps is not None else saved.total_timesteps
            args = dataclasses.replace(saved, total_timesteps=total, device=args.device, resume=args.resume)
        # Under torchrun the ranks share the machine's cores: one torch thread each unless --torch-threads says.
        threads = args.torch_threads or (1 if self.world.size > 1 else None)
        self.args = dataclasses.replace(args, exp_name=args.exp_name or script, torch_threads=threads)
        torch.set_num_threads(threads or 1)
        torch.manual_seed(args.seed)  # the same initial weights on every rank (rank 0's are broadcast anyway)
        # Rank r's own seed: its envs play other games than rank 0's.
        self.seed = args.seed + RANK_SEED_OFFSET * self.world.rank

    def closing(self, resource):
        """`resource` (an env, a vecenv) is closed when the run ends, however it ends."""
        self.closers.append(resource.close)
        return resource

    def begin(self, args, model: torch.nn.Module, optimizer, update_size: int, describe: str = "", extra=None):
        """Sizes the run in whole updates of `update_size` agent steps per rank; restores a resumed run's
        weights, optimizer, RNG state and schedule; gives every rank rank 0's weights; opens the run's
        directory and TensorBoard writer; says what will run. `extra`: what else each checkpoint holds, as
        values or objects with a state_dict() (e.g. observation statistics), read at each save."""
        self.args, self.model, self.optimizer, self.extra = args, model, optimizer, extra or {}
        torch.set_num_threads(args.torch_threads or 1)  # a script's per-env default is known only now
        world, ckpt, total = self.world, self.checkpoint, args.total_timesteps
        self.update_size = update_size * world.size  # agent steps per update, all ranks together
        if ckpt is not None:
            saved_world = ckpt.get("world_size", 1)
            if saved_world != world.size:  # an update is every rank's batch: it must not change size
                raise ValueError(
                    f"--resume: that run had {saved_world} rank(s) and this one has {world.size}; "
                    f"resume it with torchrun and {saved_world} ranks in all"
                )
            if total // self.update_size <= ckpt["update"]:
                own = "" if self.total_given else " (the checkpoint's own: that run is finished)"
                raise ValueError(
                    f"--total-timesteps {total:,}{own} adds no update to the checkpoint's "
                    f"{ckpt['global_step']:,} steps (an update is {self.update_size:,}); pass "
                    f"--total-timesteps {(ckpt['update'] + 1) * self.update_size:,} or more to train on"
                )
        elif total < self.update_size:
            ranks = f": {world.size} ranks x {update_size:,}" if world.size > 1 else ""
            raise ValueError(
                f"--total-timesteps {total:,} is less than one update ({self.update_size:,} agent "
                f"steps{ranks}); pass at least {self.update_size:,}"
            )
        self.num_updates = total // self.update_size  # whole updates, as CleanRL; said below when it rounds
        self.end_step = self.num_updates * self.update_size
        self.lr_anchor = {"step": 0, "lr": args.learning_rate}
        self.start_update, run_name = 1, make_run_name(args.env_id, args.exp_name, args.seed)
        if ckpt is not None:  # every rank loads the same checkpoint
            load_weights(model, ckpt, "--resume", args.resume)
            optimizer.load_state_dict(ckpt["optimizer"])
            for key, value in self.extra.items():  # e.g. observation statistics
                if hasattr(value, "load_state_dict") and ckpt.get(key) is not None:
                    value.load_state_dict(ckpt[key])
            torch.set_rng_state(ckpt["torch_rng_state"])
            self.start_update, run_name = ckpt["update"] + 1, ckpt["run_name"]
            self.lr_anchor = ckpt.get("lr_anchor", self.lr_anchor)
            saved_end = (ckpt["args"]["total_timesteps"] // self.update_size) * self.update_size
            if self.end_step != saved_end and ckpt["update"] > 0:  # a new budget: on from the last update's rate
                last_lr = annealed_lr(self.lr_anchor, ckpt["global_step"] - self.update_size, saved_end)
                self.lr_anchor = {"step": ckpt["global_step"], "lr": last_lr}
        self.stop = None
        if world.size > 1:
            broadcast_parameters(model)
            run_name = gather(world, run_name)[0]
            if not self.main:  # each rank its own actions and minibatch order (rank 0 keeps a plain run's)
                torch.manual_seed(self.seed + self.start_update)
            self.stop = StopRequest()
        self.run_name, self.run_dir = run_name, os.path.join("runs", run_name)
        # Named after the script, whatever --exp-name says: the run's directory already carries that.
        self.checkpoint_path = os.path.join(self.run_dir, f"{self.script}.pt")
        self.writer = make_writer(self.run_dir, args) if self.main else None
        self.update = self.completed = self.start_update - 1
        self.start_step = self.completed * self.update_size
        self.saved_step = ckpt["global_step"] if ckpt is not None else None
        self.sps, self.last_eval, self.fields = 0.0, None, {}
        if self.main:
            ranks = f"{world.size} ranks x {update_size:,}, " if world.size > 1 else ""
            print(
                f"run {run_name}: {describe + '; ' if describe else ''}updates {self.start_update}.."
                f"{self.num_updates} of {self.update_size:,} agent steps ({ranks}{self.device}); "
                "tensorboard --logdir runs",
                flush=True,
            )
            if self.end_step != total:
                print(
                    f"training to step {self.end_step:,}: {self.num_updates:,} updates of {self.update_size:,} "
                    f"agent steps (--total-timesteps {total:,} rounded down to whole updates)",
                    flush=True,
                )
        self.progress = Progress(self.end_step, start_step=self.start_step)
        self.paused, self.began_at, self.started = 0.0, time.perf_counter(), True

    # ----- the loop -----

    def updates(self):
        """The update numbers left to train; after each, the update counts as done (a Ctrl-C during the next
        saves its weights), the periodic checkpoint is written, and an agreed Ctrl-C ends the loop."""
        for update in range(self.start_update, self.num_updates + 1):
            self.update = update
            yield update
            self.completed = update
            if self.args.checkpoint_freq and update % self.args.checkpoint_freq == 0:
                self.save(final=False)
            if self.interrupted:
                return

    @property
    def global_step(self) -> int:
        """Agent steps once this update is done (all ranks together)."""
        return self.update * self.update_size

    def annealed_lr(self) -> float:
        """This update's learning rate, linear to 0 at the last step (see annealed_lr)."""
        return annealed_lr(self.lr_anchor, (self.update - 1) * self.update_size, self.end_step)

    def allreduce_gradients(self, params, loss: torch.Tensor, *extras: torch.Tensor):
        """After backward: under torchrun, averages the gradients over the ranks, with the non-finite-loss flag
        and `extras` (e.g. approx_kl) averaged in the same message, so every rank takes the same branches;
        stops the run on a non-finite loss. Returns the extras (averaged)."""
        checks = torch.stack([(~torch.isfinite(loss)).float(), *extras])
        if self.world.size > 1:
            checks = allreduce_mean(params, checks, self.world)
        if checks[0] > 0:
            raise FloatingPointError(
                f"loss became {loss.item() if not torch.isfinite(loss) else 'non-finite on a rank'} at update "
                f"{self.update} (step {self.global_step:,}); lower --learning-rate or --max-grad-norm"
            )
        return checks[1] if len(extras) == 1 else tuple(checks[1:])

    def gather(self, *lists):
        """Each list pooled over the ranks, in rank order (one all_gather, which also agrees on a Ctrl-C under
        torchrun and sums the ranks' training SPS). Every rank calls it at the same updates."""
        mine = dict(
            lists=lists,
            stop=self.stop is not None and self.stop.requested,
            sps=(self.global_step - self.start_step) / self.world.size / self.training_time(),
        )
        everyone = gather(self.world, mine)
        self.interrupted |= any(rank["stop"] for rank in everyone)
        self.sps = sum(rank["sps"] for rank in everyone)
        return [[x for rank in everyone for x in rank["lists"][i]] for i in range(len(lists))]

    def training_time(self) -> float:
        """Seconds since training began, evaluations and checkpoint writes excluded."""
        return max(time.perf_counter() - self.began_at - self.paused, 1e-9)

    def log(self, scalars: dict, **progress) -> None:
        """Rank 0: the update's scalars (with charts/SPS) in TensorBoard at its global step, and the progress
        line (every few seconds on a terminal, every minute in a log file)."""
        if not self.main:
            return
        scalars["charts/SPS"] = self.sps
        for tag, value in scalars.items():
            self.writer.add_scalar(tag, value, self.global_step)
        self.fields = {key: value for key, value in progress.items() if value is not None}
        if self.last_eval is not None:
            self.fields["eval"] = self.last_eval
        self.progress.update(self.global_step, update=self.update, **self.fields)

    def eval_due(self) -> bool:
        """Rank 0 evaluates every --eval-freq updates and after the last one (--eval-freq 0: after the last)."""
        freq = self.args.eval_freq
        return self.main and (bool(freq and self.update % freq == 0) or self.update == self.num_updates)

    def evaluate(self, evaluate, *args, **kwargs) -> dict:
        """Runs `evaluate(*args, **kwargs)` (a dict with per-episode "return" arrays), not counted as training
        time; logs eval/return_mean and eval/return_std at this update and shows the mean on the console."""
        start = time.perf_counter()
        cuda = [self.device] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=cuda):  # evaluating never changes what training samples next
            torch.manual_seed(self.args.seed + 10_000 + self.update)
            result = evaluate(*args, **kwargs)
        self.paused += time.perf_counter() - start
        returns = result["return"]
        self.writer.add_scalar("eval/return_mean", float(returns.mean()), self.global_step)
        self.writer.add_scalar("eval/return_std", float(returns.std()), self.global_step)
        self.last_eval = float(returns.mean())
        self.eval_summary = f"eval return {returns.mean():.2f} +/- {returns.std():.2f} ({len(returns)} episodes)"
        return result

    # ----- checkpoints and the end -----

    def save(self, final: bool) -> None:
        """Rank 0 writes the checkpoint atomically. A periodic save that fails (e.g. a full disk) warns and
        training goes on; a final one raises SaveError. Either way the previous checkpoint is intact."""
        if not self.main:
            return
        start = time.perf_counter()
        step = self.completed * self.update_size
        try:
            save_checkpoint(
                self.checkpoint_path,
                {
                    "script": self.script,
                    "model": self.model.state_dict(),
                    "optimizer": self.optimizer.state_dict(),
                    "global_step": step,
                    "update": self.completed,
                    "args": dataclasses.asdict(self.args),
                    "run_name": self.run_name,
                    "lr_anchor": self.lr_anchor,
                    "torch_rng_state": torch.get_rng_state(),
                    "world_size": self.world.size,
                    **{k: v.state_dict() if hasattr(v, "state_dict") else v for k, v in self.extra.items()},
                },
            )
            self.saved_step = step
        except SaveError as e:
            kept = (
                f"the checkpoint of step {self.saved_step:,} is kept"
                if self.saved_step is not None
                else "no checkpoint of this run exists yet"
            )
            if final:
                raise SaveError(f"{e}; {kept}") from None
            print(f"warning: {e}; {kept}; training goes on", file=sys.stderr, flush=True)
        finally:
            self.paused += time.perf_counter() - start

    def saved(self) -> str:
        return (
            f"saved {self.checkpoint_path} at step {self.saved_step:,}; continue with --resume {self.checkpoint_path}"
        )

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            if not self.started:
                return False
            if exc_type is None or exc_type is KeyboardInterrupt:
                # A half-done update is dropped: the checkpoint's step count is whole updates.
                self.interrupted |= exc_type is KeyboardInterrupt
                self.save(final=True)
            elif issubclass(exc_type, WorkerError):  # the network is intact: keep what was learned
                self.save(final=True)
                if self.main:
                    raise WorkerError(f"{exc}; {self.saved()}") from None
            elif issubclass(exc_type, RuntimeError) and self.world.size > 1:  # another rank died mid-collective
                self.save(final=True)
                raise ConnectionError(
                    f"rank {self.world.rank} of {self.world.size}: lost the other ranks in a collective "
                    f"({str(exc).splitlines()[0][:120]}); torchrun's report names the rank that failed"
                    + (f"; {self.saved()}" if self.main else "")
                ) from None
            else:
                return False
        finally:
            self.close(barrier=exc_type is None)
        if self.main:
            sps = (self.completed * self.update_size - self.start_step) / self.training_time()
            if self.interrupted:
                print(
                    f"interrupted at step {self.completed * self.update_size:,}: saved {self.checkpoint_path}, "
                    f"envs closed; continue with --resume {self.checkpoint_path}",
                    flush=True,
                )
            else:
                fields = ", ".join(
                    f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                    for k, v in self.fields.items()
                    if k != "eval"
                )
                evaluation = getattr(self, "eval_summary", "")
                print(
                    f"done: step {self.completed * self.update_size:,}, SPS {sps:,.0f}"
                    + "".join(f", {part}" for part in (fields, evaluation) if part)
                    + f"; saved {self.checkpoint_path}",
                    flush=True,
                )
        return exc_type is KeyboardInterrupt  # the run was saved and said so: train() returns normally

    def close(self, barrier: bool = False) -> None:
        """Closes the envs and the writer; under torchrun, after a clean end, waits for every rank before tearing
        the process group down (a rank that exits while another is still in its last collective can abort it)."""
        for close in reversed(self.closers):
            close()
        self.closers = []
        if getattr(self, "writer", None) is not None:
            self.writer.close()
            self.writer = None
        if self.world.size > 1:
            import torch.distributed as dist

            if dist.is_initialized():
                if barrier:
                    dist.barrier()
                dist.destroy_process_group()

    def summary(self, **extra) -> dict:
        """What train() returns: where the run is and how it went, plus `extra` (e.g. the policy)."""
        return {
            "global_step": self.completed * self.update_size,
            "update": self.completed,
            "sps": (self.completed * self.update_size - self.start_step) / self.training_time(),
            "run_dir": self.run_dir,
            "checkpoint": self.checkpoint_path,
            "interrupted": self.interrupted,
            **extra,
        }


def load_weights(model: torch.nn.Module, ckpt: dict, flag: str, path: str) -> None:
    try:
        model.load_state_dict(ckpt["model"])
    except RuntimeError as e:
        raise ValueError(f"{flag}: the weights in {path} do not fit this network: {str(e).splitlines()[0]}") from None


def open_checkpoint(
    script: str,
    Args,
    args,
    required: tuple = (),
    keep=(
        "seed",
        "device",
        "torch_threads",
        "eval_episodes",
        "eval_actions",
        "render",
        "render_fps",
        "eval_checkpoint",
    ),
):
    """--eval-checkpoint: (the checkpoint, its run's flags with this command's evaluation flags, device)."""
    check_run_flags(args)
    ckpt = load_run_checkpoint(args.eval_checkpoint, script, "--eval-checkpoint", resume=False, required=required)
    saved = saved_args(Args, ckpt, "--eval-checkpoint", args.eval_checkpoint)
    saved = dataclasses.replace(saved, **{key: getattr(args, key) for key in keep if hasattr(args, key)})
    torch.set_num_threads(saved.torch_threads or 1)
    torch.manual_seed(saved.seed + 10_000)  # sampled actions: the same evaluation every time
    return ckpt, saved, resolve_device(saved.device)


def report(title: str, stats: dict) -> None:
    """An evaluation's per-episode stats as mean +/- std, one line each (no spread for one episode)."""
    print(title)
    for key, values in stats.items():
        print(f"  {key:<14} {values.mean():10.2f}" + (f" +/- {values.std():.2f}" if len(values) > 1 else ""))


def env_id_in(argv, default: str) -> str:
    """The --env-id on a command line (for --help's per-env defaults), before tyro parses it."""
    for i, arg in enumerate(argv):
        if arg in ("--env-id", "--env_id") and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(("--env-id=", "--env_id=")):
            return arg.split("=", 1)[1]
    return default


def cli(Args, train, evaluate_checkpoint, argv: Optional[list] = None, help_defaults=None) -> None:
    """A script's main(): parse the flags, evaluate or train, and turn how it ended into the exit code and
    one line. `help_defaults(env_id)` gives the flags' effective defaults for the env on the command line,
    so that `--env-id X --help` shows them (they are still filled in when training starts)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    default = tyro.MISSING_NONPROP
    if help_defaults is not None and ("--help" in argv or "-h" in argv):
        env_id = env_id_in(argv, Args.env_id)
        try:
            default = dataclasses.replace(Args(env_id=env_id), **help_defaults(env_id))
        except ValueError:  # an env the script refuses: the usual defaults; training says why
            pass
    args = tyro.cli(Args, args=argv, default=default)
    try:
        if args.eval_checkpoint:
            evaluate_checkpoint(args)
        elif train(args)["interrupted"]:  # train() saved, closed the envs and said so
            raise SystemExit(EXIT_INTERRUPTED)
    except (ValueError, FloatingPointError, WorkerError, ConnectionError, SaveError) as e:
        raise SystemExit(f"error: {e}") from None
    except KeyboardInterrupt:  # while starting up, evaluating or watching: there is nothing to save
        print("\ninterrupted: nothing to save", flush=True)
        raise SystemExit(EXIT_INTERRUPTED) from None
