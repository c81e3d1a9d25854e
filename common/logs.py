"""Run names, TensorBoard writers, a console progress line, evaluation videos and GIFs, and Weights & Biases, the
same in every script: each logs to `runs/<env>__<script>__<seed>__<time>/` with CleanRL's scalar names and its flags
in TensorBoard's HParams table, so the runs of all three scripts compare in one `tensorboard --logdir runs`.
(CleanRL: its cleanrl/ppo.py at commit fe8d8a03.)"""

import contextlib
import dataclasses
import os
import shlex
import sys
import time

import numpy as np
from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.summary import hparams


def make_run_name(env_id: str, script: str, seed: int) -> str:
    return f"{env_id}__{script}__{seed}__{int(time.time())}"


def make_writer(run_dir: str, args) -> SummaryWriter:
    """A SummaryWriter with the run's flags as a markdown table (CleanRL's layout) and in TensorBoard's HParams plugin
    (runs sorted and filtered by any flag). Only the session's flags, no experiment summary: TensorBoard then builds
    one table from every run's flags (a summary per run would let one script's flags hide another's)."""
    writer = SummaryWriter(run_dir)
    params = dataclasses.asdict(args) if dataclasses.is_dataclass(args) else dict(vars(args))
    rows = "\n".join(f"|{key}|{value}|" for key, value in params.items())
    writer.add_text("hyperparameters", f"|param|value|\n|-|-|\n{rows}")
    flags = {key: v if isinstance(v, (bool, int, float, str)) or v is None else str(v) for key, v in params.items()}
    writer.file_writer.add_summary(hparams(flags, {})[1])  # the session-start summary: the run's flags
    return writer


def format_duration(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def command_line(flags: dict) -> str:
    """The flags as a command line gives them (--name value, --flag / --no-flag; None left out)."""
    parts = []
    for name, value in flags.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            parts.append(flag if value else "--no-" + flag[2:])
        elif value is not None:
            parts.append(f"{flag} {shlex.quote(str(value))}")
    return " ".join(parts)


def announce(run_name: str, describe: str, world, *, updates: range, update_size: int, total: int, flags: dict):
    """Rank 0 says what runs, with every flag's value (the env's preset and the command line's changes), where it
    logs, and the total rounded down to whole updates if it was."""
    if world.rank != 0:
        return
    last = updates.stop - 1
    ranks = f" ({world.size} ranks x {update_size // world.size:,})" if world.size > 1 else ""
    print(
        f"run {run_name}: {describe}; updates {updates.start}..{last} of {update_size:,} agent steps{ranks}; "
        "tensorboard --logdir runs",
        flush=True,
    )
    print(f"flags: {command_line(flags)}", flush=True)
    if last * update_size != total:
        print(
            f"training to step {last * update_size:,}: {last:,} updates of {update_size:,} agent steps "
            f"(--total-timesteps {total:,} rounded down to whole updates)",
            flush=True,
        )


def log_eval(writer, result: dict, step: int):
    """An evaluation's eval/return_mean, eval/return_std, Tetris's eval/lines (lines per game), agents of two or more
    kinds' eval/return_mean/<kind> and eval/return_vs_random/<kind> at `step`; (the mean return, a console line)."""
    returns = result["return"]
    writer.add_scalar("eval/return_mean", float(returns.mean()), step)
    writer.add_scalar("eval/return_std", float(returns.std()), step)
    for key in ("lines_deleted", *(key for key in result if "/" in key)):
        if key in result:
            tag = "lines" if key == "lines_deleted" else key.replace("return/", "return_mean/")
            writer.add_scalar(f"eval/{tag}", float(np.mean(result[key])), step)
    return float(returns.mean()), f"eval return {returns.mean():.2f} +/- {returns.std():.2f} ({len(returns)} episodes)"


def print_end(interrupted: bool, checkpoint, progress, step: int, eval_text: str) -> None:
    """The run's last line (rank 0's): how to resume after Ctrl-C, or what the finished run reached."""
    if not checkpoint.main:
        return
    if interrupted:
        print(
            f"interrupted at step {step:,}: saved {checkpoint.path}, envs closed; continue with --resume "
            f"{checkpoint.path}",
            flush=True,
        )
    else:
        print(f"done: {progress.summary(step)}, {eval_text}; saved {checkpoint.path}", flush=True)


class Progress:
    """The run's clock and its console line `steps | SPS | ETA | fields`. Two rates: `sps`, over the whole wall time
    since the run (or resume) began, as CleanRL's charts/SPS (`global_step / (time.time() - start_time)`), and
    `train_sps`, training alone (evaluations run inside `with progress.paused():`), the perf/train_SPS the speed
    benchmarks compare. Printed every few seconds on a terminal, to a file or a pipe (CI, nohup) only every
    `quiet_interval` seconds."""

    def __init__(self, total_steps: int, start_step: int = 0, interval: float = 5.0, quiet_interval: float = 60.0):
        self.total_steps = total_steps
        self.start_step = start_step
        self.interval = interval if sys.stdout.isatty() else quiet_interval
        self.start_time = time.perf_counter()
        self.paused_time = 0.0
        self.last_print = 0.0
        self.fields = {}

    @contextlib.contextmanager
    def paused(self):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.paused_time += time.perf_counter() - start

    def sps(self, global_step: int) -> float:
        """Agent steps per second since this run (or resume) began, over the whole wall time, evaluations included."""
        return (global_step - self.start_step) / max(time.perf_counter() - self.start_time, 1e-9)

    def train_sps(self, global_step: int) -> float:
        """Agent steps per second of training alone since this run (or resume) began."""
        return (global_step - self.start_step) / max(time.perf_counter() - self.start_time - self.paused_time, 1e-9)

    def update(self, global_step: int, **fields) -> None:
        self.fields = {key: value for key, value in fields.items() if value is not None}
        now = time.perf_counter()
        if now - self.last_print < self.interval:
            return
        self.last_print = now
        sps = self.sps(global_step)
        eta = (self.total_steps - global_step) / max(sps, 1e-9)
        parts = [f"step {global_step:>10,}/{self.total_steps:,}", f"SPS {sps:>8,.0f}", f"ETA {format_duration(eta)}"]
        print(" | ".join(parts + [format_field(key, value) for key, value in self.fields.items()]), flush=True)

    def summary(self, global_step: int) -> str:
        """`step N, SPS S` and the last fields, for the run's closing line."""
        parts = [f"step {global_step:,}", f"SPS {self.sps(global_step):,.0f}"]
        return ", ".join(parts + [format_field(k, v) for k, v in self.fields.items() if k != "eval"])


def format_field(key: str, value) -> str:
    return f"{key} {value:.3g}" if isinstance(value, float) else f"{key} {value}"


def report(title: str, stats: dict) -> None:
    """An evaluation's per-episode stats as mean +/- std and the mean's standard error over the n episodes, one line
    each (no spread for one value): whether a difference, e.g. a team against random play, is more than noise."""
    print(title)
    width = max(14, *map(len, stats))
    for key, values in stats.items():
        spread = ""
        if len(values) > 1:
            standard_error = values.std(ddof=1) / np.sqrt(len(values))
            spread = f" +/- {values.std():.2f} (s.e. {standard_error:.2f}, n {len(values)})"
        print(f"  {key:<{width}} {values.mean():10.2f}{spread}")


# ----- watching the agent: videos and GIFs, and Weights & Biases -----


def video_paths(run_dir: str, name: str, capture_video: bool, gif=None) -> list:
    """Where an evaluation's first episode is recorded: runs/<run>/videos/<name>.mp4 with --capture-video, and
    the --gif path; [] records nothing."""
    return ([os.path.join(run_dir, "videos", f"{name}.mp4")] if capture_video else []) + ([gif] if gif else [])


def save_video(frames: list, paths: list, fps: float) -> None:
    """Writes RGB frames ((H, W, 3) uint8) to each path: MP4 (H.264, through imageio-ffmpeg's own ffmpeg) or, for
    a .gif path, an animated GIF (Pillow). Each is also logged to Weights & Biases when --track is on."""
    if not paths:
        return
    import imageio.v2 as imageio  # with Pillow, a dependency of gymnasium[mujoco]

    for path in paths:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        if path.endswith(".gif"):
            imageio.mimwrite(path, frames, duration=1000 / fps, loop=0)
        else:  # H.264's 4:2:0 colour needs even sides: repeat the last row or column where one is odd
            even = [np.pad(f, ((0, f.shape[0] % 2), (0, f.shape[1] % 2), (0, 0)), mode="edge") for f in frames]
            imageio.mimwrite(path, even, fps=fps, macro_block_size=1)
        wandb = sys.modules.get("wandb")
        if wandb is not None and wandb.run is not None:
            wandb.log({"videos/eval": wandb.Video(path)})
        print(f"recorded {len(frames)} frames: {path}", flush=True)


def start_wandb(args, run_name: str, wandb_id=None) -> str:
    """--track: a Weights & Biases run with the flags as its config, syncing the TensorBoard scalars (so it starts
    before the writer); a resumed run continues its W&B run (`wandb_id`, kept in the checkpoint). WANDB_MODE=offline
    keeps it on disk for `wandb sync`. Returns the W&B run's id."""
    import wandb

    resume = "allow" if wandb_id else None
    config = dataclasses.asdict(args)
    wandb_run = wandb.init(
        project=args.wandb_project_name,
        entity=args.wandb_entity,
        name=run_name,
        id=wandb_id,
        resume=resume,
        config=config,
        sync_tensorboard=True,
        save_code=True,
    )
    return wandb_run.id


def finish_wandb() -> None:
    """Ends the W&B run, if there is one, however the training ended (Ctrl-C included)."""
    wandb = sys.modules.get("wandb")
    if wandb is not None and wandb.run is not None:
        wandb.finish()


def explained_variance(values, returns) -> float:
    """losses/explained_variance, 1 - Var(returns - values) / Var(returns) of two tensors: how much of the returns'
    spread the value function predicts (1: all, 0: no better than a constant; NaN when the returns do not vary)."""
    var_returns = returns.var()
    return float("nan") if var_returns == 0 else (1 - (returns - values).var() / var_returns).item()
