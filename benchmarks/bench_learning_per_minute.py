"""Learning per wall-clock minute: runs training commands side by side, each pinned to its own core, stops
them with Ctrl-C (which saves) after --minutes, and prints return (and Tetris lines) at the given minutes,
read from each run's TensorBoard events by wall time.

    python benchmarks/bench_learning_per_minute.py --minutes 20 --marks 5 10 20 \\
        --run "ppo_tetris.py --seed 3" --run "ppo_puffer_async.py --seed 3 --torch-threads 1"
    python benchmarks/bench_learning_per_minute.py --minutes 20 --marks 5 10 15 --cores 0,1 \\
        --run "ppo_puffer_async.py --seed 3"    # Tetris's default: 2 torch threads, so both cores
    python benchmarks/bench_learning_per_minute.py --minutes 10 --marks 1 2 5 10 --cores 0,1 \\
        --run "ppo_puffer_async.py --env-id mpe-spread"

`--cores` gives each run its CPU list for `taskset` ("0" and "1" by default: one core each); a run that
uses worker processes or more than one torch thread should get both ("0,1"), and then runs go one after
another. The value at a mark is the mean of the scalars logged in the minute up to it, so one noisy update
does not decide it.
"""

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAGS = ("charts/episodic_return", "tetris/lines_deleted", "perf/train_SPS")


def start(command, cores, workdir):
    argv = ["taskset", "-c", cores, sys.executable] + shlex.split(command)
    argv[4] = os.path.join(ROOT, argv[4])  # the script, resolved from the repository root
    log = open(os.path.join(workdir, "log.txt"), "w")
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.Popen(argv, cwd=workdir, stdout=log, stderr=subprocess.STDOUT, env=env), log


def read(workdir, marks):
    (run,) = os.listdir(os.path.join(workdir, "runs"))
    events = EventAccumulator(os.path.join(workdir, "runs", run), size_guidance={"scalars": 0})
    events.Reload()
    tags = events.Tags()["scalars"]
    first = min(e.wall_time for tag in tags for e in events.Scalars(tag))
    # Training starts when the first update is logged; count from the process start, estimated as the first
    # event minus that update's own duration (step / SPS).
    sps = events.Scalars("perf/train_SPS")
    t0 = first - sps[0].step / max(sps[0].value, 1e-9)
    result = {}
    for tag in TAGS:
        if tag not in tags:
            continue
        points = [(e.wall_time - t0, e.value, e.step) for e in events.Scalars(tag)]
        for mark in marks:
            window = [v for t, v, _ in points if mark * 60 - 60 < t <= mark * 60]
            result[(tag, mark)] = float(np.mean(window)) if window else float("nan")
    steps = [(e.wall_time - t0, e.step) for e in sps]
    for mark in marks:
        result[("steps", mark)] = max([s for t, s in steps if t <= mark * 60], default=0)
    # A run that finished its budget before the last mark: its last minute, and when it ended.
    end = steps[-1][0]
    for tag in TAGS:
        if tag in tags:
            result[(tag, "end")] = float(np.mean([e.value for e in events.Scalars(tag) if e.wall_time - t0 > end - 60]))
    result[("steps", "end")], result["end_minute"] = steps[-1][1], end / 60
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="append", required=True, help="script and flags, from the repo root")
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--marks", type=float, nargs="+", default=[5, 10, 20])
    parser.add_argument("--cores", action="append", help="taskset CPU list per run (default: 0, 1, ...)")
    opts = parser.parse_args()
    cores = opts.cores or [str(i % os.cpu_count()) for i in range(len(opts.run))]
    # Runs whose cores overlap cannot share the machine fairly: run those one after another.
    batches, used = [[]], set()
    for command, cpu in zip(opts.run, cores):
        cpus = set(cpu.split(","))
        if cpus & used:
            batches.append([])
            used = set()
        batches[-1].append((command, cpu))
        used |= cpus
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, {opts.minutes:g} min per run")
    results = []
    for batch in batches:
        running = []
        for command, cpu in batch:
            workdir = tempfile.mkdtemp(prefix="learning_per_minute_")
            process, log = start(command, cpu, workdir)
            running.append((command, cpu, workdir, process, log))
        time.sleep(opts.minutes * 60 + 5)
        for command, cpu, workdir, process, log in running:
            launch.stop(process, seconds=120)
            log.close()
            results.append((command, cpu, workdir, read(workdir, opts.marks)))
    for tag, name in (("charts/episodic_return", "return"), ("tetris/lines_deleted", "lines"), ("steps", "steps")):
        if not any((tag, opts.marks[0]) in r for *_, r in results):
            continue
        print(f"\n{name} at minute " + ", ".join(f"{m:g}" for m in opts.marks) + ", and at the run's end")
        for command, cpu, workdir, r in results:
            cells = [
                f"{r.get((tag, m), float('nan')):,.0f}" if tag == "steps" else f"{r.get((tag, m), float('nan')):.2f}"
                for m in (*opts.marks, "end")
            ]
            print(f"| {command} (cores {cpu}) | " + " | ".join(cells) + f" (minute {r['end_minute']:.1f}) |")
    for command, cpu, workdir, r in results:
        print(f"log and runs of '{command}': {workdir}")


if __name__ == "__main__":
    main()
