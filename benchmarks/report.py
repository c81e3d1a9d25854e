"""Renders the results tables of README.md and docs/*.md from benchmarks/results/*.json, which the benchmarks write.
A table sits between `<!-- table:NAME -->` and `<!-- /table:NAME -->` and comes from benchmarks/results/NAME.json;
under it, the command that measured it, about how long that took, the commit, the date and the machine. The README's
results table (`<!-- table:readme -->`) takes one row from each results file that has a `readme` entry.

    python benchmarks/report.py            # rewrite every table from the results
    python benchmarks/report.py --check    # exit 1 at the first table that differs from its rendering
    python benchmarks/report.py --list     # each results file: its command and about how long it takes
    python benchmarks/report.py --stale    # the commands that would clear every mark, and how long they take

Each results file records the hash of every file its figures depend on (benchmarks/results.py's dependencies: the
benchmark, the scripts it runs, the common/ modules they import), blind to comments and docstrings. A table whose
files no longer match gets a visible mark under it, "measured at <commit>; changed since: <files>", until its
command runs again. --check needs no git history: it compares today's files with the recorded hashes.
"""

import argparse
import difflib
import json
import os
import re
import sys

from results import RESULTS, ROOT, changed_dependencies, git, markdown

ATARI_SPEED = ("python benchmarks/bench_atari.py --speed --cleanrl CLEANRL_CLONE --envpool-python ENVPOOL_PYTHON", 11)

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Each table's benchmark and about how long it takes on 2 cores: what a table with no results file yet says to run.
BENCHES = {
    "mujoco-speed": ("python benchmarks/bench_mujoco.py --cleanrl CLEANRL_CLONE", 15),
    "atari-speed": ATARI_SPEED,
    "atari-split": ATARI_SPEED,
    "setup": ("python benchmarks/bench_setup.py", 8),
    "tetris-env": ("python benchmarks/bench_tetris_env.py --ocean OCEAN_DIR", 1),
    "tetris-ppo_tetris": ("python benchmarks/bench_tetris.py --script ppo_tetris", 20),
    "tetris-puffer": ("python benchmarks/bench_tetris.py --script ppo_puffer_async", 17),
    "ppo-tetris-time": ("python benchmarks/bench_ppo_tetris.py", 1),
    "puffer-throughput": ("python benchmarks/bench_ppo_puffer_async.py", 10),
    "vector": ("python benchmarks/bench_vector.py", 2),
    "distributed": ("python benchmarks/bench_distributed.py", 4),
    "watch-costs": ("python benchmarks/bench_watch.py", 2),
    "a2c-continuous-speed": ("python benchmarks/bench_a2c_continuous.py", 6),
    "a2c-sb3-speed": ("python benchmarks/bench_a2c_vs_sb3.py", 6),
    "cartpole-novel-speed": ("python benchmarks/bench_lstm_cartpole_novel.py", 5),
    "defaults-speed": ("python benchmarks/bench_defaults.py --baseline BEFORE_CHECKOUT", 12),
    "profile-ppo-cleanrl": (
        "python benchmarks/profile_steps.py ppo_puffer_async.py --env-id HalfCheetah-v5 "
        "--num-envs 1 --horizon 64 --batch-size 2048 --num-minibatches 32 --update-epochs 10 "
        "--hidden-size 64 --total-timesteps 102400 --save profile-ppo-cleanrl",
        2,
    ),
    "compile": ("python benchmarks/bench_compile.py", 2),
    "leanrl": ("python benchmarks/bench_leanrl.py", 11),
    "optimizer": ("python benchmarks/bench_optimizer.py", 20),
    "tricks": ("python benchmarks/bench_tricks.py", 10),
    "profile-a2c-sb3": (
        "python benchmarks/profile_steps.py a2c_cartpole.py --num-envs 8 --num-steps 5 "
        "--learning-rate 7e-4 --no-norm-obs --no-anneal-lr --total-timesteps 200000 "
        "--save profile-a2c-sb3",
        2,
    ),
}
# Each suite of benchmarks/launch.py, with the minutes its file says it takes on 2 cores
for _suite in sorted((ROOT / "benchmarks" / "suites").glob("*.toml")):
    _minutes = re.search(r"^minutes = (\d+)", _suite.read_text(), re.M)
    BENCHES[_suite.stem] = (f"python benchmarks/launch.py {_suite.stem}", int(_minutes.group(1)) if _minutes else 60)
# Each search space of benchmarks/tune.py, its results file tune-NAME, with the minutes its file gives the search
for _space in sorted((ROOT / "benchmarks" / "spaces").glob("*.toml")):
    _minutes = int(re.search(r"^minutes = (\d+)", _space.read_text(), re.M).group(1))
    BENCHES[f"tune-{_space.stem}"] = (f"python benchmarks/tune.py {_space.stem} --hours {_minutes / 60:g}", _minutes)
BLOCK = re.compile(r"(<!-- table:([\w-]+) -->\n)(.*?)(<!-- /table:\2 -->)", re.S)
# One figure in prose: <!-- value:NAME:KEY -->figure<!-- /value --> is results/NAME.json's values[KEY], or with a
# dotted KEY the cell it names, e.g. table.rows.2.4 (row 2, column 4 of the table) or runs.0.sps
# A suite's figure (benchmarks/launch.py): <!-- figure:NAME --> ... <!-- /figure:NAME --> shows docs/figures/NAME.png,
# drawn from results/NAME.json's curves; the PNG carries the hash of the curves it was drawn from.
FIGURE = re.compile(r"(<!-- figure:([\w-]+) -->\n)(.*?)(<!-- /figure:\2 -->)", re.S)
VALUE = re.compile(r"(<!-- value:([\w-]+):([\w.]+) -->)(.*?)(<!-- /value -->)")


def load_all() -> dict:
    return {path.stem: json.loads(path.read_text()) for path in sorted(RESULTS.glob("*.json"))}


def duration(minutes: float) -> str:
    return f"~{max(minutes, 1):.0f} min" if minutes < 90 else f"~{minutes / 60:.1f} h"


def stamp_line(result: dict) -> str:
    versions = ", ".join(f"{name} {version}" for name, version in result["versions"].items())
    kept = result.get("kept")  # an older measurement whose code path is unchanged since, proven by fixed-seed runs
    since = (
        (
            f"; its fixed-seed runs (`scripts/fixed_seed_runs.py`: {', '.join(kept['cases'])}) are bit-identical on "
            f"commit {kept['identical_on']}"
        )
        if kept
        else ""
    )
    if kept and "runs_on" in kept:  # this commit measured `here`; the runs are kept from the commits that made them
        tasks = {commit: {} for commit in kept["runs_on"]}  # commit: its tasks, in the table's order
        for run in result["runs"]:
            tasks[run["commit"]][run["env_id"].split(".")[-1]] = None
        most = max(tasks, key=lambda commit: len(tasks[commit]))  # its rows are "the other rows"
        named = {commit: "the other rows" if commit == most else ", ".join(tasks[commit]) for commit in tasks}
        for commit in tasks:  # kept runs evaluated again (more episodes) on a later commit
            again = sorted({run.get("evaluated_on") for run in result["runs"] if run["commit"] == commit} - {None})
            if again:
                named[commit] += f"; evaluated again on commit{'s' * (len(again) > 1)} {' and '.join(again)}"
        runs = ", ".join(f"commit {commit}, {date} ({named[commit]})" for commit, date in kept["runs_on"].items())
        since = (
            f" ({kept['here']}); the runs: {runs}, whose code path's fixed-seed runs "
            f"(`scripts/fixed_seed_runs.py`: {', '.join(kept['cases'])}) are bit-identical on commit "
            f"{kept['identical_on']}"
        )
    made_at = [commit for commit in result.get("suite", {}).get("runs_made_at", []) if commit != result["commit"]]
    if made_at:  # a suite's table computed again from runs made on earlier commits
        since += f" (its runs: commit{'s' * (len(made_at) > 1)} {', '.join(made_at)})"
    made_on = result.get("suite", {}).get("runs_made_on", [])
    if len(made_on) > 1:  # runs made on several machines: their wall-clock minutes compare across CPUs
        cpus = [cpu for cpu in made_on if cpu] + ["not recorded"] * ("" in made_on)
        since += f" (its runs' CPUs: {'; '.join(cpus)})"
    return (
        f"<sub>`{result['command']}` ({duration(result['minutes'])}) · commit {result['commit']}, "
        f"{result['date']}{since} · {result['machine']} · {versions}</sub>"
    )


def render(name: str, results: dict) -> str:
    """The text between the markers of table `name`."""
    if name == "readme":
        rows, pages = [], []
        for key, result in results.items():
            if "readme" in result:
                row = result["readme"]
                command = f"`{result['command']}` ({duration(result['minutes'])})"
                if changed_dependencies(result):  # the mark under the page's table says what changed
                    command += f" **measured at {result['commit']}, code changed since**"
                rows.append(
                    (row.get("order", 99), [row["task"], row["result"], command, f"[{row['page']}]({row['page']})"])
                )
                pages.append(result)
        body = markdown(
            ["task", "result", "measured by (about how long)", "more"], [r for _, r in sorted(rows, key=lambda x: x[0])]
        )
        commits = sorted({f"{r['commit']} ({r['date']})" for r in pages})
        machines = sorted({r["machine"] for r in pages})
        return f"{body}\n\n<sub>Commits: {', '.join(commits)} · {'; '.join(machines)}</sub>\n"
    if name not in results:  # measured on no commit yet: the command that fills it
        if name not in BENCHES:
            raise SystemExit(f"report: the table {name!r} has no benchmark: add it to BENCHES in benchmarks/report.py")
        command, minutes = BENCHES[name]
        return (
            f"*Not measured on this commit yet: `{command}` ({duration(minutes)}) measures it and fills this table.*\n"
        )
    result = results[name]
    table = result["table"]
    notes = "".join(f"\n{note}\n" for note in table.get("notes", []))
    return f"{markdown(table['columns'], table['rows'])}\n{notes}\n{stamp_line(result)}\n{changed_line(result)}"


def changed_line(result: dict) -> str:
    """A visible mark under a table whose code changed on its path after it was measured (a file whose code, its
    comments and docstrings left out, no longer matches the hash the results file recorded), until its command
    runs again; "" for a table that is current."""
    changed = changed_dependencies(result)
    if not changed:
        return ""
    files = ", ".join(f"`{path}`" for path in changed)
    return (
        f"\n**Measured at commit {result['commit']}; changed since: {files}.** "
        f"`{result['command']}` measures it again.\n"
    )


def stale(results: dict) -> int:
    """--stale: the commands that would clear every mark, each once, with about how long each takes, and (where git
    is at hand) the commits since each stamp that touched the changed files."""
    commands = {}
    for name, result in results.items():
        changed = changed_dependencies(result)
        if changed:
            entry = commands.setdefault(result["command"], dict(minutes=result["minutes"], tables=[], changes=[]))
            entry["tables"].append(name)
            entry["changes"].append((result["commit"].split("+")[0], changed))
    total = 0.0
    for command, entry in sorted(commands.items(), key=lambda item: -item[1]["minutes"]):
        total += entry["minutes"]
        print(f"{duration(entry['minutes']):>9}  {command}  ({', '.join(entry['tables'])})")
        for commit, files in entry["changes"]:
            log = git("log", "--format=%h %s", f"{commit}..HEAD", "--", *files).splitlines()
            for line in log[:3]:
                print(f"{'':>11}{line[:100]}")
            if len(log) > 3:
                print(f"{'':>11}and {len(log) - 3} more since {commit}")
    print(f"{len(commands)} commands, {duration(total)} in all" if commands else "no table is marked")
    return 0


def lookup(result: dict, key: str):
    """values[KEY] of a results file, or for a dotted KEY the cell it names (table.rows.2.4); None if there is none."""
    if "." not in key:
        return result.get("values", {}).get(key)
    value = result
    for part in key.split("."):
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, dict):
            value = value.get(part)
        else:
            return None
    return value


def render_value(name: str, key: str, results: dict) -> str:
    """The figure an inline marker stands for (a results file's values[KEY]), marked when its code changed since."""
    if name not in results:
        command, minutes = BENCHES[name]
        return f"(not measured yet: `{command}`)"
    result = results[name]
    value = lookup(result, key)
    if value is None:
        raise SystemExit(f"report: {name}.json has no {key!r} (a <!-- value:{name}:{key} --> marker)")
    value = str(value).replace("**", "")
    if changed_dependencies(result):
        return f"{value} (**measured at {result['commit']}, code changed since**)"
    return value


def png_description(path) -> str:
    """A PNG's Description text (compare.py writes the hash of its curves there); "" for none or no file."""
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    at = 8  # past the signature; then chunks: length, type, data, CRC
    while at + 8 <= len(data):
        length = int.from_bytes(data[at : at + 4], "big")
        kind = data[at + 4 : at + 8]
        body = data[at + 8 : at + 8 + length]
        if kind == b"tEXt" and body.startswith(b"Description\0"):
            return body.split(b"\0", 1)[1].decode("latin-1")
        at += 12 + length
    return ""


def render_figure(name: str, results: dict, page, check: bool, drawn: list) -> str:
    """The text between a figure's markers: the image, and under it the stamp of the results it was drawn from. The
    PNG is drawn again where its curves' hash differs from the results' (with check, the name goes to `drawn`)."""
    if name not in results or "suite" not in results[name]:  # no suite's results file yet
        command, minutes = BENCHES[name]
        return f"*Not measured on this commit yet: `{command}` ({duration(minutes)}) draws this figure.*\n"
    import compare

    result = results[name]
    suite = result["suite"]
    figure = ROOT / suite["figure"]
    if png_description(figure) != compare.curves_hash(result["runs"]):
        drawn.append(name)
        if not check:
            compare.plot(result["runs"], suite["budget"], str(figure.with_suffix("")), suite["tag"])
    link = os.path.relpath(figure, page.parent)
    seeds = len(suite["seeds"])
    alt = f"{suite['title']}: {suite['tag']}, the mean over {seeds} seeds with a 95% bootstrap band"
    return f"![{alt}]({link})\n\n{stamp_line(result)}\n{changed_line(result)}"


def render_text(text: str, results: dict, page=None, check: bool = False, drawn=None) -> str:
    """A page with every table, figure and inline figure rendered from the results."""
    text = BLOCK.sub(lambda m: m.group(1) + render(m.group(2), results) + m.group(4), text)
    drawn = [] if drawn is None else drawn
    page = page or ROOT / "docs" / "page.md"
    text = FIGURE.sub(lambda m: m.group(1) + render_figure(m.group(2), results, page, check, drawn) + m.group(4), text)
    return VALUE.sub(lambda m: m.group(1) + render_value(m.group(2), m.group(3), results) + m.group(5), text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 at the first difference")
    parser.add_argument("--list", action="store_true", help="each results file's command and duration")
    parser.add_argument("--stale", action="store_true", help="the commands that would clear every mark")
    opts = parser.parse_args()
    results = load_all()
    if opts.stale:
        return stale(results)
    if opts.list:
        for name, (command, minutes) in BENCHES.items():
            result = results.get(name, dict(command=command, minutes=minutes, commit="not measured"))
            print(f"{name:<18} {duration(result['minutes']):>9}  {result['commit']:<14} {result['command']}")
        return 0
    for path in DOCS:
        text = path.read_text()
        drawn = []
        new = render_text(text, results, path, opts.check, drawn)
        if drawn and opts.check:
            print(f"report: the figures of {', '.join(drawn)} differ from their results: python benchmarks/report.py")
            return 1
        if drawn:
            print(f"report: drew {', '.join(f'docs/figures/{name}.png' for name in drawn)}")
        if new == text:
            continue
        if opts.check:
            diff = difflib.unified_diff(
                text.splitlines(), new.splitlines(), str(path.relative_to(ROOT)), "rendered", n=0, lineterm=""
            )
            print("\n".join(list(diff)[:12]))
            print(f"report: {path.relative_to(ROOT)} differs from its rendering: run python benchmarks/report.py")
            return 1
        path.write_text(new)
        print(f"report: rendered the tables of {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
