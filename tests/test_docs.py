"""The docs match what produced them: every results table equals its rendering from benchmarks/results/*.json, each
README results row names a benchmark command that exists, and CI runs the README's two set-up lines as written."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

README = open(f"{ROOT}/README.md").read()


def test_every_results_table_equals_its_rendering_from_the_results_files():
    # A results file's code hashes are ast.dump()s of the files it depends on, and that text differs between Python's
    # minor versions (fields added, empty fields left out): they compare only on the version that recorded them.
    results_files = Path(ROOT, "benchmarks", "results").glob("*.json")
    recorded = {json.loads(path.read_text())["versions"]["python"].rsplit(".", 1)[0] for path in results_files}
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    if recorded != {running}:
        pytest.skip(f"the results files' code hashes are Python {', '.join(sorted(recorded))}'s (this is {running})")
    out = subprocess.run([sys.executable, "benchmarks/report.py", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_results_name_no_local_folder():
    """A results file's command shows placeholders (OCEAN_DIR...) where the measuring machine had its own folders."""
    sys.path.insert(0, f"{ROOT}/benchmarks")
    import results

    argv = ["--ocean", "/home/me/ocean", "--seeds", "1", "--baseline", "/tmp/before"]
    assert results.placeholders(argv) == ["--ocean", "OCEAN_DIR", "--seeds", "1", "--baseline", "BEFORE_CHECKOUT"]
    for path in Path(ROOT, "benchmarks", "results").glob("*.json"):
        command = json.loads(path.read_text())["command"]
        assert not re.search(r"\s/\S", command), f"{path.name}: {command}"


def test_a_table_that_keeps_its_runs_says_which_commit_measured_each():
    """A results file whose runs were kept from older commits ("kept": {"runs_on": {commit: date}}): each run carries
    the commit that measured it, one of those named, and the stamp names every one of them, the file's own commit
    and the tasks of each but the commit of the most runs ("the other rows"), and any commit that evaluated a kept
    run again."""
    sys.path.insert(0, f"{ROOT}/benchmarks")
    import report

    # a results file of this shape (its own commit evaluated one run again, whose runs two older commits measured),
    # then every real one like it
    run = {"env_id": "mpe2.simple_tag_v3", "commit": "1111111"}
    kept_runs = {
        "runs_on": {"1111111": "2026-11-26", "2222222": "2026-11-27"},
        "here": "random play",
        "cases": ["mpe-spread"],
        "identical_on": "3333333",
    }
    runs = [
        run,
        dict(run, env_id="mpe2.simple_push_v3"),
        dict(run, env_id="mpe2.simple_v3", commit="2222222", evaluated_on="3333333"),
    ]
    synthetic = {
        "command": "python benchmarks/bench_mpe.py",
        "minutes": 90.0,
        "commit": "3333333",
        "date": "2026-11-28",
        "machine": "AMD EPYC, 2 cores, Linux x86_64",
        "versions": {"python": "3.11.7"},
        "kept": kept_runs,
        "runs": runs,
    }
    real = [json.loads(path.read_text()) for path in Path(ROOT, "benchmarks", "results").glob("*.json")]
    mixed = [synthetic] + [result for result in real if "runs_on" in result.get("kept", {})]
    for result in mixed:
        kept = result["kept"]
        line = report.stamp_line(result)
        assert all(run["commit"] in kept["runs_on"] for run in result["runs"])
        assert f"commit {result['commit']}" in line and all(f"commit {commit}" in line for commit in kept["runs_on"])
        counts = {commit: sum(run["commit"] == commit for run in result["runs"]) for commit in kept["runs_on"]}
        for run in result["runs"]:
            if counts[run["commit"]] < max(counts.values()):
                assert run["env_id"].split(".")[-1] in line, run["env_id"]
            if "evaluated_on" in run:  # a kept run evaluated again later
                again = re.search(rf"evaluated again on commits? [^;)]*\b{run['evaluated_on']}\b", line)
                assert again, run["env_id"]


def readme_commands() -> list:
    """The benchmark command of each row of the README's results table."""
    table = re.search(r"<!-- table:readme -->\n(.*?)<!-- /table:readme -->", README, re.S).group(1)
    return re.findall(r"`(python benchmarks/\S+\.py[^`]*)`", table)


def test_the_readme_results_table_has_a_row_per_results_file_that_gives_one():
    results = [json.loads(path.read_text()) for path in Path(ROOT, "benchmarks", "results").glob("*.json")]
    assert len(readme_commands()) == sum("readme" in result for result in results) >= 1


@pytest.mark.parametrize("command", sorted({command.split()[1] for command in readme_commands()}))
def test_each_readme_results_command_exists_and_shows_its_help(command):
    out = subprocess.run([sys.executable, command, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "usage:" in out.stdout, out.stderr[-2000:]


def test_the_readmes_first_screen_holds_the_two_set_up_lines_ci_runs_and_a_line_for_a_gpu():
    first_screen = "\n".join(README.splitlines()[:30])
    blocks = re.findall(r"```bash\n(.*?)```", first_screen, re.S)
    setup = blocks[0].strip().splitlines()
    ci = open(f"{ROOT}/.ci/run").read().splitlines()
    assert len(setup) == 2 and all(line in ci for line in setup), setup
    assert setup[0].startswith("python3 -m venv .venv && . .venv/bin/activate && ")
    # a laptop without an NVIDIA GPU gets torch's CPU build from the first line it runs, no CUDA build before it
    cpu_torch = " --index-url https://download.pytorch.org/whl/cpu"
    assert "&& pip install torch==2.13.0" + cpu_torch + " && " in setup[0]
    # a GPU user has one line too: the same, with PyPI's torch
    (gpu,) = blocks[1].strip().splitlines()
    assert gpu == setup[0].replace(cpu_torch, "")
    assert "<!-- value:setup:line1 -->" in first_screen  # how long the first line takes, from a results file


def results_module():
    sys.path.insert(0, f"{ROOT}/benchmarks")
    import results

    return results


def test_a_files_hash_ignores_comments_and_docstrings_but_not_code():
    results = results_module()
    code = 'def f(x):\n    """Twice x."""\n    return 2 * x  # doubled\n'
    same = "def f(x):\n    return 2 * x\n"
    other = "def f(x):\n    return 3 * x\n"
    assert results.content_hash(code) == results.content_hash(same)
    assert results.content_hash(code) != results.content_hash(other)
    fields = 'class Args:\n    seed: int = 1\n    """the seed"""\n'
    assert results.content_hash(fields) == results.content_hash("class Args:\n    seed: int = 1\n")


def test_a_benchmarks_dependencies_are_what_it_runs_and_what_that_imports():
    results = results_module()
    tree = {
        "benchmarks/bench_x.py": 'import results\nfrom helper import f\nSCRIPT = "ppo_tetris.py"\n',
        "benchmarks/helper.py": "import numpy\n",
        "benchmarks/results.py": "",
        "ppo_tetris.py": "from common import run\nfrom common.tetris import Tetris\n",
        "common/__init__.py": "",
        "common/run.py": "from common import checkpoint\n",
        "common/checkpoint.py": "import torch\n",
        "common/tetris.py": "",
        "a2c_cartpole.py": "from common import gym_envs\n",
    }
    deps = results.dependencies("benchmarks/bench_x.py", "", tree.get)
    assert sorted(deps) == [
        "benchmarks/bench_x.py",
        "benchmarks/helper.py",
        "common/__init__.py",
        "common/checkpoint.py",
        "common/run.py",
        "common/tetris.py",
        "ppo_tetris.py",
    ]
    # a script named on the command line only (profile_steps.py a2c_cartpole.py ...) is on the path too
    assert "a2c_cartpole.py" in results.dependencies("benchmarks/bench_x.py", "a2c_cartpole.py --seed 1", tree.get)


def test_a_table_whose_code_changed_since_it_was_measured_says_so_under_it(monkeypatch):
    results = results_module()
    import report

    result = json.loads(Path(ROOT, "benchmarks", "results", "classic-control.json").read_text())
    files = {"ppo_puffer_async.py": "x = 1\n", "common/run.py": "y = 2\n"}
    result["dependencies"] = {name: results.content_hash(text) for name, text in files.items()}
    monkeypatch.setattr(results, "read_file", files.get)
    monkeypatch.setattr(report, "changed_dependencies", lambda r: results.changed_dependencies(r, files.get))
    assert "changed since" not in report.render("classic-control", {"classic-control": result})
    files["common/run.py"] = "y = 2  # a comment\n"  # a comment or a docstring changes no figure
    files["README.md"] = "anything"  # nor a file off the table's path
    assert "changed since" not in report.render("classic-control", {"classic-control": result})
    files["ppo_puffer_async.py"] = "x = 2\n"
    rendered = report.render("classic-control", {"classic-control": result})
    mark = rendered.strip().splitlines()[-1]
    assert f"Measured at commit {result['commit']}; changed since: `ppo_puffer_async.py`" in mark
    assert f"`{result['command']}` measures it again" in mark


def test_no_measured_figure_is_written_by_hand_in_the_docs():
    """A number with a unit of speed or time (SPS, x, min, s, %) in README.md or docs/*.md is rendered from a results
    file (a table, or an inline <!-- value --> marker) or cites others' published figures (<!-- cite -->)."""
    block = re.compile(r"<!-- table:([\w-]+) -->.*?<!-- /table:\1 -->", re.S)
    value = re.compile(r"<!-- value:[\w-]+:[\w.]+ -->.*?<!-- /value -->")
    cite = re.compile(r"<!-- cite -->.*?<!-- /cite -->", re.S)
    unit = re.compile(r"(?<![\w.-])\d[\d,]*(\.\d+)?(\s?(SPS|min|s|%)(?!\w)|x(?!\w))")
    found = []
    for path in [Path(ROOT, "README.md"), *sorted(Path(ROOT, "docs").glob("*.md"))]:
        text = cite.sub("", value.sub("", block.sub("", path.read_text())))
        found += [f"{path.name}: {m.group(0)}" for m in unit.finditer(text)]
    assert not found, found
    assert unit.search("ran at 1,234 SPS") and unit.search("1.50x faster") and unit.search("took 5 min")
    assert not unit.search("8 x 128 steps") and not unit.search("HalfCheetah-v5")
