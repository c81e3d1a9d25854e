"""The one launcher: runs a suite, (learner command, env) x seeds, one run per worker, keeps every run's TensorBoard
events in one folder, and writes the suite's results file (every run's curve and final score; the table of IQMs and
intervals) and its figure from those events, with benchmarks/compare.py. In the manner of CleanRL's
`cleanrl_utils/benchmark.py`; a suite is a short data file, benchmarks/suites/NAME.toml.

    python benchmarks/launch.py a2c-cartpole-sb3                 # the suite; --workers defaults to the cores
    python benchmarks/launch.py a2c-cartpole-sb3 --dry-run       # its commands, run nothing
    python benchmarks/launch.py mujoco --only ours --seeds 1     # part of a suite: prints its table, saves nothing
    python benchmarks/launch.py mujoco --keep                    # results from the runs done so far, none launched

A suite names its title, the compared tag, the budget in agent steps (as --total-timesteps counts them), the seeds
(env_seeds: fewer for an env whose runs take long), the docs page its figure goes to, per-env (random, reference) scores
for the aggregate, optionally the envs scored by other tags (scored: {env = {name = tag}}, a row per name, as a game's
teams), and its learners: a label, the envs, a command with {python}, {root}, {env}, {seed}, {budget} and {cleanrl}
(--cleanrl: a clone of CleanRL, for its scripts) in it, the cores one run uses (default 1: a run that uses two takes two
workers), and optionally its own ids for the suite's envs (env_ids: CleanRL's BreakoutNoFrameskip-v4 for our
atari-breakout), its own budget (each learner's default run: scores are then taken at each learner's budget) and another
`python` (an anchor that needs its own environment: "$VAR", the user sets VAR, and `setup` says how to make it). A label
may have two entries: its commands on different envs. Each run works in its own folder, OUT/<learner>/<env>/seed<N>/,
pinned to its cores where `taskset` exists, its output in log.txt; a finished run leaves done.json there (its minutes,
commit, CPU and curves) and is not run again when the suite is launched again (one stopped half way starts over). Ctrl-C
stops the runs in flight and keeps every finished one. Until the whole suite is done, the finished runs' curves are
also kept in benchmarks/results/runs/NAME.json: committed, it carries a suite run part by part on several machines or
clones (a run it holds is not run again); the suite's results file replaces it. `--keep` takes the runs of the suite's
results file too, to write it again (after a change to how results are scored or drawn) without running anything.
"""

import argparse
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402
import results as results_module  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SUITES = ROOT / "benchmarks" / "suites"
FIGURES = ROOT / "docs" / "figures"


def read_toml(name: str, folder: Path, what: str) -> tuple:
    """(path, data) of a .toml file, or of NAME.toml in `folder`; a one-line error naming the ones there."""
    path = Path(name) if name.endswith(".toml") else folder / f"{name}.toml"
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in folder.glob("*.toml")))
        raise SystemExit(f"error: no {what} {name!r} ({os.path.relpath(folder, ROOT)}/ has: {known})")
    return path, tomllib.loads(path.read_text())


def load_suite(name: str) -> dict:
    path, suite = read_toml(name, SUITES, "suite")
    suite["name"] = path.stem
    for key in ("title", "tag", "budget", "seeds", "learners"):
        if key not in suite:
            raise SystemExit(f"error: {path}: the suite names no {key!r}")
    return suite


def jobs_of(suite: dict, out: Path, only: list, seeds: list, cleanrl: str = "") -> list:
    """Every run of the suite: {"label", "env", "seed", "cores", "command", "folder"}, the learners' order kept, seed
    by seed so that a suite stopped half way has every learner's first seeds."""
    jobs = []
    for seed in seeds:
        for learner in suite["learners"]:
            if only and learner["label"] not in only:
                continue
            for env in learner["envs"]:
                if seed not in suite.get("env_seeds", {}).get(env, seeds):  # an env whose runs take fewer seeds
                    continue
                command = learner["command"].format(
                    python=os.path.expandvars(learner.get("python", sys.executable)),  # "$VAR": set by the user
                    root=ROOT,
                    env=learner.get("env_ids", {}).get(env, env),  # the learner's own id for the suite's env
                    seed=seed,
                    budget=learner.get("budget", suite["budget"]),
                    cleanrl=cleanrl,
                )
                folder = out / compare.slug(learner["label"]) / env / f"seed{seed}"
                job = {"label": learner["label"], "env": env, "seed": seed, "cores": learner.get("cores", 1)}
                job["budget"] = learner.get("budget", suite["budget"])
                job["tags"] = suite.get("scored", {}).get(env, {"": suite["tag"]})  # a row per name: a game's teams
                jobs.append({**job, "command": command, "folder": folder})
    return jobs


def start(job: dict, cores: list) -> subprocess.Popen:
    """A run in its own folder (emptied first: a run stopped half way starts over), pinned to `cores`."""
    folder = job["folder"]
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    command = shlex.split(job["command"])
    if shutil.which("taskset"):
        command = ["taskset", "-c", ",".join(str(core) for core in cores), *command]
    threads = str(job["cores"])
    env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
    log = open(folder / "log.txt", "w")
    process = subprocess.Popen(command, cwd=folder, stdout=log, stderr=subprocess.STDOUT, env=env)
    process.log = log
    process.started = time.time()
    changed = results_module.git("status", "--porcelain", "--", "*.py", "pyproject.toml")
    process.commit = (results_module.git("rev-parse", "--short", "HEAD") or "unknown") + ("+changes" if changed else "")
    return process


def stop(process, seconds: float = 30) -> None:
    """Stops a run as Ctrl-C does: our scripts save, close their workers and exit 130; one that does not within
    `seconds` is killed."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def launch(jobs: list, workers: int, record: Path = None) -> list:
    """Runs the jobs not done yet, at most `workers` cores busy, each finished run's curves written to `record` as it
    ends; returns the failed ones."""
    pending = [job for job in jobs if not (job["folder"] / "done.json").exists()]
    print(f"launch: {len(jobs) - len(pending)} of {len(jobs)} runs done already; {len(pending)} to run", flush=True)
    for job in pending:
        if job["cores"] > workers:
            raise SystemExit(f"error: {job['label']} runs on {job['cores']} cores: pass --workers {job['cores']}")
    # `kill` (SIGTERM) stops a launch as Ctrl-C does: a launcher left running in the background, where the shell
    # ignores SIGINT for it, can still be stopped with its finished runs kept
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    free = list(range(workers))
    running = []
    failed = []
    done = 0
    begun = time.time()
    try:
        while pending or running:
            for job in list(pending):
                if job["cores"] <= len(free):
                    cores = [free.pop(0) for _ in range(job["cores"])]
                    running.append((job, cores, start(job, cores)))
                    pending.remove(job)
            time.sleep(0.5)
            for entry in list(running):
                job, cores, process = entry
                if process.poll() is None:
                    continue
                running.remove(entry)
                free += cores
                process.log.close()
                minutes = (time.time() - process.started) / 60
                name = f"{job['label']} {job['env']} seed {job['seed']}"
                events = compare.run_folders(str(job["folder"]))
                if process.returncode == 0 and len(events) == 1:
                    done += 1
                    # the CPU beside the commit: a suite made in several sittings may run on several machines,
                    # and its wall-clock curves compare runs across them
                    done_data = {"minutes": round(minutes, 2), "commit": process.commit}
                    done_data["machine"] = results_module.cpu_model()
                    done_data["runs"] = job_rows(job, done_data)
                    write_json(job["folder"] / "done.json", done_data)
                    if record:
                        write_record(record, jobs)
                else:
                    failed.append(job)
                    why = f"exit {process.returncode}" if process.returncode else f"{len(events)} runs' events, not one"
                    print(f"launch: {name} failed ({why}): {job['folder'] / 'log.txt'}")
                elapsed = (time.time() - begun) / 60
                print(
                    f"launch: {name} ({minutes:.1f} min); {done} done, {len(failed)} failed, "
                    f"{len(running)} running, {len(pending)} waiting; {elapsed:.0f} min so far",
                    flush=True,
                )
    except KeyboardInterrupt:
        for _, _, process in running:
            stop(process)
        print("\nlaunch: stopped; the finished runs are kept, the others start over at the next launch")
        sys.exit(130)
    return failed


def side_by_side(commands: list, cores: list) -> tuple:
    """Training speed of commands run at the same time, each pinned to one of `cores` (one core given: one after the
    other), one torch thread each, each in a folder of its own, and then again with the cores reversed, since two cores
    of one machine need not run alike. (speeds, each_way): each command's speed, the geometric mean of its two runs,
    in the commands' order; each way's speeds. A run's speed is its last perf/train_SPS (training alone, evaluations
    left out). The speed programs' pairs: ours beside an anchor."""
    first_way = pinned_speeds(commands, cores)
    second_way = pinned_speeds(commands, cores[::-1])
    speeds = [math.sqrt(first * second) for first, second in zip(first_way, second_way)]
    return speeds, [first_way, second_way]


def pinned_speeds(commands: list, cores: list) -> list:
    """One way of side_by_side: command i on cores[i] (one core given: one after the other)."""
    together = len(set(cores)) >= len(commands)  # else one after the other
    batches = [list(enumerate(commands))] if together else [[pair] for pair in enumerate(commands)]
    speeds = [0.0] * len(commands)
    with tempfile.TemporaryDirectory() as folder:
        for batch in batches:
            running = []
            for index, command in batch:
                job = {"folder": Path(folder) / str(index), "command": command, "cores": 1}
                running.append((index, job, start(job, [cores[index % len(cores)]])))  # pinned, one thread
            for index, job, process in running:
                process.wait()
                process.log.close()
                if process.returncode != 0:
                    tail = (job["folder"] / "log.txt").read_text()[-2000:]
                    raise SystemExit(f"error: {job['command']} failed (exit {process.returncode}):\n{tail}")
                folders = compare.run_folders(str(job["folder"]))
                speeds[index] = compare.read_curve(folders[0], "perf/train_SPS")[-1][3]
    return speeds


def read_runs(jobs: list) -> list:
    """The finished runs' rows: [{"label", "env", "seed", "commit", "budget", "minutes", "curve"}], from each done.json
    (from the run's events where done.json holds no rows)."""
    runs = []
    for job in jobs:
        done = job["folder"] / "done.json"
        if not done.exists():
            continue
        record = json.loads(done.read_text())
        runs += record["runs"] if "runs" in record else job_rows(job, record)
    return runs


def job_rows(job: dict, done: dict) -> list:
    """A finished run's rows, read from its events: one per tag it is scored by (a game whose teams are scored apart
    gives a row per team, its env called "ENV name")."""
    folders = compare.run_folders(str(job["folder"]))
    if len(folders) != 1:
        raise SystemExit(f"error: {job['folder']}: expected one run's events, found {len(folders)}")
    rows = []
    for name, tag in job["tags"].items():
        env = f"{job['env']} {name}" if name else job["env"]
        row = {"label": job["label"], "env": env, "seed": job["seed"], "commit": done.get("commit")}
        if done.get("machine"):
            row["machine"] = done["machine"]
        row["budget"] = job["budget"]
        row["minutes"] = done["minutes"]
        row["curve"] = compare.read_curve(folders[0], tag)
        rows.append(row)
    return rows


def row_names(job: dict) -> list:
    """The (label, env, seed) of each row a job gives."""
    return [(job["label"], f"{job['env']} {name}" if name else job["env"], job["seed"]) for name in job["tags"]]


def restore(jobs: list, recorded: list) -> int:
    """Marks done each job whose every row `recorded` holds at the job's budget (a run made in another clone or on
    another machine), writing its done.json from them; returns how many."""
    restored = 0
    for job in jobs:
        if (job["folder"] / "done.json").exists():
            continue
        names = row_names(job)
        rows = [row for row in recorded if row["budget"] == job["budget"]]
        rows = [row for row in rows if (row["label"], row["env"], row["seed"]) in names]
        firsts = {}  # a run in both the record and the results file: the record's row, the newer, comes first
        for row in rows:
            firsts.setdefault((row["label"], row["env"], row["seed"]), row)
        rows = list(firsts.values())
        if len(rows) != len(names):
            continue
        rows.sort(key=lambda row: names.index((row["label"], row["env"], row["seed"])))
        job["folder"].mkdir(parents=True, exist_ok=True)
        done_data = {"minutes": rows[0]["minutes"], "commit": rows[0]["commit"], "runs": rows}
        if rows[0].get("machine"):
            done_data["machine"] = rows[0]["machine"]
        write_json(job["folder"] / "done.json", done_data)
        restored += 1
    return restored


def write_record(path: Path, jobs: list) -> None:
    """Every finished run's rows into `path`, beside the rows it holds of runs that are not among `jobs` (a launch of
    part of the suite keeps the rest)."""
    ours = {name for job in jobs for name in row_names(job)}
    kept = json.loads(path.read_text()) if path.exists() else []
    kept = [row for row in kept if (row["label"], row["env"], row["seed"]) not in ours]
    write_json(path, kept + read_runs(jobs))


def write_json(path: Path, data) -> None:
    """Written whole or not at all: a launch stopped while writing leaves the last complete file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(json.dumps(data) + "\n")
    os.replace(partial, path)


def repo_files(suite: dict) -> list:
    """The repository's Python files the learners' commands run (their figures depend on them)."""
    found = []
    for learner in suite["learners"]:
        for word in shlex.split(learner["command"]):
            if word.startswith("{root}/") and word.endswith(".py"):
                found.append(word[len("{root}/") :])
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suite", help="a suite's name (benchmarks/suites/NAME.toml) or a .toml file")
    parser.add_argument("--workers", type=int, default=os.cpu_count(), help="cores to fill (default: all)")
    parser.add_argument("--seeds", type=int, nargs="+", help="these seeds only (prints the table, saves nothing)")
    parser.add_argument("--only", nargs="+", default=[], help="these learners only (prints, saves nothing)")
    parser.add_argument("--out", help="where the runs go (default: bench_runs/suites/NAME)")
    parser.add_argument(
        "--cleanrl", default=os.environ.get("CLEANRL_CLONE", ""), help="a CleanRL clone (suites that run its scripts)"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    parser.add_argument(
        "--keep", action="store_true", help="launch nothing: results from the runs done so far (the results file's too)"
    )
    opts = parser.parse_args(argv)
    suite = load_suite(opts.suite)
    unknown = set(opts.only) - {learner["label"] for learner in suite["learners"]}
    if unknown:
        labels = ", ".join(learner["label"] for learner in suite["learners"])
        raise SystemExit(f"error: --only {' '.join(sorted(unknown))}: the suite's learners are {labels}")
    labels = opts.only or [learner["label"] for learner in suite["learners"]]
    out = Path(opts.out) if opts.out else ROOT / "bench_runs" / "suites" / suite["name"]
    needs_clone = any("{cleanrl}" in learner["command"] for learner in suite["learners"] if learner["label"] in labels)
    if needs_clone and not opts.cleanrl:
        raise SystemExit(
            "error: this suite runs CleanRL's scripts: pass --cleanrl CLEANRL_CLONE "
            "(git clone https://github.com/vwxyzjn/cleanrl), or --only the other learners"
        )
    for learner in suite["learners"]:  # an anchor in an environment of its own: "$VAR", its python
        variable = learner.get("python", "")
        if learner["label"] in labels and variable.startswith("$") and not opts.dry_run and not opts.keep:
            if not os.environ.get(variable[1:]):
                raise SystemExit(
                    f"error: {learner['label']} runs in an environment of its own: set {variable[1:]} to its python "
                    f"({learner.get('setup', 'see the suite')}), or --only the other learners"
                )
    jobs = jobs_of(suite, out, opts.only, opts.seeds or suite["seeds"], opts.cleanrl)
    if opts.dry_run:
        for job in jobs:
            print(f"cd {job['folder']} && {job['command']}")
        return 0
    record = results_module.RESULTS / "runs" / f"{suite['name']}.json"  # the finished runs, until the suite is done
    recorded = json.loads(record.read_text()) if record.exists() else []
    saved = results_module.RESULTS / f"{suite['name']}.json"
    if opts.keep and saved.exists():
        recorded += json.loads(saved.read_text())["runs"]
    restored = restore(jobs, recorded)
    if restored:
        print(f"launch: {restored} runs done already in {os.path.relpath(record if record.exists() else saved)}")
    failed = [] if opts.keep else launch(jobs, opts.workers, record)
    runs = read_runs(jobs)
    if not runs:
        raise SystemExit("launch: no finished run to report")
    normalize = {env: tuple(pair) for env, pair in suite.get("normalize", {}).items()}
    scores = suite.get("scores", ["final"])
    table, values = compare.tables(runs, suite["budget"], normalize, suite["tag"], scores)
    print(compare.markdown(table["columns"], table["rows"]))
    for note in table["notes"]:
        print(note)
    finished = [job for job in jobs if (job["folder"] / "done.json").exists()]  # a scored game gives a run per team
    complete = not failed and not opts.only and not opts.seeds and len(finished) == len(jobs)
    if not complete:
        write_record(record, jobs)
        print(
            f"launch: part of the suite: its finished runs are in {os.path.relpath(record)} (commit it to go on in "
            "another clone); the whole suite writes its results file"
        )
        return 1 if failed else 0
    figure = FIGURES / f"{suite['name']}.png"
    compare.plot(runs, suite["budget"], str(figure.with_suffix("")), suite["tag"])
    data = {"title": suite["title"], "tag": suite["tag"], "budget": suite["budget"], "seeds": suite["seeds"]}
    data["normalize"] = suite.get("normalize", {})
    data["learners"] = suite["learners"]
    data["page"] = suite.get("page")
    data["figure"] = str(figure.relative_to(ROOT))
    data["runs_made_at"] = sorted({run["commit"] for run in runs if run.get("commit")})  # a launch with --keep
    data["runs_made_on"] = sorted({run.get("machine", "") for run in runs})  # "": a run from before CPUs were kept
    minutes = core_minutes(jobs)
    readme = None
    if "readme" in suite:  # the README's row: the first learner against each other, score by score
        labels = list(dict.fromkeys(learner["label"] for learner in suite["learners"]))  # a label may have 2 entries
        readme = {**suite["readme"], "result": readme_result(values, labels)}
    sys.argv = [word for word in sys.argv if word != "--keep"]  # the stamp's command: the one that runs the suite
    path = results_module.save(
        suite["name"],
        minutes / opts.workers,  # the whole suite's time on these workers, though it ran over several launches
        table=table,
        runs=runs,
        values=values,
        readme=readme,
        depends_on=repo_files(suite),
        presets=results_module.presets_taken([job["command"] for job in jobs]),
        extra={"suite": data, "machine_minutes": round(minutes, 1)},
    )
    record.unlink(missing_ok=True)  # its runs are in the results file now
    print(f"launch: {path.relative_to(ROOT)}, {figure.relative_to(ROOT)}; {minutes:.0f} core-minutes of runs")
    return 0


def readme_result(values: dict, labels: list) -> str:
    """ "against SB3 A2C, final: on par, whole run: better": the first learner against each other one, per score
    (with several envs, counted: "better on 3 of 4")."""
    parts = []
    for label in labels[1:]:
        per_score = {}
        for key, word in values.items():
            if key.startswith(f"{compare.slug(label)}.") and key.endswith(".verdict"):
                per_score.setdefault(key.split(".")[-2].replace("-", " "), []).append(word)
        said = []
        for score, words in per_score.items():
            counts = {word: words.count(word) for word in dict.fromkeys(words)}
            if len(words) == 1:
                said.append(f"{score} {words[0]}")
            else:
                said.append(f"{score} " + ", ".join(f"{word} on {n} of {len(words)}" for word, n in counts.items()))
        parts.append(f"against {label}: " + ", ".join(said))
    return f"{labels[0]} " + "; ".join(parts) + " (95% intervals of the IQM)"


def core_minutes(jobs: list) -> float:
    """The core-minutes of the finished runs (a run that gives several rows counted once)."""
    minutes = 0.0
    for job in jobs:
        done = job["folder"] / "done.json"
        if done.exists():
            minutes += json.loads(done.read_text())["minutes"] * job["cores"]
    return minutes


if __name__ == "__main__":
    sys.exit(main())
