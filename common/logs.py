"""Run names, TensorBoard writers and a console progress line, identical across scripts.

Every script logs to `runs/<env>__<script>__<seed>__<time>/` with CleanRL's scalar names, so runs of
all three scripts compare in one `tensorboard --logdir runs`.
"""

import dataclasses
import sys
import time

from torch.utils.tensorboard import SummaryWriter


def make_run_name(env_id: str, script: str, seed: int) -> str:
    return f"{env_id}__{script}__{seed}__{int(time.time())}"


def make_writer(run_dir: str, args) -> SummaryWriter:
    """A SummaryWriter with the run's hyperparameters as a markdown table (CleanRL's layout)."""
    writer = SummaryWriter(run_dir)
    params = dataclasses.asdict(args) if dataclasses.is_dataclass(args) else dict(vars(args))
    rows = "\n".join(f"|{key}|{value}|" for key, value in params.items())
    writer.add_text("hyperparameters", f"|param|value|\n|-|-|\n{rows}")
    return writer


def format_duration(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    """Prints `steps | SPS | ETA | fields` every `interval` seconds.

    On a terminal the line is printed every few seconds; when stdout is a file or a pipe (CI, nohup)
    it prints only every `quiet_interval` seconds so logs stay short.
    """

    def __init__(self, total_steps: int, interval: float = 5.0, quiet_interval: float = 60.0, start_step: int = 0):
        self.total_steps = total_steps
        self.interval = interval if sys.stdout.isatty() else quiet_interval
        self.start_time = time.time()
        self.start_step = start_step
        self.last_print = 0.0

    def sps(self, global_step: int) -> float:
        return (global_step - self.start_step) / max(time.time() - self.start_time, 1e-9)

    def update(self, global_step: int, **fields) -> None:
        now = time.time()
        if now - self.last_print < self.interval:
            return
        self.last_print = now
        sps = self.sps(global_step)
        eta = (self.total_steps - global_step) / max(sps, 1e-9)
        parts = [f"step {global_step:>10,}/{self.total_steps:,}", f"SPS {sps:>8,.0f}", f"ETA {format_duration(eta)}"]
        for key, value in fields.items():
            if value is None:
                continue
            parts.append(f"{key} {value:.3g}" if isinstance(value, float) else f"{key} {value}")
        print(" | ".join(parts), flush=True)
