"""The plumbing of a training run, written once: plain functions a script's train() calls where a reader sees the
call. None of them saves, logs, moves a schedule or stops the run: those are lines of train(). A `..._error` function
only builds the one-line error train() raises. main() exits 0 when done, 130 after Ctrl-C (128 + SIGINT), 1 with one
line for bad flags, a non-finite loss, a dead worker or rank, or a failed final save."""

import contextlib
import dataclasses
import importlib.util
import os
import sys
from dataclasses import dataclass
from typing import Literal, Optional

import torch

from common import distributed
from common.checkpoint import VALUE_LOSS_CONVENTION, RunCheckpoint, SaveError, load_run_checkpoint
from common.logs import announce, finish_wandb, make_run_name, make_writer, start_wandb

EXIT_INTERRUPTED = 130  # 128 + SIGINT, the shell's convention: a calling script tells a stopped run from a finished one
# What a script's main() turns into "error: <one line>" and exit 1 (exit_for; a Ctrl-C outside the training loop: 130)
# (ConnectionError: a dead env worker, common/vector.py's WorkerError, or a lost torchrun rank, lost_error)
ONE_LINE_ERRORS = (KeyboardInterrupt, ValueError, FloatingPointError, ConnectionError, SaveError)


@dataclass
class RunArgs:
    """The flags of the run itself, the same in every script; each script's Args adds the learning's."""

    exp_name: Optional[str] = None
    """the name of this experiment, part of the run name (None: the script's name)"""
    seed: int = 1
    """seed of the experiment (torch, numpy, envs; with --eval-checkpoint: of the evaluation episodes)"""
    device: Literal["cpu", "cuda", "auto"] = "cpu"
    """where the network runs (auto: cuda if available); these small networks are fastest on the CPU"""
    torch_threads: int = 1
    """torch CPU threads per process (under torchrun: 1 per rank unless given)"""
    eval_freq: int = 0
    """evaluate every this many updates and after the last one (0: only after the last)"""
    eval_episodes: int = 10
    """episodes per evaluation"""
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


# What --eval-checkpoint and --resume take from their own command line; every other flag is the saved run's.
EVAL_FLAGS = "seed device torch_threads eval_episodes eval_max_steps eval_actions eval_opponents render render_fps"
EVAL_FLAGS += " capture_video gif"
RESUME_FLAGS = "total_timesteps device"


def resolve_device(name: str) -> torch.device:
    if name == "cpu" and torch.cuda.is_available():
        print("note: torch sees a CUDA GPU and this run uses the CPU (--device cpu); pass --device cuda to use the GPU")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was asked for but torch sees no CUDA GPU; use --device cpu")
    return torch.device(name)


def check_flags(args, *, at_least_one="", positive="", positive_or_none="", non_negative="") -> None:
    """One line naming the flag unless each flag named in `at_least_one` is >= 1, in `positive` > 0, in
    `positive_or_none` None or > 0, and in `non_negative` >= 0 (names as in Args, space-separated)."""
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
    check_flags(args, at_least_one="eval_episodes torch_threads", positive="total_timesteps")
    check_flags(args, non_negative="checkpoint_freq eval_freq")
    if args.resume and args.eval_checkpoint:
        raise ValueError(
            "--resume and --eval-checkpoint exclude each other: --eval-checkpoint evaluates, --resume trains"
        )
    if getattr(args, "render", False) and not args.eval_checkpoint:
        raise ValueError("--render needs --eval-checkpoint PATH (the agent to watch)")
    if args.gif and not args.eval_checkpoint:
        raise ValueError("--gif needs --eval-checkpoint PATH (the agent to record); in training use --capture-video")
    if args.capture_video and importlib.util.find_spec("imageio_ffmpeg") is None:
        raise ValueError('--capture-video writes MP4 through imageio-ffmpeg, not installed: pip install -e ".[video]"')
    if args.track and importlib.util.find_spec("wandb") is None:
        raise ValueError('--track needs wandb (Weights & Biases), not installed: pip install -e ".[track]"')


def given_flags(argv: list) -> list:
    """The Args fields a command line names: --env-id X and --env-id=X give env_id, --no-lstm gives lstm."""
    names = [arg[2:].split("=")[0].replace("-", "_") for arg in argv if arg.startswith("--")]
    return [name[3:] if name.startswith("no_") else name for name in names]


def flag_value(argv: list, flag: str, default=None):
    """The value a command line gives `flag` (--flag X or --flag=X; the last one counts), else `default`."""
    value = default
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(flag + "="):
            value = arg[len(flag) + 1 :]
    return value


def saved_flags(Args, ckpt: dict, flag: str, path: str):
    """The flags a checkpoint was saved with, as this script's Args."""
    try:
        return Args(**ckpt["args"])
    except TypeError as e:  # a flag this version of the script does not have
        raise ValueError(f"{flag}: {path} was saved by another version of this script ({e}); train a new run") from None


def defaults(Args, script: str, preset_of, argv: Optional[list] = None):
    """Every flag's default for this command line, as Args, which tyro then parses the command line over (and
    --help shows): the preset of its --env-id (`preset_of(env_id, env_kwargs)`: common/presets.py; None: Args; a
    torchrun rank gets one torch thread). With --resume or --eval-checkpoint: the saved run's flags, but for the
    flags those take from the command line (RESUME_FLAGS, EVAL_FLAGS), which default as for a new run of the saved env
    (--resume: --total-timesteps to the saved total); any other flag given with them is a one-line error. Only --env-id,
    --env-kwargs and the checkpoint's path are read from `argv` here."""
    argv = sys.argv[1:] if argv is None else list(argv)
    resume = flag_value(argv, "--resume")
    evaluate = flag_value(argv, "--eval-checkpoint")
    if resume and evaluate:
        raise ValueError(
            "--resume and --eval-checkpoint exclude each other: --eval-checkpoint evaluates, --resume trains"
        )
    if not (resume or evaluate):
        env_id = flag_value(argv, "--env-id", Args.env_id)
        env_kwargs = flag_value(argv, "--env-kwargs", getattr(Args, "env_kwargs", ""))
        preset = {"env_id": env_id} if preset_of is None else preset_of(env_id, env_kwargs)
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # a torchrun rank (torchrun sets it before the flags are read)
            preset = {**preset, "torch_threads": 1}
        return Args(**preset)
    if resume:
        flag = "--resume"
        own = RESUME_FLAGS.split()
        path = resume
    else:
        flag = "--eval-checkpoint"
        own = EVAL_FLAGS.split()
        path = evaluate
    saved = saved_flags(Args, load_run_checkpoint(path, script, flag, resume=bool(resume)), flag, path)
    if other := [name for name in given_flags(argv) if name not in own + [flag[2:].replace("-", "_"), "help"]]:
        allowed = ", ".join(f"--{name.replace('_', '-')}" for name in own if hasattr(saved, name))
        drop = other[0].replace("_", "-")
        raise ValueError(f"{flag} uses the saved run's flags: drop --{drop} ({allowed} may change)")
    saved_env = ["--env-id", saved.env_id, "--env-kwargs", getattr(saved, "env_kwargs", "")]
    fresh = defaults(Args, script, preset_of, saved_env)
    own_defaults = {key: getattr(fresh, key) for key in own if hasattr(fresh, key) and key != "total_timesteps"}
    return dataclasses.replace(saved, resume=None, eval_checkpoint=None, **own_defaults)


def start(args, script: str, required: tuple = ()):
    """(torchrun world, device, flags, the checkpoint to resume or None). --resume: the saved run's flags with this
    command's --total-timesteps (a larger one extends the run) and --device, and the saved state as plain data."""
    check_run_flags(args)
    world, device = distributed.init_world(args.dist_backend, resolve_device(args.device))
    if args.exp_name is None:
        args = dataclasses.replace(args, exp_name=script)
    if not args.resume:
        return world, device, args, None
    resumed = load_run_checkpoint(args.resume, script, "--resume", resume=True, required=required)
    saved = saved_flags(type(args), resumed, "--resume", args.resume)
    args = dataclasses.replace(saved, total_timesteps=args.total_timesteps, device=args.device, resume=args.resume)
    return world, device, args, resumed


def count_updates(total: int, update_size: int, world_size: int, resumed: Optional[dict] = None) -> int:
    """Whole updates of `update_size` agent steps (all ranks together) in `total`, as CleanRL counts them
    (`num_iterations = total_timesteps // batch_size` in cleanrl/ppo.py and ppo_atari_multigpu.py at fe8d8a03). A
    fresh run needs at least one; a resumed one must keep its number of ranks and add at least one update."""
    if resumed is not None:
        if (saved := resumed["world_size"]) != world_size:  # an update is every rank's batch: it keeps its size
            raise ValueError(
                f"--resume: that run had {saved} rank(s) and this one has {world_size}; resume it with "
                f"torchrun and {saved} ranks in all"
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
            f"--total-timesteps {total:,} is less than one update ({update_size:,} agent steps{ranks}); "
            f"pass at least {update_size:,}"
        )
    return total // update_size


def restore(resumed: Optional[dict], args, state: dict, num_updates: int, world):
    """(updates done, where the linear schedules start: {"update": 0, **state["rates"]} for a fresh run). --resume:
    `state`'s objects and torch's RNG loaded; resumed to its own total the schedules replay exactly, extended they
    start at the saved update from the rates it used, so each goes on without a jump to its end at the new last
    update. Under torchrun: rank 0's weights on every rank, and each other rank its own stream of actions."""
    done = 0
    schedule = {"update": 0, **state["rates"]}
    if resumed is not None:
        for key, value in state.items():
            if key == "model":
                load_weights(value, resumed, "--resume", args.resume)
            elif hasattr(value, "load_state_dict"):
                value.load_state_dict(resumed[key])
        torch.set_rng_state(resumed["torch_rng_state"])
        done = resumed["update"]
        schedule = resumed["schedule"]
        if num_updates != resumed["num_updates"]:  # extended
            schedule = {"update": done, **resumed["rates"]}
    if world.size > 1:
        distributed.join_ranks(world, state["model"], args.seed + distributed.RANK_SEED_OFFSET * world.rank + done + 1)
    return done, schedule


def load_weights(model: torch.nn.Module, ckpt: dict, flag: str, path: str) -> None:
    """The checkpoint's weights into `model`, or one line: they do not fit (another network)."""
    try:
        model.load_state_dict(ckpt["model"])
    except RuntimeError as e:
        raise ValueError(f"{flag}: the weights in {path} do not fit this network: {str(e).splitlines()[0]}") from None


def open_run(
    script: str, args, world, resumed: Optional[dict], state: dict, *, update_size: int, done: int, about: str
):
    """runs/<run_name>/ (a resumed run's own; under torchrun rank 0's): its TensorBoard writer (rank 0's; None else)
    and its checkpoint <script>.pt: `state` (objects: their state_dict() at each save), the flags, the run's name and
    length, its ranks, its W&B run (--track). Rank 0 says what runs (`about`, updates after `done`), where it logs."""
    run_name = resumed["run_name"] if resumed is not None else make_run_name(args.env_id, args.exp_name, args.seed)
    run_name = distributed.gather(world, run_name)[0]  # rank 0's
    wandb_id = resumed["wandb_id"] if resumed is not None else None
    if args.track and world.rank == 0:  # before the writer, whose scalars W&B syncs
        wandb_id = start_wandb(args, run_name, wandb_id)
    writer = make_writer(os.path.join("runs", run_name), args) if world.rank == 0 else None
    path = os.path.join("runs", run_name, f"{script}.pt")
    saved_step = resumed["global_step"] if resumed is not None else None
    checkpoint = RunCheckpoint(
        path,
        update_size,
        world.rank == 0,
        saved_step,
        script=script,
        args=dataclasses.asdict(args),
        run_name=run_name,
        world_size=world.size,
        num_updates=args.total_timesteps // update_size,
        wandb_id=wandb_id,
        value_loss=VALUE_LOSS_CONVENTION,
        **state,
    )
    updates = range(done + 1, args.total_timesteps // update_size + 1)
    flags = dataclasses.asdict(args)
    announce(run_name, about, world, updates=updates, update_size=update_size, total=args.total_timesteps, flags=flags)
    return writer, checkpoint


@contextlib.contextmanager
def seeded_rng(seed: int, device: torch.device):
    """Torch's RNG seeded with `seed` inside the block and restored after it: an evaluation draws from a stream
    of its own, so it never changes what training samples next."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        yield


def non_finite_loss_error(loss: torch.Tensor, update: int, step: int) -> FloatingPointError:
    """The error a non-finite loss stops the run with (under torchrun: the ranks' mean, so every rank stops)."""
    return FloatingPointError(
        f"loss became {loss.item()} at update {update} (step {step:,}); lower --learning-rate or --max-grad-norm"
    )


def lost_error(error: Exception, world, checkpoint: RunCheckpoint) -> Exception:
    """A dead env worker (WorkerError), or under torchrun another rank dead in a collective (RuntimeError; torchrun's
    report names it): the one-line error to raise, saying which checkpoint holds the run (the last save: the
    half-done update is not saved). In one process a RuntimeError is a bug to see: itself."""
    worker = getattr(error, "env_worker", False)
    if not worker and world.size == 1:
        return error
    kept = f"; {checkpoint.kept(hint=True)}" if checkpoint.main else ""
    if worker:
        return type(error)(f"{error}{kept}")
    first = str(error).splitlines()[0][:120]
    return ConnectionError(
        f"rank {world.rank} of {world.size}: lost the other ranks in a collective ({first}); "
        f"torchrun's report names the rank that failed{kept}"
    )


def close(world, envs, writer, stop) -> None:
    """However the run ends: the envs (and their worker processes), the writer, the W&B run, Ctrl-C's handler, and
    under torchrun the process group (after a clean end every rank waits for the others first)."""
    stop.release()
    envs.close()
    if writer is not None:
        writer.close()
    finish_wandb()
    distributed.leave_world(world)


def summary(checkpoint: RunCheckpoint, progress, update: int, interrupted: bool, **extra) -> dict:
    """What train() returns: where the run stopped and how, plus `extra` (e.g. the policy), for tests and notebooks."""
    step = update * checkpoint.update_size
    return dict(
        global_step=step,
        update=update,
        sps=progress.train_sps(step),  # training alone, what the speed benchmarks compare
        run_dir=checkpoint.run_dir,
        checkpoint=checkpoint.path,
        interrupted=interrupted,
        **extra,
    )


def open_checkpoint(script: str, Args, args, required: tuple = ()):
    """--eval-checkpoint: (the checkpoint, its run's flags with this command's evaluation flags, device)."""
    check_run_flags(args)
    ckpt = load_run_checkpoint(args.eval_checkpoint, script, "--eval-checkpoint", resume=False, required=required)
    saved = saved_flags(Args, ckpt, "--eval-checkpoint", args.eval_checkpoint)
    own = {key: getattr(args, key) for key in EVAL_FLAGS.split() + ["eval_checkpoint"] if hasattr(args, key)}
    saved = dataclasses.replace(saved, **own)
    torch.set_num_threads(saved.torch_threads)
    torch.manual_seed(saved.seed + 10_000)  # sampled actions: the same evaluation every time
    return ckpt, saved, resolve_device(saved.device)


def exit_for(error: BaseException) -> SystemExit:
    """How main() ends on `error`: a Ctrl-C outside the training loop (starting up, evaluating, watching), or a
    second one inside it, saves nothing: exit 130; any other expected error is one line and exit 1."""
    if isinstance(error, KeyboardInterrupt):
        print(f"\ninterrupted: {str(error) or 'nothing to save'}", flush=True)
        return SystemExit(EXIT_INTERRUPTED)
    return SystemExit(f"error: {error}")
