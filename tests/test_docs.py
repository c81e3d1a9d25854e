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


@pytest.mark.one_set
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


def test_a_table_is_marked_by_the_presets_its_runs_took_and_not_by_the_others():
    results = results_module()
    files = {
        "common/presets.py": (
            "PPO_PUFFER_ASYNC = {\n"
            '    "continuous": dict(learning_rate=3e-4, horizon=16),\n'
            '    "atari": dict(learning_rate=2.5e-4, horizon=128),\n'
            "}\n"
            "A2C_CARTPOLE = {}\n"
            "def ppo_puffer_async(env_id):\n    return PPO_PUFFER_ASYNC\n"
        ),
        "ppo_puffer_async.py": (
            "class Args:\n    seed: int = 1\n    learning_rate: float = 3e-3\n    horizon: int = 64\n"
        ),
    }
    mujoco = {"presets": {"ppo_puffer_async.py": ["continuous"]}}
    tetris = {"presets": {"ppo_puffer_async.py": [""]}}  # the script's own Args
    every = {}  # a result that does not say which it took: the whole files
    for result in (mujoco, tetris, every):
        result["dependencies"] = results.dependencies("x.py", "", files.get, list(files), result.get("presets"))

    def marked():
        named = {"mujoco": mujoco, "tetris": tetris, "every": every}
        return [name for name, result in named.items() if results.changed_dependencies(result, files.get)]

    assert marked() == []
    files["common/presets.py"] = files["common/presets.py"].replace("2.5e-4", "1e-4")  # the Atari entry
    assert marked() == ["every"]
    files["common/presets.py"] = files["common/presets.py"].replace("horizon=16", "horizon=32")  # the Box entry
    assert marked() == ["mujoco", "every"]
    files["common/presets.py"] = files["common/presets.py"].replace("horizon=32", "horizon=16")
    files["ppo_puffer_async.py"] = files["ppo_puffer_async.py"].replace("3e-3", "1e-3")  # a default a preset replaces
    assert marked() == ["tetris", "every"]
    files["ppo_puffer_async.py"] = files["ppo_puffer_async.py"].replace(
        "seed: int = 1", "seed: int = 2"
    )  # one it keeps
    assert marked() == ["mujoco", "tetris", "every"]
    files["common/presets.py"] = files["common/presets.py"].replace("return PPO", "return dict(PPO")[:-1] + ")\n"
    files["ppo_puffer_async.py"] = files["ppo_puffer_async.py"].replace("seed: int = 2", "seed: int = 1")
    assert marked() == ["mujoco", "tetris", "every"]  # the presets' code, outside the tables, is every run's


# What README.md and docs/*.md may say outside a rendered table (<!-- table:NAME -->...<!-- /table:NAME -->), a
# rendered value (<!-- value:NAME:KEY -->...<!-- /value -->), others' published figures with their source named
# (<!-- cite -->...<!-- /cite -->) and code (fenced blocks and `inline` spans: commands and flag values): no decimal,
# no negative number, no number with a unit of speed or time, and no number within five words of a word that
# measures, but for the settings below. A figure written by hand goes stale the day the code changes.
TABLE = re.compile(r"<!-- table:([\w-]+) -->.*?<!-- /table:\1 -->", re.S)
FIGURE = re.compile(r"<!-- figure:([\w-]+) -->.*?<!-- /figure:\1 -->", re.S)  # a figure and its rendered stamp
VALUE = re.compile(r"<!-- value:[\w-]+:[\w.]+ -->.*?<!-- /value -->")
CITE = re.compile(r"<!-- cite -->.*?<!-- /cite -->", re.S)
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`]+`")
LINK_TARGET = re.compile(r"(?<=\])\([^)\s]*\)|https?://\S+")
TAG = re.compile(r"<[^>]*>")  # an HTML tag or comment; an <img>'s alt text is prose
ALT = re.compile(r'(?<=alt=")[^"]*')
NUMBER = re.compile(r"(?<![\w.,#−-])[-−]?\d+(?:,\d{3})*(?:\.\d+)*(?:e-?\d+)?(?:[kMB]|x)?(?!\w)")
UNIT = re.compile(r"\s?(SPS|min|s|h|%)(?!\w)")
MEASURE = re.compile(r"(?i)(return\w*|scor\w*|lines|sps|ratios?|times|faster|slower|x)('s|’s)?")
VERSION = r"v?\d+(?:\.\d+)+(?:\.x)?"
VALUES = r"[-−+]?\d+(?:\.\d+)?(?:e-?\d+)?(?:(?:,|\s+or|\s+to|\s+and|\s+/)\s+[-−+]?\d+(?:\.\d+)?(?:e-?\d+)?)*"
CELL = r"([-−+]?\d[\d,]*(\.\d+)?(e-?\d+)?[kM]?|on|off)"
# The settings prose may name, each a rule: a version, a flag's value, a size, a bound, a bar a test sets, a budget.
SETTINGS = {
    "a package's version (pufferlib-core 3.0.5, Python 3.11 to 3.13)": re.compile(
        r"(?i)\b`?(python|torch|gymnasium|gym|pufferlib(-core)?|ocean|ale-py|envpool|skrl|sb3(-contrib)?|optuna(-dashboard)?"
        rf"|stable-baselines3)`?(\s+\(SB3\))?('s)?\s+(at\s+)?(version\s+)?{VERSION}((,|\s+and|\s+or|\s+to)\s+{VERSION})*"
    ),
    "a hyperparameter's value (gamma 0.99, `vf_coef` 0.5, rewards x 0.1)": re.compile(
        rf"(?i)(\b(gamma|(GAE\s+)?lambda|clip|value\s+clip|entropy(\s+bonus|\s+coefficient)?(\s+of)?|value\s+coefficient"
        rf"|gradient\s+norm|rewards\s+x|learning\s+rate|lr|alpha|eps|RMSprop(\s+at)?|Adam(\s+at)?)"
        rf"|`(--[a-z-]+|[a-z]+(_[a-z]+)*_(coef|norm|lambda|init|alpha|beta0|scale))`)\s+{VALUES}"
    ),
    "a product of sizes (8 envs x 128 steps = 1,024)": re.compile(
        r"(?<![\d.])\d[\d,]*(\s+[a-z]+)?(\s+x\s+\d[\d,]*(?![.\d])(\s+[a-z]+)?)+(\s+=\s+\d[\d,]*)?"
    ),
    "a bound ([-1, 1], clipped to +-10)": re.compile(r"\[[-−]?\d+(\.\d+)?,\s+[-−]?\d+(\.\d+)?\]|\+-\d+"),
    "a bar a test or a table sets (>= 475, -150 or better)": re.compile(
        r"(>=|at\s+least|better\s+than|requires)\s+[-−]?\d+(\.\d+)?|[-−]?\d+\s+or\s+better"
    ),
    "a step budget (7.5M agent steps)": re.compile(r"\d+(\.\d+)?[kM]\s+(agent\s+|env\s+)?steps"),
    "the episodes or seeds a statistic takes (the last 100 training episodes, 3 seeds)": re.compile(
        r"\d[\d,]*\s+(training\s+|evaluation\s+|whole\s+)?(episodes|games|seeds)"
    ),
    "an interval's confidence level (95% stratified bootstrap intervals)": re.compile(
        r"95%(\s+(stratified|percentile))?(\s+bootstrap)?\s+(confidence\s+)?(intervals?|band|CI)"
    ),
    "a reference to a table or a figure of a paper (its Table 3)": re.compile(r"\b(Table|Figure|Section)\s+\d+"),
    "a flag's values in a row of a table of flags (| `--gamma` | 0.995 | 0.99 |)": re.compile(
        rf"(?m)^\|\s*`--[^`]+`[^|\n]*(\|\s*{CELL}(,\s+{CELL})*\s*)+(?=\|)"
    ),
}


def hand_written_figures(text: str) -> list:
    """Each number of `text` that its prose may not hold: its line and the words around it."""
    for pattern in (TABLE, FIGURE, VALUE, CITE, FENCE):  # blanked, offsets kept
        text = pattern.sub(lambda m: re.sub(r"\S", " ", m.group(0)), text)
    allowed = [m.span() for rule in SETTINGS.values() for m in rule.finditer(text)]

    def setting(at: int, to: int = 0) -> bool:  # a number or a word inside a setting's phrase
        return any(start <= at and max(at + 1, to) <= end for start, end in allowed)

    def blank(m, keep=""):  # a code span stays one word ("C"), an <img> keeps its alt text
        kept = {i for a in ALT.finditer(m.group(0)) for i in range(*a.span())}
        return keep + "".join(c if i in kept or c == "\n" else " " for i, c in enumerate(m.group(0)))[len(keep) :]

    text = INLINE_CODE.sub(lambda m: blank(m, "C"), text)
    text = TAG.sub(blank, LINK_TARGET.sub(blank, text))
    # the words of a paragraph, or of a table's row, are one run; a word is near the five either side of it in its run
    words = []
    run = 0
    after_row = False
    for line in re.finditer(r".*\n?", text):
        row = line.group(0).lstrip().startswith("|")
        run += row or after_row or not line.group(0).strip()
        after_row = row
        words += [
            (line.start() + w.start(), w.group(0).strip(".,;:()[]*_\"'!?"), run)
            for w in re.finditer(r"\S+", line.group(0))
        ]
    found = []
    for m in NUMBER.finditer(text):
        if setting(*m.span()):
            continue
        at = max(i for i, (start, _, _) in enumerate(words) if start <= m.start())
        near = [(start, word) for start, word, run in words[max(at - 5, 0) : at + 6] if run == words[at][2]]
        number = m.group(0)
        measures = [word for start, word in near if MEASURE.fullmatch(word) and not setting(start)]
        if (
            re.search(r"\d\.\d", number)
            or number[0] in "-−"
            or number[-1] == "x"
            or UNIT.match(text, m.end())
            or measures
        ):
            line = text.count("\n", 0, m.start()) + 1
            found.append(f"line {line}: {' '.join(word for _, word in near)}")
    return found


def test_no_measured_figure_is_written_by_hand_in_the_docs():
    """README.md and docs/*.md hold a measured figure only where it is rendered from a results file (a table, or an
    inline <!-- value --> marker) or cites others' published figures (<!-- cite -->, its source named)."""
    found = []
    for path in [Path(ROOT, "README.md"), *sorted(Path(ROOT, "docs").glob("*.md"))]:
        found += [f"{path.name}: ...{words}..." for words in hand_written_figures(path.read_text())]
    assert not found, "\n".join(found)
    caught = [
        "ran at 1,234 SPS",
        "1.50x faster",
        "took 5 min",
        "a return of 475",
        "scored 2,055 in all",
        "4.96 lines",
        "12 lines per game",
        "a mean of 0.5",
        "ends at -3.2",
        "ends at −150",
        "a third more, 1.5M of them",
        "reached 100k, three times as many",
        "pufferlib-core 3.0.5 on Python 3.11, then 3.0.7 on other Pythons",
        "gamma at 0.99 learned best",
        "2 envs x 4.96 lines",
        "| `--gamma` | 0.99 | 4.96 lines per game |",
        '<img src="agent.gif" width="240" alt="one game: 7 lines cleared">',
        "95% of the returns reach 475",
    ]
    assert all(hand_written_figures(text) for text in caught), [t for t in caught if not hand_written_figures(t)]
    allowed = [
        "8 x 128 steps",
        "HalfCheetah-v5, seeds 1-3, on 2026-11-29 (commit 65317c6)",
        "pufferlib-core 3.0.5 on Python 3.11 to 3.13, gymnasium 1.1, PufferLib 3.0's trainer",
        "gamma 0.99, lambda 0.95, rewards x 0.1, 16 envs x 5 steps = 80, clipped to [-1, 1]",
        "the first evaluation >= 475 in 1M steps",
        "runs at <!-- value:compile:table.rows.0.3 -->1.43x<!-- /value --> SB3's",
        "it reports <!-- cite -->a return of 3.2 (its README)<!-- /cite -->",
        "`--ent-coef 0.01 --total-timesteps 100000` learned more lines per game",
        "```bash\npython ppo_tetris.py --lr 2.5e-4  # 4.96 lines\n```",
        "[the table](docs/a2c.md#against-sb3-1-2), as Agarwal et al. 2021 advise",
        "as maximum returns over training (its Table 3; issue #29)",
        "| `--num-envs` (x 5 steps) | 64 | 16 |\n| `--total-timesteps` | 90M | 7.5M | 100k |",
        '<img src="docs/tetris_agent.gif" width="240" align="right" alt="the default run playing one game">',
        "the IQM over seeds with 95% stratified bootstrap intervals; scores with a 95% bootstrap band",
        "<!-- figure:x -->\n![curves](figures/x.png)\n\n<sub>(~4 min) commit 1, 2.5 returns</sub>\n<!-- /figure:x -->",
    ]
    assert not any(hand_written_figures(text) for text in allowed), [t for t in allowed if hand_written_figures(t)]
