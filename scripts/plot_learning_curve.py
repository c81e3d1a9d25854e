"""A PNG learning curve from a run's TensorBoard events: episode return and lines cleared, against
environment steps and against wall-clock minutes (from the events' own timestamps).

    python scripts/plot_learning_curve.py runs/<run> --out docs/ppo_tetris_curve.png
    python scripts/plot_learning_curve.py runs/<run> --print     # also print a table every ~10%
    python scripts/plot_learning_curve.py runs/<a> runs/<b> --labels "old" "new" --out cmp.png   # runs side by side
"""

import argparse
import os

import matplotlib

matplotlib.use("Agg")  # files only, no display needed
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

CURVES = (("charts/episodic_return", "episode return"), ("tetris/lines_deleted", "lines cleared per episode"))


def read_scalars(run_dir: str, tags) -> dict:
    """{tag: (steps, minutes since the run's first event, values)}; a resumed run's later events files
    are read too, and a step logged twice keeps its last value."""
    events = EventAccumulator(run_dir, size_guidance={"scalars": 0})
    events.Reload()
    available = events.Tags()["scalars"]
    missing = [tag for tag in tags if tag not in available]
    if missing:
        raise SystemExit(f"error: {run_dir} has no scalars {missing} (has {sorted(available)[:8]}...)")
    series = {}
    for tag in tags:
        by_step = {e.step: (e.wall_time, e.value) for e in events.Scalars(tag)}
        steps = np.array(sorted(by_step))
        wall, values = np.array([by_step[s] for s in steps]).T
        series[tag] = (steps, wall, values)
    start = min(wall[0] for _, wall, _ in series.values())
    return {tag: (steps, (wall - start) / 60, values) for tag, (steps, wall, values) in series.items()}


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average (the first points average what there is)."""
    return np.array([values[max(0, i - window + 1) : i + 1].mean() for i in range(len(values))])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dirs", nargs="+", help="runs/<run> directories holding TensorBoard events")
    parser.add_argument("--labels", nargs="+", help="one legend label per run (default: the run names)")
    parser.add_argument("--title", help="the picture's title (default: the run's name)")
    parser.add_argument("--out", default="docs/ppo_tetris_curve.png", help="the PNG to write")
    parser.add_argument("--smooth", type=int, default=10, help="moving-average window, in logged points")
    parser.add_argument("--print", action="store_true", help="print step, minute and values every ~10%%")
    args = parser.parse_args()
    for run_dir in args.run_dirs:
        if not os.path.isdir(run_dir):
            raise SystemExit(f"error: run_dir {run_dir} is not a directory")
    names = [os.path.basename(os.path.normpath(run_dir)) for run_dir in args.run_dirs]
    labels = args.labels or names
    if len(labels) != len(args.run_dirs):
        raise SystemExit(f"error: --labels gives {len(labels)} labels for {len(args.run_dirs)} runs; give one per run")
    runs = [read_scalars(run_dir, [tag for tag, _ in CURVES]) for run_dir in args.run_dirs]

    fig, axes = plt.subplots(2, 2, figsize=(11, 7), constrained_layout=True)
    for i, (series, run_label) in enumerate(zip(runs, labels)):
        color = f"C{i}"
        for row, (tag, label) in enumerate(CURVES):
            steps, minutes, values = series[tag]
            x_axes = [(steps / 1e6, "environment steps (millions)"), (minutes, "wall-clock minutes")]
            for col, (x, xlabel) in enumerate(x_axes):
                ax = axes[row, col]
                ax.plot(x, values, color=color, alpha=0.2, linewidth=0.8)
                ax.plot(x, smooth(values, args.smooth), color=color, linewidth=1.8, label=run_label if row else None)
                ax.set_xlabel(xlabel)
                ax.set_ylabel(label)
                ax.grid(alpha=0.3)
    if len(runs) > 1:
        axes[1, 0].legend(loc="upper left")
    fig.suptitle(args.title or f"PPO on Tetris: {names[0]}")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")

    if not args.print:
        return
    for series, run_label in zip(runs, labels):
        print(run_label)
        steps, minutes, returns = series[CURVES[0][0]]
        lines = dict(zip(*series[CURVES[1][0]][::2]))
        for i in np.unique(np.linspace(0, len(steps) - 1, 11).astype(int)):
            print(
                f"step {steps[i]:>11,}  min {minutes[i]:5.1f}  return {returns[i]:7.2f}  "
                f"lines {lines.get(steps[i], float('nan')):6.2f}"
            )


if __name__ == "__main__":
    main()
