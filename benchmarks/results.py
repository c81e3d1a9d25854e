"""Where a benchmark's figures go: `benchmarks/results/<name>.json`, stamped with what they measured (the commit, and
whether the code differed from it), when, on what machine and versions, and by which command. benchmarks/report.py
renders the tables of the README and docs/ from these files."""

import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def git(*command) -> str:
    try:
        out = subprocess.run(["git", *command], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return ""
    return out.stdout.strip()


def cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        return next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


# Flags whose value is a folder on the measuring machine: the command shows what the reader supplies instead.
LOCAL_PATHS = {"--ocean": "OCEAN_DIR", "--cleanrl": "CLEANRL_CLONE", "--baseline": "BEFORE_CHECKOUT"}


def placeholders(argv: list) -> list:
    """argv with each local folder (the value of a LOCAL_PATHS flag) replaced by its placeholder."""
    return [LOCAL_PATHS.get(argv[i - 1], arg) if i else arg for i, arg in enumerate(argv)]


def stamp(minutes: float) -> dict:
    """What a result was measured on: the commit ("+changes" when the code differed from it), the date, the machine,
    the versions, the command as typed, and about how many minutes it took (report.py prints it beside the row)."""
    import gymnasium
    import torch

    changed = git("status", "--porcelain", "--", "*.py", "pyproject.toml")
    return {
        "commit": (git("rev-parse", "--short", "HEAD") or "unknown") + ("+changes" if changed else ""),
        "date": datetime.date.today().isoformat(),
        "machine": f"{cpu_model()}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}",
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "gymnasium": gymnasium.__version__,
        },
        "command": "python " + shlex.join([os.path.relpath(sys.argv[0], ROOT), *placeholders(sys.argv[1:])]),
        "minutes": round(minutes, 1),
    }


def save(name: str, minutes: float, *, table: dict, runs: list, readme=None) -> Path:
    """Writes benchmarks/results/<name>.json: the stamp; `table` ({"columns": [...], "rows": [[...]], optional
    "notes": [...]}), the table the docs show; `runs`, the per-run figures it came from (seed, result, SPS); `readme`
    ({"task", "result", "page", "order"}), this benchmark's row in the README's results table, if it has one."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    data = {**stamp(minutes), "table": table, "runs": runs, **({"readme": readme} if readme else {})}
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"results: {os.path.relpath(path)} (render the docs' tables: python benchmarks/report.py)", flush=True)
    return path


def markdown(columns: list, rows: list) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return "\n".join(lines + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows])


def load(name: str) -> dict:
    return json.loads((RESULTS / f"{name}.json").read_text())
