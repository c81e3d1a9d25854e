"""The plumbing of a training run, written once: plain functions a script's train() calls where a reader sees the
call. None of them decides when a run saves, logs, moves its learning rate or stops: those are lines of train(),
CleanRL's loop with resume, checkpoints, evaluation, Ctrl-C and torchrun added (see any script's train()).

main() exits 0 when done, 130 after Ctrl-C (128 + SIGINT, the shell's convention, so a calling script can tell a
stopped run from a finished one), 1 with one line for bad flags, a non-finite loss, a dead worker or rank, or a
failed final save.
"""

import contextlib
import dataclasses
import importlib.util
import os
import sys
from dataclasses import dataclass
from typing import Literal, Optional

import torch
import tyro

from common.checkpoint import RunCheckpoint, SaveError, load_run_checkpoint
from common.distributed import leave_world
from common.logs import finish_wandb, make_writer, start_wandb

EXIT_INTERRUPTED = 130  # 128 + SIGINT
# What main() turns into "error: <one line>" and exit 1 (a dead env worker's WorkerError too, in the scripts
# that have workers).
ONE_LINE_ERRORS = (ValueError, FloatingPointError, ConnectionError, SaveError)


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
    capture_video: bool = False
    """record the first episode of each evaluation as MP4 in runs/<run>/videos/ (pip install -e ".[video]")"""
    gif: Optional[str] = None
    """with --eval-checkpoint: also write the first episode as an animated GIF to this path"""
    track: bool = False
    """log to Weights & Biases: the TensorBoard scalars, the flags, the videos (pip install -e ".[track]")"""
    wandb_project_name: str = "puffer-cleanrl"
    """the W&B project (--track)"""
    wandb_entity: Optional[str] = None
    """the W&B team or user (--track; None: your default entity)"""


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was asked for but torch sees no CUDA GPU; use --device cpu")
    return torch.device(name)


# ----- flags -----


def check_flags(args, at_least_one="", positive="", positive_or_none="", non_negative="") -> None:
    """One line naming the flag unless each flag named in `at_least_one` is >= 1, in `positive` > 0, in
    `positive_or_none` None or > 0, and in `non_negative` >= 0 (names as in Args, space-separated). A flag left
    at None (its default for the env, filled in later) passes."""
    for names, bad, need in [
        (at_least_one, lambda v: v < 1, "at least 1"),
        (positive, lambda v: v <= 0, "positive"),
        (positive_or_none, lambda v: v <= 0, "positive, or left out"),
        (non_negative, lambda v: v < 0, ">= 0"),
    ]:
        for name in names.split():
            if getattr(args, name) is not None and bad(getattr(args, name)):
                raise ValueError(f"--{name.replace('_', '-')} must be {need} (got {getattr(args, name)})")


def check_run_flags(args) -> None:
    """The flags every script shares; one line naming the flag otherwise."""
    check_flags(
        args, "eval_episodes torch_threads", positive="total_timesteps", non_negative="checkpoint_freq eval_freq"
    )
    if args.resume and args.eval_checkpoint:
        raise ValueError(
            "--resume and --eval-checkpoint exclude each other: pass --eval-checkpoint alone to evaluate a "
            "checkpoint, or --resume alone to train it further"
        )
    if getattr(args, "render", False) and not args.eval_checkpoint:
        raise ValueError("--render needs --eval-checkpoint PATH (the agent to watch)")
    if args.gif and not args.eval_checkpoint:
        raise ValueError("--gif needs --eval-checkpoint PATH (the agent to record); in training use --capture-video")
    if args.capture_video and importlib.util.find_spec("imageio_ffmpeg") is None:
        raise ValueError('--capture-video writes MP4 through imageio-ffmpeg, not installed: pip install -e ".[video]"')
    if args.track and importlib.util.find_spec("wandb") is None:
        raise ValueError('--track needs wandb (Weights & Biases), not installed: pip install -e ".[track]"')


def saved_args(Args, ckpt: dict, flag: str, path: str):
    """The flags a checkpoint was saved with, as this script's Args. A flag newer than the checkpoint takes
    the value its runs had before the flag existed (`Args.BEFORE_FLAG`), not today's default."""
    try:
        return Args(**{**getattr(Args, "BEFORE_FLAG", {}), **ckpt["args"]})
    except TypeError as e:  # a flag this version of the script no longer has
        raise ValueError(
            f"{flag}: {path} was saved by a different version of this script ({e}); train a new run"
        ) from None


def flags(args, script: str, world, required: tuple = ()):
    """(this run's flags, the checkpoint to resume or None). With --resume: the saved run's flags, with this
    command's --total-timesteps (a larger one extends the run) and --device. --exp-name: the script's name unless
    given. Under torchrun the ranks share the machine's cores: one torch thread each unless --torch-threads says."""
    check_run_flags(args)
    resumed = None
    if args.resume:
        resumed = load_run_checkpoint(args.resume, script, "--resume", resume=True, required=required)
        saved = saved_args(type(args), resumed, "--resume", args.resume)
        total = args.total_timesteps if args.total_timesteps is not None else saved.total_timesteps
        args = dataclasses.replace(saved, total_timesteps=total, device=args.device, resume=args.resume)
    threads = args.torch_threads or (1 if world.size > 1 else None)
    return dataclasses.replace(args, exp_name=args.exp_name or script, torch_threads=threads), resumed


# ----- sizes, the learning-rate schedule, resuming -----


def count_updates(total: int, update_size: int, world_size: int, resumed: Optional[dict] = None) -> int:
    """Whole updates of `update_size` agent steps (all ranks together) in `total`, as CleanRL counts them. A
    fresh run needs at least one; a resumed one must keep its number of ranks and add at least one update."""
    if resumed is not None:
        saved_world = resumed.get("world_size", 1)
        if saved_world != world_size:  # an update is every rank's batch: it must not change size
            raise ValueError(
                f"--resume: that run had {saved_world} rank(s) and this one has {world_size}; "
                f"resume it with torchrun and {saved_world} ranks in all"
            )
        if total // update_size <= resumed["update"]:
            own = " (the checkpoint's own: that run is finished)" if total == resumed["args"]["total_timesteps"] else ""
            raise ValueError(
                f"--total-timesteps {total:,}{own} adds no update to the checkpoint's "
                f"{resumed['global_step']:,} steps (an update is {update_size:,}); pass "
                f"--total-timesteps {(resumed['update'] + 1) * update_size:,} or more to train on"
            )
    elif total < update_size:
        ranks = f": {world_size} ranks x {update_size // world_size:,}" if world_size > 1 else ""
        raise ValueError(
            f"--total-timesteps {total:,} is less than one update ({update_size:,} agent "
            f"steps{ranks}); pass at least {update_size:,}"
        )
    return total // update_size


def annealed_lr(anchor: dict, step: int, end_step: int) -> float:
    """The learning rate at `step`: linear from anchor["lr"] at anchor["step"] down to 0 at `end_step`.
    A fresh run anchors at (0, --learning-rate): CleanRL's schedule."""
    return anchor["lr"] * (1.0 - (step - anchor["step"]) / (end_step - anchor["step"]))


def schedule_anchor(learning_rate: float, update_size: int, end_step: int, resumed: Optional[dict] = None) -> dict:
    """Where annealed_lr's line starts: (0, --learning-rate) for a fresh run. A resume to the same total replays
    the saved schedule exactly; a resume to a new total re-anchors at the saved step with the last update's rate,
    so the rate goes on without a jump and reaches 0 at the new end (restarting the schedule would jump up)."""
    anchor = {"step": 0, "lr": learning_rate}
    if resumed is None:
        return anchor
    anchor = resumed.get("lr_anchor", anchor)
    saved_end = (resumed["args"]["total_timesteps"] // update_size) * update_size
    if end_step != saved_end and resumed["update"] > 0:
        last_lr = annealed_lr(anchor, resumed["global_step"] - update_size, saved_end)
        anchor = {"step": resumed["global_step"], "lr": last_lr}
    return anchor


def load_weights(model: torch.nn.Module, ckpt: dict, flag: str, path: str) -> None:
    try:
        model.load_state_dict(ckpt["model"])
    except RuntimeError as e:
        raise ValueError(f"{flag}: the weights in {path} do not fit this network: {str(e).splitlines()[0]}") from None


def restore(resumed: dict, path: str, model: torch.nn.Module, optimizer, **state) -> None:
    """A resumed run's weights, optimizer and torch RNG state, and each of `state`'s objects (e.g. observation
    statistics) that the checkpoint holds, through their load_state_dict()."""
    load_weights(model, resumed, "--resume", path)
    optimizer.load_state_dict(resumed["optimizer"])
    for key, value in state.items():
        if value is not None and resumed.get(key) is not None:
            value.load_state_dict(resumed[key])
    torch.set_rng_state(resumed["torch_rng_state"])


@contextlib.contextmanager
def seeded_rng(seed: int, device: torch.device):
    """Torch's RNG seeded with `seed` inside the block and restored after it: an evaluation draws from a stream
    of its own, so it never changes what training samples next."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        yield


def open_run(script: str, args, run_name: str, update_size: int, world, resumed=None, **entries):
    """The run's directory runs/<run_name>/: its TensorBoard writer (rank 0 alone logs; None elsewhere) with the
    flags, and its checkpoint file, <script>.pt, which holds `entries` (the network, the optimizer, statistics:
    read at each save) with the flags, the run's name, how many ranks it has and, with --track, its W&B run."""
    run_dir = os.path.join("runs", run_name)
    wandb_id = resumed.get("wandb_id") if resumed is not None else None
    if args.track and world.rank == 0:  # before the writer, whose scalars W&B syncs
        wandb_id = start_wandb(args, run_name, wandb_id)
    writer = make_writer(run_dir, args) if world.rank == 0 else None
    checkpoint = RunCheckpoint(
        os.path.join(run_dir, f"{script}.pt"),
        update_size,
        main=world.rank == 0,
        saved_step=resumed["global_step"] if resumed is not None else None,
        script=script,
        args=dataclasses.asdict(args),
        run_name=run_name,
        world_size=world.size,
        wandb_id=wandb_id,
        **entries,
    )
    return writer, checkpoint


def worker_lost(error: Exception, checkpoint: RunCheckpoint, update: int) -> Exception:
    """An env worker died: the network is intact, so the run is saved as of `update`; the error to raise, with
    where the checkpoint is and how to go on."""
    checkpoint.save(update, final=True)
    return type(error)(f"{error}; {checkpoint.resume_hint()}") if checkpoint.main else error


def rank_lost(error: RuntimeError, world, checkpoint: RunCheckpoint, update: int) -> Exception:
    """Under torchrun another rank died in a collective: rank 0 saves the run as of `update`; the one-line error
    to raise (torchrun's own report names the rank that failed). In one process: `error` itself, a bug to see."""
    if world.size == 1:
        return error
    checkpoint.save(update, final=True)
    return ConnectionError(
        f"rank {world.rank} of {world.size}: lost the other ranks in a collective "
        f"({str(error).splitlines()[0][:120]}); torchrun's report names the rank that failed"
        + (f"; {checkpoint.resume_hint()}" if checkpoint.main else "")
    )


def summary(checkpoint: RunCheckpoint, progress, update: int, interrupted: bool, **extra) -> dict:
    """What train() returns: where the run stopped and how, plus `extra` (e.g. the policy), for tests and notebooks."""
    step = update * checkpoint.update_size
    return dict(global_step=step, update=update, sps=progress.sps(step), run_dir=checkpoint.run_dir,
                checkpoint=checkpoint.path, interrupted=interrupted, **extra)  # fmt: skip


def close(world, envs, writer) -> None:
    """However the run ends: the envs (and their worker processes), the writer, the W&B run, and under torchrun
    the process group (after a clean end every rank waits for the others first)."""
    envs.close()
    if writer is not None:
        writer.close()
    finish_wandb()
    leave_world(world)


# ----- evaluating a checkpoint, and the command line -----


# What --eval-checkpoint takes from its own command line; every other flag is the saved run's.
EVAL_FLAGS = (
    "seed device torch_threads eval_episodes eval_max_steps eval_actions render render_fps eval_checkpoint"
    " capture_video gif"
).split()


def open_checkpoint(script: str, Args, args, required: tuple = ()):
    """--eval-checkpoint: (the checkpoint, its run's flags with this command's evaluation flags, device)."""
    check_run_flags(args)
    ckpt = load_run_checkpoint(args.eval_checkpoint, script, "--eval-checkpoint", resume=False, required=required)
    saved = saved_args(Args, ckpt, "--eval-checkpoint", args.eval_checkpoint)
    saved = dataclasses.replace(saved, **{key: getattr(args, key) for key in EVAL_FLAGS if hasattr(args, key)})
    torch.set_num_threads(saved.torch_threads or 1)
    torch.manual_seed(saved.seed + 10_000)  # sampled actions: the same evaluation every time
    return ckpt, saved, resolve_device(saved.device)


def env_id_in(argv, default: str) -> str:
    """The --env-id on a command line (for --help's per-env defaults), before tyro parses it."""
    for i, arg in enumerate(argv):
        if arg in ("--env-id", "--env_id") and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(("--env-id=", "--env_id=")):
            return arg.split("=", 1)[1]
    return default


def parse_args(Args, argv: Optional[list] = None, help_defaults=None):
    """The command line as Args. `help_defaults(env_id)` gives the flags' effective defaults for the env on the
    command line, so that `--env-id X --help` shows them (train() fills them in the same way)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    default = tyro.MISSING_NONPROP
    if help_defaults is not None and ("--help" in argv or "-h" in argv):
        env_id = env_id_in(argv, Args.env_id)
        try:
            default = dataclasses.replace(Args(env_id=env_id), **help_defaults(env_id))
        except ValueError:  # an env the script refuses: the usual defaults; training says why
            pass
    return tyro.cli(Args, args=argv, default=default)


def exit_for(error: BaseException) -> SystemExit:
    """How main() ends on `error`: Ctrl-C outside the training loop (starting up, evaluating, watching) has
    nothing to save: exit 130; any other expected error is one line and exit 1."""
    if isinstance(error, KeyboardInterrupt):
        print("\ninterrupted: nothing to save", flush=True)
        return SystemExit(EXIT_INTERRUPTED)
    return SystemExit(f"error: {error}")
