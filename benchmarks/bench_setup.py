"""How long the README's two set-up lines take: runs .ci/run (the two lines, as written, in a fresh copy of the
repository, with ruff between them) and records each line's time and the number of tests, for the README's first
screen. A failing CI run records nothing.

    python benchmarks/bench_setup.py            # ~8 min on 2 cores, with the packages in pip's reach
"""

import re
import subprocess
import sys
import time

import results

ROOT = results.ROOT


def main():
    start = time.time()
    done = subprocess.run(["bash", str(ROOT / ".ci" / "run")], capture_output=True, text=True)
    output = done.stdout + done.stderr
    if done.returncode != 0:
        sys.stdout.write(output[-3000:])
        raise SystemExit(f".ci/run failed ({done.returncode}): nothing recorded")
    lines = re.findall(r"ci: README line (\d) took (\d+) min (\d+) s", output)
    took = {line: f"{int(minutes)} min {int(seconds)} s" for line, minutes, seconds in lines}
    passed = re.findall(r"(\d+) passed", output)[-1]
    values = {"line1": took["1"], "line2": took["2"], "tests": f"{passed} tests"}
    print(values)
    columns = ["README set-up line", "took"]
    rows = [["1: venv, install, train PPO on Tetris for 300k steps", took["1"]], ["2: the tests", took["2"]]]
    notes = [f"One run of .ci/run: a fresh copy of the repository, the packages in pip's reach; {passed} tests."]
    table = dict(columns=columns, rows=rows, notes=notes)
    # the times depend on what the two lines run: the install (pyproject.toml, constraints.txt), ppo_tetris.py, and
    # the tests (their number and time; they import every script, and so every common/ module)
    depends_on = [".ci/run", "pyproject.toml", "constraints.txt", "ppo_tetris.py"]
    depends_on += sorted(str(path.relative_to(ROOT)) for path in (ROOT / "tests").glob("*.py"))
    results.save("setup", (time.time() - start) / 60, table=table, runs=[values], values=values, depends_on=depends_on)


if __name__ == "__main__":
    main()
