"""Compare runs as the field does: learning curves with bootstrap bands, final scores as the interquartile mean
(IQM) with 95% stratified bootstrap intervals, and, with two or more labels, the probability of improvement, an
aggregate over envs of normalized scores and a performance profile (Agarwal et al., "Deep Reinforcement Learning at
the Edge of the Statistical Precipice", NeurIPS 2021; its `rliable` library). Offline, from TensorBoard event
folders: ours, or anyone's that write CleanRL's tag names (charts/episodic_return, eval/return_mean, ...).

    python benchmarks/compare.py ours=runs_a/ sb3=runs_b/ --tag eval/return_mean --out cartpole
    python benchmarks/compare.py ours="runs/atari-breakout__ppo_puffer_async__*" \\
        cleanrl="cleanrl/runs/BreakoutNoFrameskip-v4__ppo_atari__*" --env Breakout --budget 1000000 --out breakout
    python benchmarks/compare.py --results a2c-cartpole-sb3 --out cartpole   # a suite's results file

Each LABEL=PATTERN names the run folders of one learner (a glob; a folder holding run folders counts as its run
folders). A run folder is one run; its env is the first `__`-separated part of its name (CleanRL's and our run names,
`{env_id}__{exp_name}__{seed}__{time}`), or --env's name for every run (one game under two ids). Writes OUT.png
(each env's curves: the mean over seeds with a 95% bootstrap band, against env steps, agent steps where a run logs
charts/env_steps apart from its steps, and wall-clock minutes), OUT-profile.png (with two or more labels and
--normalize) and OUT.md (the tables), and prints the tables.

A run's final score is the mean of its values logged after 90% of the budget (--budget, or the shortest run's last step;
counted in the steps a run logs at, its agent steps, as --total-timesteps counts them): the last evaluation of a run
that evaluates every tenth of its budget, the last tenth's episodes of a training-return curve. "better" in the tables
means the 95% intervals of the IQM separate; "on par" that they overlap.
"""

import argparse
import glob
import hashlib
import json
import os
import sys
import warnings
from pathlib import Path

import numpy as np

REPS = 2000  # bootstrap resamples: the interval's endpoints move by well under a percent of its width between seeds
CONFIDENCE = 0.95
# A run's score: the mean of its values in the last SHARE of the budget. "final": the last tenth; "whole run": every
# value up to the budget, the area under the learning curve over the budget (how fast it learns).
SCORES = {"final": 0.1, "whole run": 1.0}


# ----- statistics (numpy only; checked against rliable 1.2.0 in tests/test_compare.py) -----


def iqm(scores, axis=-1):
    """The interquartile mean: the mean of the middle half, int(n/4) values cut from each end (scipy's
    trim_mean(x, 0.25), as rliable's aggregate_iqm)."""
    scores = np.sort(np.asarray(scores, dtype=float), axis=axis)
    n = scores.shape[axis]
    cut = int(0.25 * n)
    return np.take(scores, np.arange(cut, n - cut), axis=axis).mean(axis=axis)


def stratified_resamples(tasks: list, reps: int, rng) -> np.ndarray:
    """(reps, runs) scores: each resample draws every task's runs with replacement from that task's own runs (the
    stratified bootstrap: every task keeps its number of runs)."""
    draws = [np.asarray(task, dtype=float)[rng.integers(0, len(task), size=(reps, len(task)))] for task in tasks]
    return np.concatenate(draws, axis=1)


def interval(statistic, tasks: list, reps: int = REPS, seed: int = 0) -> tuple:
    """(point, low, high): `statistic` of the pooled runs of `tasks` (a list of per-task score arrays) and its 95%
    percentile stratified bootstrap interval. `statistic(x, axis=-1)` reduces the last axis."""
    rng = np.random.default_rng(seed)
    pooled = np.concatenate([np.asarray(task, dtype=float) for task in tasks])
    resampled = statistic(stratified_resamples(tasks, reps, rng), axis=-1)
    tail = 100 * (1 - CONFIDENCE) / 2
    low, high = np.percentile(resampled, [tail, 100 - tail])
    return float(statistic(pooled, axis=-1)), float(low), float(high)


def probability_of_improvement(x_tasks: list, y_tasks: list) -> float:
    """P(X > Y): for each task, the chance that a run of X scores above a run of Y (a tie counts half: the
    Mann-Whitney U statistic over m * n), averaged over tasks."""
    per_task = []
    for x, y in zip(x_tasks, y_tasks):
        x = np.asarray(x, dtype=float)[..., :, None]
        y = np.asarray(y, dtype=float)[..., None, :]
        per_task.append(((x > y) + 0.5 * (x == y)).mean(axis=(-2, -1)))
    return np.mean(per_task, axis=0)


def improvement_interval(x_tasks: list, y_tasks: list, reps: int = REPS, seed: int = 0) -> tuple:
    """(point, low, high) of probability_of_improvement, X and Y each resampled within each task."""
    rng = np.random.default_rng(seed)
    point = float(probability_of_improvement(x_tasks, y_tasks))
    x_draws = [np.asarray(x, dtype=float)[rng.integers(0, len(x), size=(reps, len(x)))] for x in x_tasks]
    y_draws = [np.asarray(y, dtype=float)[rng.integers(0, len(y), size=(reps, len(y)))] for y in y_tasks]
    resampled = probability_of_improvement(x_draws, y_draws)
    tail = 100 * (1 - CONFIDENCE) / 2
    low, high = np.percentile(resampled, [tail, 100 - tail])
    return point, float(low), float(high)


def performance_profile(tasks: list, taus: np.ndarray) -> np.ndarray:
    """For each tau, the share of runs scoring above it, averaged over tasks (rliable's run-score distribution)."""
    return np.mean([(np.asarray(task, dtype=float)[:, None] > taus[None, :]).mean(axis=0) for task in tasks], axis=0)


MIN_RUNS = 3  # fewer runs on either side: no verdict


def verdict(a: tuple, b: tuple) -> str:
    """ "better" / "worse" where the intervals (point, low, high) of a and b separate, "on par" where they overlap."""
    if a[1] > b[2]:
        return "better"
    if a[2] < b[1]:
        return "worse"
    return "on par"


# ----- runs: TensorBoard events -> curves -----


def run_folders(pattern: str) -> list:
    """The run folders a pattern names: folders holding event files; a folder of run folders gives those."""
    found = []
    for path in sorted(glob.glob(pattern)):
        if not os.path.isdir(path):
            continue
        for folder, _, files in os.walk(path):
            if any(name.startswith("events.out.tfevents") for name in files):
                found.append(folder)
    return sorted(set(found))


def read_curve(run_dir: str, tag: str, events=None) -> list:
    """[[agent_step, env_step, wall_seconds, value], ...] of one tag in step order: the wall time counts from the
    run's first event; env_step comes from charts/env_steps where the run logs it (else it is the step). A step
    logged twice (a resumed run) keeps its last value. `events`: the run's EventAccumulator, kept by a caller that
    reads a run while it trains, so that each call reads on from where the last one stopped."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    if events is None:
        events = EventAccumulator(run_dir, size_guidance={"scalars": 0})
    events.Reload()
    tags = events.Tags()["scalars"]
    if tag not in tags:
        raise SystemExit(f"error: {run_dir} has no scalar {tag} (pass --tag; it has {sorted(tags)})")
    start = min(min(e.wall_time for e in events.Scalars(t)) for t in tags)
    by_step = {e.step: (e.wall_time - start, e.value) for e in events.Scalars(tag)}
    env_steps = {}
    if "charts/env_steps" in tags:
        env_steps = {e.step: e.value for e in events.Scalars("charts/env_steps")}
    known = np.array(sorted(env_steps)) if env_steps else None
    curve = []
    for step in sorted(by_step):
        env_step = step
        if env_steps:  # the env steps at the nearest logged step, scaled to this one (agents per env are fixed)
            nearest = known[np.argmin(np.abs(known - step))]
            env_step = env_steps[nearest] * step / nearest if nearest else 0.0
        wall, value = by_step[step]
        curve.append([int(step), round(float(env_step), 1), round(wall, 3), float(value)])
    return curve


def env_of(run_dir: str) -> str:
    return os.path.basename(os.path.normpath(run_dir)).split("__")[0]


def final_score(curve: list, budget: float, share: float = SCORES["final"]) -> float:
    """The mean of a curve's values at agent steps after (1 - share) of the budget and up to it; the last value at or
    before the budget where none falls there."""
    points = [(row[0], row[3]) for row in curve if row[0] <= budget]
    if not points:
        raise SystemExit(f"error: a run logged nothing by step {budget:,.0f} (pass a larger --budget)")
    late = [value for step, value in points if step > (1 - share) * budget]
    return float(np.mean(late)) if late else float(points[-1][1])


def budget_of(run: dict, budget: float) -> float:
    """A run's own budget where its learner has one (a suite may give each learner its own), else the common one."""
    return run.get("budget") or budget


def on_grid(curve: list, column: int, grid: np.ndarray) -> np.ndarray:
    """A curve's value at each grid point: the mean of its values in (previous grid point, this one], the last mean
    carried on where a bin is empty, NaN before the first value."""
    xs = np.array([row[column] for row in curve])
    values = np.array([row[3] for row in curve])
    out = np.full(len(grid), np.nan)
    last = np.nan
    previous = -np.inf
    for i, point in enumerate(grid):
        inside = (xs > previous) & (xs <= point)
        if inside.any():
            last = values[inside].mean()
        out[i] = last
        previous = point
    return out


def mean_band(curves: np.ndarray, seed: int = 0) -> tuple:
    """(mean, low, high) over runs (rows) at each grid point, the band a 95% bootstrap interval of the mean over
    runs; a point where some run has no value yet uses the runs that have one."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(curves), size=(REPS, len(curves)))
    tail = 100 * (1 - CONFIDENCE) / 2
    with warnings.catch_warnings():  # before a run's first value, and where a resample drew no run that has one
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(curves, axis=0)
        resampled = np.nanmean(curves[picks], axis=1)
        low, high = np.nanpercentile(resampled, [tail, 100 - tail], axis=0)
    return mean, low, high


# ----- what the command writes -----


def group(runs: list) -> dict:
    """{env: {label: [run, ...]}} in the order first seen; a run is {"label", "env", "seed", "curve", ...}."""
    groups = {}
    for run in runs:
        groups.setdefault(run["env"], {}).setdefault(run["label"], []).append(run)
    return groups


def tables(runs: list, budget: float, normalize: dict, tag: str = "score", scores=("final",)) -> tuple:
    """(table, values): the table ({"columns", "rows", "notes"}: for each env and score (SCORES), each learner's IQM
    with its interval; from the second learner on, P(first learner > this one) and the verdict of the intervals; in
    the notes, with `normalize` ({env: (random, reference)}) and two or more envs, each learner's aggregate of final
    scores over envs), and `values`, each figure by name, for the docs' prose."""
    groups = group(runs)
    labels = list(dict.fromkeys(run["label"] for run in runs))
    first = labels[0]
    budgets = {budget_of(run, budget) for run in runs}
    at = f"at {budget:,.0f} steps" if len(budgets) == 1 else "at each learner's budget"
    columns = ["env", "score", "learner", "runs", f"{tag} {at}: IQM (95% CI)", "per run"]
    if len(labels) > 1:
        columns += [f"P({first} > learner) (95% CI)", f"{first} against learner"]
    values = {}
    rows = []
    for env, by_label in groups.items():
        for score in scores:
            finals = {
                label: [
                    final_score(run["curve"], budget_of(run, budget), SCORES[score]) for run in by_label.get(label, [])
                ]
                for label in labels
            }
            estimates = {label: interval(iqm, [finals[label]]) for label in labels if finals[label]}
            for label in labels:
                if not finals[label]:
                    continue
                point, low, high = estimates[label]
                key = f"{slug(label)}.{slug(env)}.{slug(score)}"
                values[f"{key}.iqm"] = fmt(point)
                values[f"{key}.ci"] = f"{fmt(low)} to {fmt(high)}"
                row = [env, score, label, len(finals[label]), f"{fmt(point)} ({fmt(low)} to {fmt(high)})"]
                row.append(" / ".join(fmt(f) for f in finals[label]))
                if len(labels) > 1 and (label == first or first not in estimates):
                    row += ["", ""]
                elif len(labels) > 1:
                    improvement = improvement_interval([finals[first]], [finals[label]])
                    word = verdict(estimates[first], estimates[label])
                    if min(len(finals[first]), len(finals[label])) < MIN_RUNS:
                        word = f"fewer than {MIN_RUNS} runs"
                    values[f"{key}.verdict"] = word
                    row.append(f"{improvement[0]:.2f} ({improvement[1]:.2f} to {improvement[2]:.2f})")
                    row.append(word)
                rows.append(row)
    notes = []
    if normalize and len(groups) > 1:
        for label in labels:
            tasks = normalized_tasks(groups, label, budget, normalize)
            if tasks is None:
                continue
            point, low, high = interval(iqm, tasks)
            mean = interval(np.mean, tasks)
            values[f"{slug(label)}.aggregate.iqm"] = f"{point:.2f}"
            notes.append(
                f"{label}, over {len(tasks)} envs, scores normalized (random play 0, reference 1): IQM "
                f"{point:.2f} ({low:.2f} to {high:.2f}), mean {mean[0]:.2f} ({mean[1]:.2f} to {mean[2]:.2f})."
            )
    return {"columns": columns, "rows": rows, "notes": notes}, values


def normalized_tasks(groups: dict, label: str, budget: float, normalize: dict):
    """[per-env normalized final scores] of one label, (score - random) / (reference - random); None where the label
    misses an env or an env has no normalization."""
    tasks = []
    for env, by_label in groups.items():
        if label not in by_label or env not in normalize:
            return None
        random_score, reference = normalize[env]
        finals = np.array([final_score(run["curve"], budget_of(run, budget)) for run in by_label[label]])
        tasks.append((finals - random_score) / (reference - random_score))
    return tasks


def markdown(columns: list, rows: list) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return "\n".join(lines + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows])


def fmt(x: float) -> str:
    """Three significant figures, thousands separated."""
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def slug(text: str) -> str:
    """A folder's or a value's name: "ours --lstm" -> "ours-lstm"."""
    return "-".join("".join(c if c.isalnum() else " " for c in text.lower()).split())


def curves_hash(runs: list) -> str:
    """What a figure was drawn from: written into the PNG, so report.py --check knows a figure is its results'."""
    data = json.dumps([[run["label"], run["env"], run.get("seed"), run["curve"]] for run in runs], sort_keys=True)
    return hashlib.sha256(data.encode()).hexdigest()[:16]


def axis_end(members: list, column: int, budget: float) -> float:
    """Where a label's curves end on the axis of `column` of their rows: at its budget in agent steps; in env steps
    and in seconds, as far as its runs got by that budget (a run of three agents per env ends at a third of it)."""
    own = max(budget_of(run, budget) for run in members)
    if column == 0:
        return own
    return max(row[column] for run in members for row in run["curve"] if row[0] <= own)


def plot(runs: list, budget: float, out: str, tag: str, caption: str = "") -> str:
    """OUT.png: a row per env, a column per x axis (env steps; agent steps where they differ; wall-clock minutes),
    each label's mean over runs with its 95% bootstrap band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = group(runs)
    agent_axis = any(row[0] != row[1] for run in runs for row in run["curve"])
    axes_of = [("env steps", 1)] + ([("agent steps", 0)] if agent_axis else []) + [("wall-clock minutes", 2)]
    figure, axes = plt.subplots(
        len(groups), len(axes_of), figsize=(4.2 * len(axes_of), 3.0 * len(groups)), squeeze=False
    )
    for row, (env, by_label) in enumerate(groups.items()):
        for column, (name, index) in enumerate(axes_of):
            axis = axes[row][column]
            for number, (label, members) in enumerate(by_label.items()):
                scale = 60.0 if index == 2 else 1.0
                grid = np.linspace(0, axis_end(members, index, budget), 60)[1:]
                curves = np.array([on_grid(run["curve"], index, grid) for run in members])
                mean, low, high = mean_band(curves)
                colour = f"C{number}"
                axis.plot(grid / scale, mean, color=colour, label=f"{label} ({len(members)} runs)")
                axis.fill_between(grid / scale, low, high, color=colour, alpha=0.2, linewidth=0)
            axis.set_xlabel(name)
            axis.set_title(env, fontsize=9)
            if column == 0:
                axis.set_ylabel(tag, fontsize=8)
            axis.grid(alpha=0.3)
        axes[row][0].legend(fontsize=7)
    if caption:
        figure.suptitle(caption, fontsize=9)
    figure.tight_layout()
    path = f"{out}.png"
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=80, metadata={"Description": curves_hash(runs), "Software": None})
    plt.close(figure)
    return path


def plot_profile(runs: list, budget: float, normalize: dict, out: str) -> str:
    """OUT-profile.png: the share of runs above each normalized score, each label, with a 95% bootstrap band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = group(runs)
    labels = list(dict.fromkeys(run["label"] for run in runs))
    taus = np.linspace(0, 1.2, 61)
    rng = np.random.default_rng(0)
    figure, axis = plt.subplots(figsize=(5, 3.5))
    for number, label in enumerate(labels):
        tasks = normalized_tasks(groups, label, budget, normalize)
        if tasks is None:
            continue
        draws = [np.asarray(task)[rng.integers(0, len(task), size=(REPS, len(task)))] for task in tasks]
        resampled = np.mean([(d[:, :, None] > taus).mean(axis=1) for d in draws], axis=0)
        tail = 100 * (1 - CONFIDENCE) / 2
        low, high = np.percentile(resampled, [tail, 100 - tail], axis=0)
        axis.plot(taus, performance_profile(tasks, taus), color=f"C{number}", label=label)
        axis.fill_between(taus, low, high, color=f"C{number}", alpha=0.2, linewidth=0)
    axis.set_xlabel("normalized score tau")
    axis.set_ylabel("share of runs with score > tau")
    axis.legend(fontsize=7)
    axis.grid(alpha=0.3)
    figure.tight_layout()
    path = f"{out}-profile.png"
    figure.savefig(path, dpi=80, metadata={"Description": curves_hash(runs), "Software": None})
    plt.close(figure)
    return path


def runs_from_folders(patterns: list, tag: str, env: str = None) -> list:
    """[{"label", "env", "seed", "curve"}] from LABEL=PATTERN arguments; `env` names every run's env."""
    runs = []
    for argument in patterns:
        label, sep, pattern = argument.partition("=")
        if not sep or not label:
            raise SystemExit(f"error: {argument!r}: write each learner as LABEL=PATTERN (e.g. ours='runs/*')")
        folders = run_folders(pattern)
        if not folders:
            raise SystemExit(f"error: {label}={pattern}: no folder with TensorBoard events there")
        for number, folder in enumerate(folders):
            curve = read_curve(folder, tag)
            runs.append({"label": label, "env": env or env_of(folder), "seed": number, "curve": curve})
    return runs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("learners", nargs="*", help="LABEL=PATTERN: one learner's run folders (a glob)")
    parser.add_argument("--results", help="a results file's runs instead (benchmarks/results/NAME.json)")
    parser.add_argument("--tag", default="charts/episodic_return", help="the scalar compared")
    parser.add_argument("--env", help="every run's env, where learners name one env differently (default: its name's)")
    parser.add_argument("--budget", type=float, help="agent steps the scores are taken at (default: shortest run's)")
    parser.add_argument(
        "--normalize",
        nargs="+",
        default=[],
        metavar="ENV=RANDOM,REFERENCE",
        help="per-env random and reference scores: the aggregate over envs and the performance profile",
    )
    parser.add_argument(
        "--scores", nargs="+", default=["final"], choices=list(SCORES), help="final: the last tenth; whole run: all"
    )
    parser.add_argument("--out", default="compare", help="OUT.png, OUT-profile.png, OUT.md")
    opts = parser.parse_args(argv)
    normalize = {}
    for item in opts.normalize:
        env, _, pair = item.partition("=")
        try:
            random_score, reference = (float(x) for x in pair.split(","))
        except ValueError:
            raise SystemExit(f"error: --normalize {item!r}: write ENV=RANDOM,REFERENCE (e.g. CartPole-v1=22,500)")
        normalize[env] = (random_score, reference)
    if opts.results:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import results

        data = results.load(opts.results)
        runs = data["runs"]
        tag = data["suite"]["tag"]
        budget = opts.budget or data["suite"]["budget"]
        normalize = normalize or {env: tuple(pair) for env, pair in data["suite"].get("normalize", {}).items()}
    else:
        if not opts.learners:
            raise SystemExit("error: name the runs to compare (LABEL=PATTERN ...), or pass --results NAME")
        runs = runs_from_folders(opts.learners, opts.tag, opts.env)
        tag = opts.tag
        budget = opts.budget or min(run["curve"][-1][0] for run in runs)
    table, _ = tables(runs, budget, normalize, tag, opts.scores)
    text = "\n\n".join([markdown(table["columns"], table["rows"]), *table["notes"]])
    print(text)
    Path(f"{opts.out}.md").write_text(text + "\n")
    print(f"compare: {plot(runs, budget, opts.out, tag)}, {opts.out}.md", end="")
    if normalize and len({run["label"] for run in runs}) > 1:
        print(f", {plot_profile(runs, budget, normalize, opts.out)}", end="")
    print()


if __name__ == "__main__":
    main()
