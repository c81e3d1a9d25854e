"""How long the README's two set-up lines take: runs .ci/run (the two lines, as written, in a fresh copy of the
repository, with ruff between them; then its newest-versions environments) from an empty pip cache, and records
each line's time, the number of tests and each part's time, for the README's first screen. A failing CI run records
nothing.

    python benchmarks/bench_setup.py            # ~24 min on 2 cores
"""

import os
import re
import subprocess
import sys
import tempfile
import time

import results

ROOT = results.ROOT


def main():
    start = time.time()
    with tempfile.TemporaryDirectory() as cache:  # an empty pip cache: what a newcomer's first install downloads
        env = {**os.environ, "PIP_CACHE_DIR": cache}
        done = subprocess.run(["bash", str(ROOT / ".ci" / "run")], capture_output=True, text=True, env=env)
    output = done.stdout + done.stderr
    if done.returncode != 0:
        log = ROOT / "bench_results" / "setup-ci.log"
        log.parent.mkdir(exist_ok=True)
        log.write_text(output)
        sys.stdout.write(done.stdout[-3000:])
        print(f"the whole output: {log}")
        raise SystemExit(f".ci/run failed ({done.returncode}): nothing recorded")
    lines = re.findall(r"ci: README line (\d) took (\d+) min (\d+) s", output)
    took = {line: f"{int(minutes)} min {int(seconds)} s" for line, minutes, seconds in lines}
    passed = re.findall(r"(\d+) passed", output)[0]  # the first test run's: the README's second line
    parts = re.findall(r"ci: newest set \((\S+)\): (\w[\w ]*?) took (\d+) min (\d+) s", output)
    total = re.findall(r"ci: all three parts took (\d+) min (\d+) s", output)[-1]
    values = {"line1": took["1"], "line2": took["2"], "tests": f"{passed} tests"}
    values["all"] = f"{int(total[0])} min {int(total[1])} s"
    print(values)
    columns = ["part of .ci/run", "took"]
    rows = [
        ["README line 1: venv, install, train PPO on Tetris for 300k steps", took["1"]],
        ["README line 2: the tests", took["2"]],
    ]
    for python, what, minutes, seconds in parts:
        rows.append([f"newest versions, {python}: {what}", f"{int(minutes)} min {int(seconds)} s"])
    rows.append(["all of .ci/run", values["all"]])
    notes = [f"One run of .ci/run: a fresh copy of the repository, an empty pip cache; {passed} tests in line 2."]
    table = dict(columns=columns, rows=rows, notes=notes)
    # the times depend on what the two lines run: the install (pyproject.toml, constraints.txt), ppo_tetris.py, and
    # the tests (their number and time; they import every script, and so every common/ module)
    depends_on = [".ci/run", ".ci/smoke", "pyproject.toml", "constraints.txt", "ppo_tetris.py"]
    depends_on += sorted(str(path.relative_to(ROOT)) for path in (ROOT / "tests").glob("*.py"))
    results.save("setup", (time.time() - start) / 60, table=table, runs=[values], values=values, depends_on=depends_on)


if __name__ == "__main__":
    main()
