"""Tune a script's flags on a laptop's time budget: an Optuna search (TPE; journal file, no database server) over a
search space written as data, several seeds per trial, bad trials pruned on their learning curves, and the winner
proved on seeds the search never used, beside the defaults, with IQMs and 95% intervals (benchmarks/compare.py).
In the manner of CleanRL's `cleanrl_utils/tuner.py`: each trial runs the script, reads its score back from the run's
TensorBoard events, and normalizes each env's score by a random and a reference score so that several envs tune at
once.

    python benchmarks/tune.py acrobot --hours 0.5                 # search, then prove the winner on unseen seeds
    python benchmarks/tune.py acrobot --hours 0.5                 # again after Ctrl-C: goes on from its journal
    python benchmarks/tune.py tetris-puffer --hours 12
    optuna-dashboard tune_runs/acrobot/journal.log    # the trials in a browser (pip install optuna-dashboard)

A space is a TOML file, benchmarks/spaces/NAME.toml: its title, the script, its envs, the tag scored, the seeds each
trial runs (at least 3), the unseen seeds of the proof, the score (`score`: "final", the default, or "whole run",
compare.py's), the step budget of a run (or run_minutes, --run-minutes:
the budget the defaults reach in that many minutes, measured once by a short run of the defaults and kept in the
journal), the minutes of the search and proof its docs table was made with, per-env
(random, reference) scores, and the flags searched, each a range (`low`, `high`, optional `log`; integers where both
bounds are) or a list of `choices`; optionally the pruner (`pruner`: "median", the default, or "halving", with
`prune_from`, the tenths of the first seed at its first rung, and `reduction`).

- Trial 0 is the defaults (the script's preset for the first env); every flag's range must hold its default.
- A trial runs the seeds one after another, each on every env. Its value is the mean over seeds of the normalized
  score (the final one: the mean of the values in the last tenth of the budget, as compare.py scores a run; or the
  whole run's, the area under the curve) minus one standard error of that mean, so that a lucky seed does not win.
  While a run trains, its curve is read every few seconds and reported at each tenth of its budget; the pruner
  (Optuna's median pruner, or successive halving) stops a trial that falls behind the others at the same point of
  the same seed.
- --hours is the whole job, search and proof: no trial starts once the time left is what the proof needs. The time
  spent is kept in the journal, so a search stopped and started again goes on with what is left. Ctrl-C stops the
  runs in flight; the trials they belonged to run again at the next launch, from the first run they had not
  finished (the finished runs' scores and points are in the journal). The journal
  (--journal; default OUT/journal.log) and the proof's finished runs beside it (JOURNAL's name, .proof.json) are all
  a search needs to go on, on another machine too: --journal benchmarks/results/runs/NAME.log keeps them where git
  does.
- The proof: the best two tuned trials and the defaults, on the space's proof seeds, through benchmarks/launch.py's
  runner; the results file benchmarks/results/tune-NAME.json holds every trial (settings, value, cost, state), the
  proof's table and curves, and the verdict of the winner (the search's best tuned trial, chosen before the proof;
  the notes say so where the defaults ranked above it): better where its interval of the normalized IQM lies above
  the defaults', on par where they overlap, worse where below.
  The winner's preset (every flag a preset of the script names) is written to OUT/preset.py, in the form of
  common/presets.py's entries.
"""

import argparse
import dataclasses
import importlib.util
import json
import math
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402
import launch  # noqa: E402
import results as results_module  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(1, str(ROOT))  # common/, for the scripts' presets
SPACES = ROOT / "benchmarks" / "spaces"
FIGURES = ROOT / "docs" / "figures"
# the function of common/presets.py that gives each script's flags for an env (ppo_tetris.py takes Tetris only)
PRESET_OF = {"ppo_puffer_async.py": "ppo_puffer_async", "a2c_cartpole.py": "a2c_cartpole", "ppo_tetris.py": None}
COMMAND = "{python} {root}/{script} --env-id {env} --seed {seed} --total-timesteps {budget} --checkpoint-freq 0"
REPORTS = 10  # a run's curve reaches the pruner at each tenth of its budget
POLL_SECONDS = 2.0


# ----- the search space -----


def load_space(name: str) -> dict:
    path, space = launch.read_toml(name, SPACES, "search space")
    space["name"] = path.stem
    for key in ("title", "script", "envs", "tag", "seeds", "proof_seeds", "params"):
        if key not in space:
            raise SystemExit(f"error: {path}: the space names no {key!r}")
    if space.get("score", "final") not in compare.SCORES:
        raise SystemExit(f"error: {path}: score must be one of {', '.join(compare.SCORES)}")
    if set(space["seeds"]) & set(space["proof_seeds"]):
        raise SystemExit(f"error: {path}: proof_seeds must be seeds the search never uses")
    if space.get("pruner", "median") not in ("median", "halving", "none"):
        raise SystemExit(f"error: {path}: pruner must be median, halving or none")
    if len(space["envs"]) > 1 and set(space["envs"]) - set(space.get("normalize", {})):
        raise SystemExit(f"error: {path}: with several envs, [normalize] needs a (random, reference) for each")
    return space


def script_defaults(space: dict) -> dict:
    """Every flag of the script's run of the space's first env, {field: value}: its preset (common/presets.py)."""
    from common import presets, run

    spec = importlib.util.spec_from_file_location(f"tuned_{Path(space['script']).stem}", ROOT / space["script"])
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)  # importing a script starts no training
    preset_of = PRESET_OF.get(space["script"])
    preset_function = getattr(presets, preset_of) if preset_of else None
    args = run.defaults(script.Args, Path(space["script"]).stem, preset_function, ["--env-id", space["envs"][0]])
    return dataclasses.asdict(args)


def field(flag: str) -> str:
    return flag.replace("-", "_")


def check_defaults(space: dict, defaults: dict) -> dict:
    """The defaults of the searched flags, {flag: value}; a one-line error where a flag is unknown or its default lies
    outside its range (trial 0 must be the defaults)."""
    chosen = {}
    for flag, spec in space["params"].items():
        if field(flag) not in defaults:
            raise SystemExit(f"error: {space['script']} has no flag --{flag} (fix [params] in the space)")
        value = defaults[field(flag)]
        inside = value in spec["choices"] if "choices" in spec else spec["low"] <= value <= spec["high"]
        if not inside:
            raise SystemExit(f"error: --{flag}'s default {value!r} lies outside its range in the space: widen it")
        chosen[flag] = value
    return chosen


def suggest(trial, flag: str, spec: dict):
    """The trial's value of one flag: a choice, an integer range or a float range (log-uniform where `log`)."""
    if "choices" in spec:
        return trial.suggest_categorical(flag, spec["choices"])
    if isinstance(spec["low"], int) and isinstance(spec["high"], int):
        return trial.suggest_int(flag, spec["low"], spec["high"], log=spec.get("log", False))
    return trial.suggest_float(flag, spec["low"], spec["high"], log=spec.get("log", False))


def flags_of(params: dict) -> str:
    """--learning-rate 0.001 --anneal-lr / --no-anneal-lr: params as the script's command line."""
    words = []
    for flag, value in params.items():
        if isinstance(value, bool):
            words.append(f"--{flag}" if value else f"--no-{flag}")
        else:
            words.append(f"--{flag} {value}")
    return " ".join(words)


def shown(params: dict) -> str:
    """flags_of for reading: floats to four significant figures (the runs take the exact values)."""
    rounded = {}
    for flag, value in params.items():
        rounded[flag] = float(f"{value:.4g}") if isinstance(value, float) else value
    return flags_of(rounded)


def command_of(space: dict, env: str, seed: int, budget: int, params: dict) -> str:
    template = space.get("command", COMMAND).replace("{script}", space["script"])
    command = template.format(python=sys.executable, root=ROOT, env=env, seed=seed, budget=budget)
    return f"{command} {flags_of(params)}"


# ----- scores -----


def normalized(score: float, env: str, space: dict) -> float:
    """(score - random) / (reference - random) where the space gives the env's pair, else the score itself."""
    if env not in space.get("normalize", {}):
        return score
    random_score, reference = space["normalize"][env]
    return (score - random_score) / (reference - random_score)


def trial_value(seed_scores: list) -> float:
    """The mean over seeds minus one standard error of that mean (the sample standard deviation / sqrt(n)): a setting
    must be good on every seed, not on one."""
    scores = np.asarray(seed_scores, dtype=float)
    if len(scores) < 2:
        return float(scores.mean())
    return float(scores.mean() - scores.std(ddof=1) / math.sqrt(len(scores)))


def report_points(curve: list, budget: int, reported: int) -> list:
    """[(k, value)] for each tenth k of the budget the curve has passed since `reported` tenths: the mean of its
    values in that tenth (the last value before it where the tenth has none)."""
    points = []
    for k in range(reported + 1, REPORTS + 1):
        end = k * budget / REPORTS
        if not curve or curve[-1][0] < end:
            break
        window = [row[3] for row in curve if end - budget / REPORTS < row[0] <= end]
        before = [row[3] for row in curve if row[0] <= end]
        if not before:
            break
        points.append((k, float(np.mean(window)) if window else before[-1]))
    return points


def live_curve(job: dict, tag: str) -> list:
    """The curve a run has written so far; empty before its first value of `tag`. Its events are read on from where
    the last call stopped (job["events"]): read whole at every poll, a long run's file would cost the run a core."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    runs = compare.run_folders(str(job["folder"]))
    if len(runs) != 1:
        return []
    if "events" not in job:
        job["events"] = EventAccumulator(runs[0], size_guidance={"scalars": 0})
    try:
        return compare.read_curve(runs[0], tag, job["events"])
    except SystemExit:  # the tag is not written yet
        return []


def calibrate(space: dict, defaults: dict, minutes: float, out: Path) -> int:
    """The step budget the defaults reach in `minutes` of training: a short run of the defaults
    (space["calibrate_steps"]) measures their steps per second (charts/SPS, the script's own) over its second half,
    which carries its last step on to `minutes`; rounded to two significant figures."""
    steps = space.get("calibrate_steps", 20_000)
    folder = out / "calibrate"
    job = {"folder": folder, "cores": space.get("cores", 1)}
    job["command"] = command_of(space, space["envs"][0], space["seeds"][0], steps, defaults)
    print(f"tune: measuring the defaults' speed ({steps:,} steps): {job['command']}", flush=True)
    process = launch.start(job, list(range(job["cores"])))
    if process.wait() != 0:
        raise SystemExit(f"error: the calibration run failed: {folder / 'log.txt'}")
    process.log.close()
    sps, budget = steps_in(live_curve(job, "charts/SPS"), minutes)
    rounded = int(round(budget, 1 - int(math.floor(math.log10(budget)))))
    print(f"tune: the defaults train at {sps:,.0f} steps/s after start-up: {minutes:g} min is {rounded:,} steps")
    return rounded


def steps_in(sps_curve: list, minutes: float) -> tuple:
    """(steps per second, steps reached in `minutes`) from a run's charts/SPS curve. charts/SPS is the run's steps
    over its time so far, start-up included, so a short run's last value undercounts what a long one does: the rate
    of the curve's second half (on the script's clock, step / SPS) carries its last step on to `minutes`."""
    end = sps_curve[-1]
    middle = next(row for row in sps_curve if row[0] >= end[0] / 2)
    seconds_end = end[0] / end[3]
    seconds_middle = middle[0] / middle[3]
    sps = end[3]
    if seconds_end > seconds_middle:
        sps = (end[0] - middle[0]) / (seconds_end - seconds_middle)
    return sps, end[0] + sps * (60 * minutes - seconds_end)


# ----- the search -----


def new_run(entry: dict, space: dict, budget: int, out: Path, cores: list) -> None:
    """Starts the trial's next run (seed by seed, each seed on every env)."""
    seed = space["seeds"][entry["run"] // len(space["envs"])]
    env = space["envs"][entry["run"] % len(space["envs"])]
    folder = out / "trials" / str(entry["trial"].number) / env / f"seed{seed}"
    entry["job"] = {"folder": folder, "cores": len(cores), "env": env, "seed": seed}
    entry["job"]["command"] = command_of(space, env, seed, budget, entry["params"])
    entry["process"] = launch.start(entry["job"], cores)
    entry["reported"] = 0


def step_trial(entry: dict, study, space: dict, budget: int) -> str:
    """Reads the run's curve, reports it to the pruner; "running", "pruned", "run done" or "failed"."""
    job = entry["job"]
    finished = entry["process"].poll() is not None  # before reading: a finished run's curve is whole
    curve = live_curve(job, space["tag"])
    for k, value in report_points(curve, budget, entry["reported"]):
        step = entry["run"] * REPORTS + k  # the same point of the same seed and env in every trial
        entry["trial"].report(normalized(value, job["env"], space), step)
        entry["reported"] = k
        if entry["trial"].should_prune():
            return "pruned"
    if not finished:
        return "running"
    if entry["process"].returncode != 0 or not curve:
        return "failed"
    score = compare.final_score(curve, budget, compare.SCORES[space.get("score", "final")])
    entry["scores"].setdefault(job["seed"], {})[job["env"]] = score
    entry["run_seconds"].append(time.time() - entry["process"].started)
    return "run done"


def take_over(study, trial, entry: dict, space: dict) -> int:
    """A trial that runs again the settings of a stopped one (requeue_stopped) takes over the runs that one finished:
    their scores and wall times, and the points they reported, so that the pruner sees the same curve; it goes on
    from the next run. Returns how many runs it took over."""
    number = trial.user_attrs.get("rerun_of")
    if number is None:
        return 0
    stopped = study.trials[number]
    runs = min(len(stopped.user_attrs.get("run_seconds", [])), len(space["seeds"]) * len(space["envs"]) - 1)
    entry["scores"] = {int(seed): by_env for seed, by_env in stopped.user_attrs.get("scores", {}).items()}
    entry["run_seconds"] = list(stopped.user_attrs.get("run_seconds", []))[:runs]
    for step, value in sorted(stopped.intermediate_values.items()):
        if step <= runs * REPORTS:
            trial.report(value, step)
    entry["run"] = runs
    return runs


def seed_means(scores: dict, space: dict) -> list:
    """Per finished seed (every env done), the mean over envs of the normalized scores."""
    means = []
    for by_env in scores.values():
        if len(by_env) == len(space["envs"]):
            means.append(float(np.mean([normalized(by_env[env], env, space) for env in space["envs"]])))
    return means


def stop_process(entry: dict) -> None:
    launch.stop(entry["process"])
    entry["process"].log.close()


def finish(entry: dict, study, state, value=None) -> None:
    import optuna

    trial = entry["trial"]
    trial.set_user_attr("seconds", round(time.time() - entry["started"], 1))
    trial.set_user_attr("cores", entry["job"]["cores"])
    trial.set_user_attr("scores", {str(seed): by_env for seed, by_env in entry["scores"].items()})
    trial.set_user_attr("run_seconds", [round(s, 1) for s in entry["run_seconds"]])
    if state == optuna.trial.TrialState.COMPLETE:
        study.tell(trial, value)
    else:
        study.tell(trial, state=state)


def run_seconds_of(study) -> float:
    """A run's wall time: the median over every finished run of the search (0 before the first)."""
    seconds = [s for trial in study.trials for s in trial.user_attrs.get("run_seconds", [])]
    return float(np.median(seconds)) if seconds else 0.0


def progress_line(study, running: list, spent: float, hours, proof_seconds: float) -> str:
    import optuna

    states = [trial.state for trial in study.trials]
    done = states.count(optuna.trial.TrialState.COMPLETE)
    pruned = states.count(optuna.trial.TrialState.PRUNED)
    failed = states.count(optuna.trial.TrialState.FAIL)
    line = f"tune: {done} trials done, {pruned} pruned, {failed} stopped or failed, {len(running)} running"
    if done:
        best = study.best_trial
        line += f"; best {best.value:.3f} (trial {best.number}: {shown(best.params)})"
    line += f"; {spent / 3600:.2f} h spent"
    if hours:
        line += f", {max(hours - spent / 3600, 0):.2f} h left"
        if proof_seconds:  # known once a run of the defaults has finished
            line += f" (the proof needs {proof_seconds / 3600:.2f} h)"
    return line


def search(study, space: dict, budget: int, out: Path, opts) -> None:
    """Runs trials until --n-trials have started or the time left is what the proof needs; Ctrl-C stops the runs in
    flight and marks their trials stopped (they run again at the next launch)."""
    import optuna

    cores_per_run = space.get("cores", 1)
    slots = [list(range(i * cores_per_run, (i + 1) * cores_per_run)) for i in range(opts.workers // cores_per_run)]
    if not slots:
        raise SystemExit(f"error: a run of this space takes {cores_per_run} cores: pass --workers {cores_per_run}")
    spent_before = study.user_attrs.get("seconds", 0.0)
    begun = time.time()
    running = []
    last_line = 0.0

    def spent() -> float:
        return spent_before + time.time() - begun

    def proof_seconds() -> float:
        runs = 3 * len(space["proof_seeds"]) * len(space["envs"])
        return runs * run_seconds_of(study) * cores_per_run / opts.workers

    def may_start() -> bool:
        if opts.n_trials is not None and started_count(study) >= opts.n_trials:
            return False
        if opts.hours is None:
            return True
        trial_seconds = len(space["seeds"]) * len(space["envs"]) * run_seconds_of(study)
        return spent() + trial_seconds + proof_seconds() <= opts.hours * 3600

    signal.signal(signal.SIGTERM, signal.default_int_handler)  # `kill` stops a search as Ctrl-C does
    try:
        while True:
            while slots and may_start():
                trial = study.ask()
                params = {flag: suggest(trial, flag, spec) for flag, spec in space["params"].items()}
                entry = {"trial": trial, "params": params, "run": 0, "scores": {}, "run_seconds": []}
                entry["started"] = time.time()
                entry["cores"] = slots.pop(0)
                taken = take_over(study, trial, entry, space)
                new_run(entry, space, budget, out, entry["cores"])
                running.append(entry)
                print(f"tune: trial {trial.number} started: {shown(params)}", flush=True)
                if taken:
                    number = trial.user_attrs["rerun_of"]
                    print(f"tune: trial {trial.number} goes on from trial {number}'s {taken} runs", flush=True)
            if not running:
                break
            time.sleep(POLL_SECONDS)
            for entry in list(running):
                state = step_trial(entry, study, space, budget)
                if state == "running":
                    continue
                if state == "run done" and entry["run"] + 1 < len(space["seeds"]) * len(space["envs"]):
                    entry["process"].log.close()
                    entry["run"] += 1
                    new_run(entry, space, budget, out, entry["cores"])
                    continue
                stop_process(entry)
                running.remove(entry)
                slots.append(entry["cores"])
                number = entry["trial"].number
                if state == "run done":
                    value = trial_value(seed_means(entry["scores"], space))
                    finish(entry, study, optuna.trial.TrialState.COMPLETE, value)
                    print(f"tune: trial {number} done: {value:.3f}", flush=True)
                elif state == "pruned":
                    finish(entry, study, optuna.trial.TrialState.PRUNED)
                    print(f"tune: trial {number} pruned at run {entry['run'] + 1}, tenth {entry['reported']}")
                else:
                    finish(entry, study, optuna.trial.TrialState.FAIL)
                    print(f"tune: trial {number} failed: {entry['job']['folder'] / 'log.txt'}", flush=True)
                study.set_user_attr("seconds", round(spent(), 1))
                print(progress_line(study, running, spent(), opts.hours, proof_seconds()), flush=True)
                last_line = time.time()
            if time.time() - last_line > 60:
                print(progress_line(study, running, spent(), opts.hours, proof_seconds()), flush=True)
                last_line = time.time()
    except KeyboardInterrupt:
        for entry in running:
            stop_process(entry)
            entry["trial"].set_user_attr("stopped", True)
            finish(entry, study, optuna.trial.TrialState.FAIL)
        study.set_user_attr("seconds", round(spent(), 1))
        print("\ntune: stopped; the same command goes on from the journal (each stopped trial from its finished runs)")
        sys.exit(130)


def started_count(study) -> int:
    """Trials started, those stopped by Ctrl-C left out (their settings run again as new trials)."""
    import optuna

    asked = [trial for trial in study.trials if trial.state != optuna.trial.TrialState.WAITING]
    return len(asked) - len(study.user_attrs.get("requeued", []))


def requeue_stopped(study) -> None:
    """A trial stopped by Ctrl-C, or left running by a search that was killed, runs again with its settings: enqueued
    once, as a new trial, which goes on from the runs it finished (take_over). Settings that a trial already ran to
    its end are not run again: its seeds give the same runs. Either way the stopped trial is left out of the count of
    trials started."""
    import optuna

    requeued = study.user_attrs.get("requeued", [])
    ended = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    ran = [trial.params for trial in study.trials if trial.state in ended]
    for trial in study.trials:
        if trial.state == optuna.trial.TrialState.RUNNING:  # its search was killed: no one will finish it
            study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
        stopped = trial.user_attrs.get("stopped") or trial.state == optuna.trial.TrialState.RUNNING
        if stopped and trial.number not in requeued:
            if trial.params not in ran:
                study.enqueue_trial(trial.params, user_attrs={"rerun_of": trial.number}, skip_if_exists=False)
            requeued.append(trial.number)
    study.set_user_attr("requeued", requeued)


# ----- the proof on unseen seeds -----


def best_two(study, defaults: dict) -> list:
    """The two best finished trials whose settings differ from the defaults and from each other."""
    import optuna

    chosen = []
    done = [trial for trial in study.trials if trial.state == optuna.trial.TrialState.COMPLETE]
    for trial in sorted(done, key=lambda trial: -trial.value):
        if trial.params != defaults and all(trial.params != other.params for other in chosen):
            chosen.append(trial)
    return chosen[:2]


def prove(space: dict, study, defaults: dict, budget: int, out: Path, opts) -> dict:
    """The best two trials and the defaults on the proof seeds, through the launcher; the table, the runs and the
    verdict of each tuned setting against the defaults. The winner is the search's best trial, chosen before the
    proof: choosing it on the proof's seeds too would let those seeds both pick it and judge it."""
    finalists = best_two(study, defaults)
    if not finalists:
        raise SystemExit("tune: no finished trial differs from the defaults: nothing to prove")
    learners = [
        {"label": f"trial {trial.number}", "envs": space["envs"], "params": trial.params} for trial in finalists
    ]
    learners.append({"label": "defaults", "envs": space["envs"], "params": defaults})
    for learner in learners:
        template = space.get("command", COMMAND).replace("{script}", space["script"])
        learner["command"] = f"{template} {flags_of(learner['params'])}"
        learner["cores"] = space.get("cores", 1)
    suite = {"name": f"tune-{space['name']}", "learners": learners, "budget": budget, "tag": space["tag"]}
    jobs = launch.jobs_of(suite, out / "proof", [], space["proof_seeds"])
    record = Path(opts.journal).with_suffix(".proof.json")  # the proof's finished runs, beside the journal
    launch.restore(jobs, json.loads(record.read_text()) if record.exists() else [])
    print(f"tune: the proof: {len(jobs)} runs on the unseen seeds {space['proof_seeds']}", flush=True)
    failed = launch.launch(jobs, opts.workers, record)
    if failed:
        raise SystemExit(f"error: {len(failed)} runs of the proof failed; launch again to run them")
    runs = launch.read_runs(jobs)
    normalize = {env: tuple(pair) for env, pair in space.get("normalize", {}).items()}
    table, values = compare.tables(runs, budget, normalize, space["tag"], [space.get("score", "final")])
    groups = compare.group(runs)
    estimates = {}
    for learner in learners:
        tasks = []
        for env in space["envs"]:
            share = compare.SCORES[space.get("score", "final")]
            finals = [compare.final_score(run["curve"], budget, share) for run in groups[env][learner["label"]]]
            tasks.append([normalized(score, env, space) for score in finals])
        estimates[learner["label"]] = compare.interval(compare.iqm, tasks)
    proof = {"table": table, "values": values, "runs": runs, "learners": learners}
    proof["estimates"] = estimates
    proof["verdicts"] = {}
    for learner in learners[:-1]:
        proof["verdicts"][learner["label"]] = compare.verdict(estimates[learner["label"]], estimates["defaults"])
    proof["winner"] = learners[0]
    proof["verdict"] = proof["verdicts"][learners[0]["label"]]
    # Where the defaults scored best on the search's seeds, the search found nothing better: the proof still runs its
    # best tuned setting, to show on unseen seeds how far the search's ranking carries
    proof["defaults_first"] = study.best_trial.params == defaults
    return proof


def preset_keys(space: dict, defaults_all: dict) -> list:
    """The flags a preset of the script names (common/presets.py: each of a script's presets names the same ones);
    every flag for ppo_tetris.py, which has no presets."""
    from common import presets

    tables = {"ppo_puffer_async.py": presets.PPO_PUFFER_ASYNC, "a2c_cartpole.py": presets.A2C_CARTPOLE}
    if space["script"] not in tables:
        return [name for name in defaults_all if name not in ("env_id", "seed")]
    return list(next(iter(tables[space["script"]].values())))


def preset_text(space: dict, defaults_all: dict, winner: dict, proof: dict) -> str:
    """The winner as a preset: the flags a preset names, the tuned ones replaced, in the form of common/presets.py's
    entries."""
    tuned = {field(flag): value for flag, value in winner["params"].items()}
    preset = {name: tuned.get(name, defaults_all[name]) for name in preset_keys(space, defaults_all)}
    tuned_estimate = fmt_estimate(proof["estimates"][winner["label"]])
    defaults_estimate = fmt_estimate(proof["estimates"]["defaults"])
    ranked = ", its best tuned setting (the search ranked the defaults first)" if proof["defaults_first"] else ""
    lines = [
        f"# {space['script']} on {', '.join(space['envs'])}: {winner['label']} of the search "
        f"benchmarks/spaces/{space['name']}.toml{ranked}, {proof['verdict']} against the defaults on the unseen seeds",
        f"# {space['proof_seeds']} (normalized IQM and 95% interval: {tuned_estimate} against {defaults_estimate}).",
        "dict(",
    ]
    lines += [f"    {name}={value!r}," for name, value in preset.items()]
    lines.append(")")
    return "\n".join(lines) + "\n"


def search_notes(study, space: dict, budget: int, proof: dict) -> list:
    """The search under the proof's table: what it cost, the winner and its verdict, and every trial."""
    trials = trials_table(study)
    states = [row[1] for row in trials["rows"]]
    core_minutes = sum(float(row[3]) for row in trials["rows"])
    winner = proof["winner"]
    if proof["defaults_first"]:
        found = (
            f"The search ranked the defaults first (value {study.best_value:.3f}): no setting it tried scored higher "
            f"on its seeds. Its best tuned setting, {winner['label']} (`{shown(winner['params'])}`),"
        )
    else:
        found = f"The winner, {winner['label']} (`{shown(winner['params'])}`),"
    summary = (
        f"The search: {len(states)} trials ({states.count('complete')} complete, {states.count('pruned')} pruned, "
        f"{states.count('fail')} stopped or failed), {budget:,} steps a run, seeds {space['seeds']}, "
        f"{core_minutes:.0f} core-minutes of runs. {found} "
        f"is **{proof['verdict']}** against the defaults on the unseen seeds {space['proof_seeds']}: normalized IQM "
        f"{fmt_estimate(proof['estimates'][winner['label']])} against {fmt_estimate(proof['estimates']['defaults'])} "
        f"(95% intervals). A trial's value: the mean over its seeds of the normalized final score, less one "
        f"standard error."
    )
    for label, word in list(proof["verdicts"].items())[1:]:  # the runner-up: how far the search's ranking carries
        summary += (
            f" The search's second, {label}, is {word} against the defaults there: "
            f"{fmt_estimate(proof['estimates'][label])}."
        )
    # the scores are taken at one step budget, so a setting that trains more per step is not charged for it there
    minutes = {}
    for run in proof["runs"]:
        minutes.setdefault(run["label"], []).append(run["minutes"])
    walls = ", ".join(f"{label} {np.mean(values):.1f}" for label, values in minutes.items())
    cores = "one core" if space.get("cores", 1) == 1 else f"{space['cores']} cores"
    summary += f" Wall-clock minutes of a proof run on {cores}, the mean over its seeds: {walls}."
    return [summary, compare.markdown(trials["columns"], trials["rows"])]


def fmt_estimate(estimate: tuple) -> str:
    return f"{estimate[0]:.3f} [{estimate[1]:.3f}, {estimate[2]:.3f}]"


def trials_table(study) -> dict:
    """Every trial: number, state, value, cost in core-minutes, its settings."""
    rows = []
    for trial in study.trials:
        minutes = trial.user_attrs.get("seconds", 0) * trial.user_attrs.get("cores", 1) / 60
        # a pruned trial has no value: Optuna keeps its last report there, one point of one seed's curve
        value = f"{trial.value:.3f}" if trial.state.name == "COMPLETE" else ""
        rows.append([trial.number, trial.state.name.lower(), value, f"{minutes:.1f}", shown(trial.params)])
    return {"columns": ["trial", "state", "value", "core-minutes", "settings"], "rows": rows}


def main(argv=None):
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("space", help="a search space's name (benchmarks/spaces/NAME.toml) or a .toml file")
    parser.add_argument("--hours", type=float, help="wall-clock hours for the search and its proof (default: none)")
    parser.add_argument("--n-trials", type=int, help="start at most this many trials (default: until --hours)")
    parser.add_argument("--workers", type=int, default=os.cpu_count(), help="cores to fill (default: all)")
    parser.add_argument("--run-minutes", type=float, help="a run's budget: the defaults' steps in this time")
    parser.add_argument("--pruner", choices=["median", "halving", "none"], help="default: the space's, else median")
    parser.add_argument("--prune-after", type=int, default=5, help="finished trials before the median pruner acts")
    parser.add_argument("--out", help="the runs (default: tune_runs/NAME)")
    parser.add_argument(
        "--journal", help="the search's journal (default: OUT/journal.log); the proof's finished runs go beside it"
    )
    parser.add_argument("--no-proof", action="store_true", help="search only")
    opts = parser.parse_args(argv)
    if opts.hours is None and opts.n_trials is None:
        raise SystemExit("error: give --hours (the time the search and its proof may take) or --n-trials")
    space = load_space(opts.space)
    if len(space["seeds"]) < 3:
        raise SystemExit("error: seeds: a trial needs at least 3 seeds (one lucky seed must not win)")
    out = Path(opts.out) if opts.out else ROOT / "tune_runs" / space["name"]
    out.mkdir(parents=True, exist_ok=True)
    defaults_all = script_defaults(space)
    defaults = check_defaults(space, defaults_all)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    opts.journal = opts.journal or str(out / "journal.log")
    Path(opts.journal).parent.mkdir(parents=True, exist_ok=True)
    storage = JournalStorage(JournalFileBackend(opts.journal))
    # Successive halving's rungs: the first at `prune_from` tenths of the first seed, each next `reduction` times
    # further on (tenths counted across the seeds); at each, a trial goes on only among the best 1 in `reduction`
    # of the trials that reached it. Most trials then cost a fraction of one seed's run, which a run of many
    # minutes needs for a search of tens of trials to fit its hours (the median pruner keeps about half to the end).
    halving = optuna.pruners.SuccessiveHalvingPruner(
        min_resource=space.get("prune_from", 1), reduction_factor=space.get("reduction", 3)
    )
    pruners = {
        "median": optuna.pruners.MedianPruner(n_startup_trials=opts.prune_after, n_warmup_steps=REPORTS // 2),
        "halving": halving,
        "none": optuna.pruners.NopPruner(),
    }
    study = optuna.create_study(
        study_name=space["name"],
        storage=storage,
        pruner=pruners[opts.pruner or space.get("pruner", "median")],
        direction="maximize",
        load_if_exists=True,
    )
    # Seeded by the trials the journal holds: a search started again draws new settings, where a sampler seeded as
    # the first part was would replay the first part's random start (TPE's first trials are random draws)
    study.sampler = optuna.samplers.TPESampler(
        n_startup_trials=8, multivariate=True, constant_liar=True, seed=len(study.trials)
    )
    if not study.trials:
        study.enqueue_trial(defaults, user_attrs={"defaults": True})  # trial 0: today's defaults
    requeue_stopped(study)
    budget = study.user_attrs.get("budget")
    if budget is None:
        budget = space.get("budget")
        run_minutes = opts.run_minutes or space.get("run_minutes")
        if run_minutes:
            budget = calibrate(space, defaults, run_minutes, out)
        if budget is None:
            raise SystemExit("error: the space gives no budget: pass --run-minutes (the defaults' run length)")
        study.set_user_attr("budget", budget)
    print(f"tune: {space['title']}: {budget:,} steps a run, seeds {space['seeds']}; journal {opts.journal}")
    search(study, space, budget, out, opts)
    print(progress_line(study, [], study.user_attrs.get("seconds", 0.0), opts.hours, 0.0), flush=True)
    if opts.no_proof:
        return 0
    proof = prove(space, study, defaults, budget, out, opts)
    print(compare.markdown(proof["table"]["columns"], proof["table"]["rows"]))
    winner = proof["winner"]
    (out / "preset.py").write_text(preset_text(space, defaults_all, winner, proof))
    if proof["defaults_first"]:
        print(f"tune: the search ranked the defaults first; its best tuned setting, {winner['label']}:", flush=True)
    print(
        f"tune: {winner['label']} ({shown(winner['params'])}) is {proof['verdict']} against the defaults on the "
        f"unseen seeds: normalized IQM {fmt_estimate(proof['estimates'][winner['label']])} against "
        f"{fmt_estimate(proof['estimates']['defaults'])}; its preset: {out / 'preset.py'}"
    )
    figure = FIGURES / f"tune-{space['name']}.png"
    compare.plot(proof["runs"], budget, str(figure.with_suffix("")), space["tag"])
    search_data = {
        "space": {key: value for key, value in space.items()},
        "budget": budget,
        "hours": study.user_attrs.get("seconds", 0.0) / 3600,
        "trials": trials_table(study),
        "winner": {"label": winner["label"], "params": winner["params"], "verdict": proof["verdict"]},
        "verdicts": proof["verdicts"],
        "estimates": {label: list(estimate) for label, estimate in proof["estimates"].items()},
        "figure": str(figure.relative_to(ROOT)) if figure.is_relative_to(ROOT) else str(figure),
    }
    values = {**proof["values"], "winner.verdict": proof["verdict"]}
    for label, estimate in proof["estimates"].items():
        values[f"{compare.slug(label)}.normalized.iqm"] = fmt_estimate(estimate)
    minutes = sum(run["minutes"] * space.get("cores", 1) for run in proof["runs"])
    # the table the docs show: the proof's, its notes the search (every trial: settings, value, state, cost)
    table = {**proof["table"], "notes": [*proof["table"]["notes"], *search_notes(study, space, budget, proof)]}
    # the proof is a suite of three learners: its figure renders as a suite's (benchmarks/report.py)
    suite = {"title": f"{space['title']}: the proof on unseen seeds", "tag": space["tag"], "budget": budget}
    suite["seeds"] = space["proof_seeds"]
    suite["figure"] = search_data["figure"]
    results_module.save(
        f"tune-{space['name']}",
        (study.user_attrs.get("seconds", 0.0) / 60) + minutes / opts.workers,
        table=table,
        runs=proof["runs"],
        values=values,
        depends_on=[space["script"]],
        presets=results_module.presets_taken([command_of(space, env, 1, budget, defaults) for env in space["envs"]]),
        extra={"search": search_data, "suite": suite},
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
