"""benchmarks/compare.py's statistics against hand-computed answers and rliable's, its reading of TensorBoard run
folders, and benchmarks/launch.py's runs: workers, done runs kept, a suite's results file and figure."""

import json
import os
import shutil
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import compare  # noqa: E402


def test_the_iqm_is_the_mean_of_the_middle_half():
    assert compare.iqm(np.arange(1, 9)) == 4.5  # 3, 4, 5, 6
    assert compare.iqm([1, 2, 3, 4, 100]) == 3.0  # int(5 / 4) = 1 cut from each end: 2, 3, 4
    assert compare.iqm([7.0]) == 7.0
    rows = np.array([[1, 2, 3, 4], [10, 0, 0, 10]])
    np.testing.assert_allclose(compare.iqm(rows, axis=-1), [2.5, 5.0])


def test_the_stratified_bootstrap_keeps_each_tasks_runs_and_collapses_on_equal_scores():
    rng = np.random.default_rng(0)
    tasks = [np.array([1.0, 2.0, 3.0]), np.array([10.0, 20.0])]
    draws = compare.stratified_resamples(tasks, 500, rng)
    assert draws.shape == (500, 5)
    assert set(np.unique(draws[:, :3])) <= {1.0, 2.0, 3.0}  # task 1's columns draw task 1's runs only
    assert set(np.unique(draws[:, 3:])) <= {10.0, 20.0}
    assert compare.interval(compare.iqm, [[5.0] * 6]) == (5.0, 5.0, 5.0)


def test_probability_of_improvement_counts_pairs_and_half_ties():
    assert compare.probability_of_improvement([[3.0, 1.0]], [[2.0]]) == 0.5
    assert compare.probability_of_improvement([[1.0]], [[1.0]]) == 0.5
    assert compare.probability_of_improvement([[2.0, 3.0], [0.0]], [[1.0], [1.0]]) == 0.5  # 1 and 0, averaged
    assert compare.improvement_interval([[5.0, 6.0, 7.0]], [[1.0, 2.0]]) == (1.0, 1.0, 1.0)


# rliable 1.2.0's answers (reps=50,000, 95% percentile intervals; numpy 2.2, pandas 2.3, arch 7.2) for these scores,
# runs x tasks: library.get_interval_estimates with metrics.aggregate_iqm / aggregate_mean, and
# metrics.probability_of_improvement. A resampled statistic takes few distinct values here, so an endpoint may land
# one value over (the neighbours are 0.003 to 0.017 apart): the tolerance.
A = np.array([[0.10, 0.55, 0.90], [0.20, 0.60, 0.70], [0.35, 0.40, 0.95], [0.15, 0.80, 0.60], [0.30, 0.50, 0.85]])
B = np.array([[0.05, 0.45, 0.80], [0.25, 0.35, 0.75], [0.10, 0.50, 0.65], [0.20, 0.30, 0.70], [0.15, 0.55, 0.60]])
RLIABLE = {
    "A iqm": (0.5333, 0.4611, 0.6167),
    "A mean": (0.5300, 0.4700, 0.5900),
    "B iqm": (0.4278, 0.3778, 0.4778),
    "B mean": (0.4267, 0.3867, 0.4667),
    "A[:, 0] iqm": (0.2167, 0.1167, 0.3333),
    "P(A > B)": (0.7400, 0.5400, 0.9067),
}


def test_intervals_and_the_probability_of_improvement_agree_with_rliable():
    def tasks(scores):
        return [scores[:, task] for task in range(scores.shape[1])]

    found = {
        "A iqm": compare.interval(compare.iqm, tasks(A), reps=20_000),
        "A mean": compare.interval(np.mean, tasks(A), reps=20_000),
        "B iqm": compare.interval(compare.iqm, tasks(B), reps=20_000),
        "B mean": compare.interval(np.mean, tasks(B), reps=20_000),
        "A[:, 0] iqm": compare.interval(compare.iqm, [A[:, 0]], reps=20_000),
        "P(A > B)": compare.improvement_interval(tasks(A), tasks(B), reps=20_000),
    }
    for name, (point, low, high) in RLIABLE.items():
        assert found[name][0] == pytest.approx(point, abs=5e-5), name
        assert found[name][1] == pytest.approx(low, abs=0.0175), name
        assert found[name][2] == pytest.approx(high, abs=0.0175), name
    # rliable's performance profile of A (the share of runs scoring strictly above tau)
    profile = compare.performance_profile(tasks(A), np.array([0.0, 0.25, 0.5, 0.75, 1.0]))
    np.testing.assert_allclose(profile, [1.0, 0.8, 0.5333, 0.2667, 0.0], atol=5e-5)


def test_a_run_of_three_agents_per_env_is_scored_and_drawn_at_its_budget_in_agent_steps(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks" / "anchors"))
    import random_play

    run_dir = str(tmp_path / "game__random_play__1")
    random_play.write_flat_run(run_dir, {"eval/return_mean": 2.0}, budget=3000, agents=3)
    flat = compare.read_curve(run_dir, "eval/return_mean")
    assert [row[1] for row in flat] == [step / 3 for step in range(0, 3001, 300)]  # env steps beside agent steps
    # values 1..10 at agent steps 10..100, which are a third as many env steps
    curve = [[s, s / 3, s / 10, float(s // 10)] for s in range(10, 101, 10)]
    assert compare.final_score(curve, 50) == 5.0  # agent steps after 45 up to 50, not env steps
    run = {"label": "ours", "env": "game", "seed": 1, "budget": 90, "curve": curve}
    assert compare.axis_end([run], 0, 1000) == 90  # agent steps: its own budget
    assert compare.axis_end([run], 1, 1000) == 30  # env steps: as far as it got by then
    assert compare.axis_end([run], 2, 1000) == 9  # seconds


def test_verdicts_say_better_only_where_intervals_separate():
    assert compare.verdict((10, 9, 11), (5, 4, 8.9)) == "better"
    assert compare.verdict((10, 9, 11), (5, 4, 9.1)) == "on par"
    assert compare.verdict((1, 0, 2), (5, 3, 6)) == "worse"


def test_a_final_score_is_the_mean_of_the_last_tenth_and_the_whole_run_its_area():
    curve = [[s, s, s / 1000, float(s // 10)] for s in range(10, 101, 10)]  # values 1..10 at steps 10..100
    assert compare.final_score(curve, 100) == 10.0  # only step 100 lies after 90
    assert compare.final_score(curve, 50) == 5.0  # steps after 45 up to 50
    assert compare.final_score(curve, 100, compare.SCORES["whole run"]) == 5.5
    grid = np.array([5.0, 25.0, 27.0, 100.0])
    np.testing.assert_allclose(compare.on_grid(curve, 1, grid), [np.nan, 1.5, 1.5, 6.5])


def write_run(folder: Path, points, env_steps_per_step=None):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(folder))
    for step, value in points:
        writer.add_scalar("charts/episodic_return", value, step)
        if env_steps_per_step:
            writer.add_scalar("charts/env_steps", step * env_steps_per_step, step)
    writer.close()


def test_compare_reads_run_folders_and_writes_a_table_and_a_figure_that_carries_its_curves_hash(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    for seed in range(3):
        write_run(tmp_path / "a" / f"Env-v0__ours__{seed}__1", [(s, s / 100 + seed) for s in range(100, 1001, 100)])
        write_run(tmp_path / "b" / f"Env-v0__theirs__{seed}__1", [(s, 0.1 * seed) for s in range(100, 1001, 100)])
    out = tmp_path / "cmp"
    compare.main([f"ours={tmp_path / 'a'}", f"theirs={tmp_path / 'b'}", "--out", str(out)])
    table = (tmp_path / "cmp.md").read_text()
    assert "| Env-v0 | final | ours | 3 | 11 (10 to 12) | 10 / 11 / 12 |" in table
    assert "| Env-v0 | final | theirs | 3 | 0.1 (0 to 0.2) | 0 / 0.1 / 0.2 | 1.00 (1.00 to 1.00) | better |" in table
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import report

    runs = compare.runs_from_folders([f"ours={tmp_path / 'a'}", f"theirs={tmp_path / 'b'}"], "charts/episodic_return")
    assert report.png_description(Path(f"{out}.png")) == compare.curves_hash(runs)


def test_env_names_one_game_that_two_learners_name_differently(tmp_path):
    write_run(tmp_path / "a" / "atari-breakout__ours__1__1", [(100, 1.0)])
    write_run(tmp_path / "b" / "BreakoutNoFrameskip-v4__ppo_atari__1__1", [(100, 2.0)])
    patterns = [f"ours={tmp_path / 'a'}", f"cleanrl={tmp_path / 'b'}"]
    apart = compare.runs_from_folders(patterns, "charts/episodic_return")
    assert [run["env"] for run in apart] == ["atari-breakout", "BreakoutNoFrameskip-v4"]
    together = compare.runs_from_folders(patterns, "charts/episodic_return", env="Breakout")
    assert [run["env"] for run in together] == ["Breakout", "Breakout"]


def test_agent_steps_become_env_steps_where_a_run_logs_them(tmp_path):
    write_run(tmp_path / "Env-v0__x__1__1", [(300, 1.0), (600, 2.0)], env_steps_per_step=1 / 3)
    curve = compare.read_curve(str(tmp_path / "Env-v0__x__1__1"), "charts/episodic_return")
    assert [row[:2] for row in curve] == [[300, 100.0], [600, 200.0]]
    with pytest.raises(SystemExit, match="has no scalar eval/return_mean"):
        compare.read_curve(str(tmp_path / "Env-v0__x__1__1"), "eval/return_mean")


def test_a_run_read_while_it_writes_is_read_on_from_where_the_last_read_stopped(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path))
    for step in (100, 200):
        writer.add_scalar("charts/episodic_return", step / 100, step)
    writer.flush()
    events = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0})
    assert [row[3] for row in compare.read_curve(str(tmp_path), "charts/episodic_return", events)] == [1.0, 2.0]
    writer.add_scalar("charts/episodic_return", 3.0, 300)
    writer.close()
    assert [row[3] for row in compare.read_curve(str(tmp_path), "charts/episodic_return", events)] == [1.0, 2.0, 3.0]


FAKE_RUN = """
import sys, time
from torch.utils.tensorboard import SummaryWriter
seed = int(sys.argv[1])
writer = SummaryWriter(f"runs/Env-v0__fake__{seed}__1")
for step in range(100, 1001, 100):
    writer.add_scalar("eval/return_mean", step / 100 * (2 if "{label}" == "good" else 1), step)
writer.close()
"""


def fake_suite(tmp_path: Path, monkeypatch) -> Path:
    """A suite of two fake learners ("good" logs twice "plain"'s values) on three seeds, its results, figures and
    record kept under tmp_path."""
    import launch
    import results

    for label in ("good", "plain"):
        (tmp_path / f"{label}.py").write_text(FAKE_RUN.replace("{label}", label))
    suite = tmp_path / "fake.toml"
    suite.write_text(
        textwrap.dedent(f"""
        title = "fake"
        tag = "eval/return_mean"
        budget = 1000
        seeds = [1, 2, 3]
        [normalize]
        "Env-v0" = [0, 20]
        [[learners]]
        label = "good"
        envs = ["Env-v0"]
        command = "{{python}} {tmp_path}/good.py {{seed}}"
        [[learners]]
        label = "plain"
        envs = ["Env-v0"]
        command = "{{python}} {tmp_path}/plain.py {{seed}}"
        """)
    )
    monkeypatch.setattr(results, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(launch, "FIGURES", tmp_path / "figures")
    monkeypatch.setattr(launch, "ROOT", tmp_path)
    return suite


@pytest.mark.one_set
def test_the_launcher_runs_a_suite_on_workers_keeps_done_runs_and_writes_results_and_a_figure(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import launch

    suite = fake_suite(tmp_path, monkeypatch)
    out = tmp_path / "runs"
    assert launch.main([str(suite), "--workers", "2", "--out", str(out)]) == 0
    assert sorted(p.name for p in (out / "good" / "Env-v0").iterdir()) == ["seed1", "seed2", "seed3"]
    saved = json.loads((tmp_path / "results" / "fake.json").read_text())
    assert len(saved["runs"]) == 6 and saved["runs"][0]["curve"][-1][1:2] == [1000.0]
    assert saved["values"]["plain.env-v0.final.verdict"] == "better"  # the first learner against this one
    assert (tmp_path / "figures" / "fake.png").exists()
    cpu = launch.results_module.cpu_model()
    assert {run["machine"] for run in saved["runs"]} == {cpu} and saved["suite"]["runs_made_on"] == [cpu]
    done = out / "plain" / "Env-v0" / "seed2" / "done.json"
    (out / "plain" / "Env-v0" / "seed3" / "done.json").unlink()  # a run stopped half way
    for kept in out.glob("*/Env-v0/seed*/done.json"):  # as if each kept run had taken ten minutes
        data = json.loads(kept.read_text())
        data["runs"] = [{**row, "minutes": 10.0} for row in data["runs"]]
        kept.write_text(json.dumps({**data, "minutes": 10.0}))
    before = os.stat(done).st_mtime_ns
    assert launch.main([str(suite), "--workers", "2", "--out", str(out)]) == 0
    assert os.stat(done).st_mtime_ns == before  # a finished run is not run again
    assert (out / "plain" / "Env-v0" / "seed3" / "done.json").exists()
    saved = json.loads((tmp_path / "results" / "fake.json").read_text())
    assert 25.0 <= saved["minutes"] < 25.5  # the suite's six runs on 2 workers, not the last launch's one run
    with pytest.raises(SystemExit, match="the suite's learners are good, plain"):
        launch.main([str(suite), "--only", "nobody"])
    assert not (tmp_path / "results" / "runs" / "fake.json").exists()  # the results file holds the runs now
    # --keep in a clone with no run folders: the results file's runs, the same results
    shutil.rmtree(out)
    first = json.loads((tmp_path / "results" / "fake.json").read_text())
    assert launch.main([str(suite), "--workers", "2", "--out", str(out), "--keep"]) == 0
    again = json.loads((tmp_path / "results" / "fake.json").read_text())
    assert again["runs"] == first["runs"] and again["values"] == first["values"]
    assert again["minutes"] == first["minutes"]


@pytest.mark.one_set
def test_a_suite_stopped_half_way_goes_on_in_another_clone_from_its_record(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import launch

    suite = fake_suite(tmp_path, monkeypatch)
    record = tmp_path / "results" / "runs" / "fake.json"
    assert launch.main([str(suite), "--workers", "2", "--out", str(tmp_path / "a"), "--seeds", "1", "2"]) == 0
    rows = json.loads(record.read_text())
    assert sorted((row["label"], row["seed"]) for row in rows) == [("good", 1), ("good", 2), ("plain", 1), ("plain", 2)]
    assert not (tmp_path / "results" / "fake.json").exists()  # part of the suite: no results file
    # another clone: no run folders, the record only; seed 3 runs, seeds 1 and 2 are taken from the record
    assert launch.main([str(suite), "--workers", "2", "--out", str(tmp_path / "b")]) == 0
    assert sorted(path.parent.name for path in (tmp_path / "b").glob("*/Env-v0/*/runs")) == ["seed3", "seed3"]
    saved = json.loads((tmp_path / "results" / "fake.json").read_text())
    assert len(saved["runs"]) == 6 and [run for run in saved["runs"] if run["seed"] < 3] == rows
    assert not record.exists()
    # seed 1 run again: its rows in the record and in the results file; --keep takes each run once, the record's
    assert launch.main([str(suite), "--workers", "2", "--out", str(tmp_path / "c"), "--seeds", "1"]) == 0
    rerun = json.loads(record.read_text())
    assert launch.main([str(suite), "--workers", "2", "--out", str(tmp_path / "d"), "--keep"]) == 0
    saved = json.loads((tmp_path / "results" / "fake.json").read_text())
    assert len(saved["runs"]) == 6 and [run for run in saved["runs"] if run["seed"] == 1] == rerun


def test_a_scored_env_gives_a_row_per_team_each_from_its_own_tag(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    import launch

    folder = tmp_path / "ours" / "Game-v0" / "seed1"
    writer = SummaryWriter(str(folder / "runs" / "Game-v0__ours__1"))
    for step in (500, 1000):
        writer.add_scalar("eval/return_vs_random/red", 1.0, step)
        writer.add_scalar("eval/return_vs_random/blue", -2.0, step)
    writer.close()
    (folder / "done.json").write_text('{"minutes": 1.5, "commit": "abc"}')
    tags = {"red": "eval/return_vs_random/red", "blue": "eval/return_vs_random/blue"}
    job = {"label": "ours", "env": "Game-v0", "seed": 1, "cores": 2, "budget": 1000, "folder": folder, "tags": tags}
    runs = launch.read_runs([job])
    assert [(run["env"], run["curve"][-1][3]) for run in runs] == [("Game-v0 red", 1.0), ("Game-v0 blue", -2.0)]
    assert launch.core_minutes([job]) == 3.0  # one run, two rows: its cost counted once


@pytest.mark.one_set
def test_a_suite_whose_game_is_scored_per_team_saves_its_results_when_every_run_is_done(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import launch
    import results

    (tmp_path / "good.py").write_text(FAKE_RUN.replace("{label}", "good"))
    suite = tmp_path / "teams.toml"
    suite.write_text(
        textwrap.dedent(f"""
        title = "teams"
        tag = "eval/return_mean"
        budget = 1000
        seeds = [1, 2, 3]
        [scored]
        "Env-v0" = {{ "red" = "eval/return_mean", "blue" = "eval/return_mean" }}
        [[learners]]
        label = "good"
        envs = ["Env-v0"]
        command = "{{python}} {tmp_path}/good.py {{seed}}"
        """)
    )
    monkeypatch.setattr(results, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(launch, "FIGURES", tmp_path / "figures")
    monkeypatch.setattr(launch, "ROOT", tmp_path)
    assert launch.main([str(suite), "--workers", "2", "--out", str(tmp_path / "runs")]) == 0
    saved = json.loads((tmp_path / "results" / "teams.json").read_text())  # three runs, two rows each
    assert sorted({run["env"] for run in saved["runs"]}) == ["Env-v0 blue", "Env-v0 red"] and len(saved["runs"]) == 6


def test_an_anchor_in_its_own_environment_needs_its_python_named(tmp_path, monkeypatch):
    import launch

    suite = tmp_path / "own.toml"
    suite.write_text(
        textwrap.dedent("""
        title = "own"
        tag = "eval/return_mean"
        budget = 1000
        seeds = [1, 2, 3]
        [[learners]]
        label = "theirs"
        envs = ["Env-v0"]
        python = "$THEIR_PYTHON"
        setup = "bash make_theirs.sh"
        command = "{python} run.py --seed {seed}"
        """)
    )
    monkeypatch.delenv("THEIR_PYTHON", raising=False)
    with pytest.raises(SystemExit, match="set THEIR_PYTHON to its python \\(bash make_theirs.sh\\)"):
        launch.main([str(suite), "--out", str(tmp_path / "runs")])
    monkeypatch.setenv("THEIR_PYTHON", "/opt/theirs/bin/python")
    jobs = launch.jobs_of(launch.load_suite(str(suite)), tmp_path, [], [1])
    assert jobs[0]["command"] == "/opt/theirs/bin/python run.py --seed 1"


@pytest.mark.parametrize("suite", sorted(p.stem for p in (ROOT / "benchmarks" / "suites").glob("*.toml")))
def test_every_suite_runs_commands_that_exist_at_least_three_seeds_and_normalizes_every_env(suite, tmp_path, capsys):
    import launch

    data = launch.load_suite(suite)
    assert len(data["seeds"]) >= 3
    envs = {env for learner in data["learners"] for env in learner["envs"]}
    rows = set()
    for env in envs:
        names = data.get("scored", {}).get(env, {"": data["tag"]})
        rows |= {f"{env} {name}" if name else env for name in names}
    if not any("random" in learner["label"] for learner in data["learners"]):  # else random play is a row itself
        assert rows <= set(data.get("normalize", {})), "every env needs a random and a reference score"
    assert launch.main([suite, "--dry-run", "--cleanrl", "CLONE", "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    seeds_of = {env: data.get("env_seeds", {}).get(env, data["seeds"]) for env in envs}
    assert all(len(seeds) >= 3 for seeds in seeds_of.values())
    assert len(lines) == sum(len(seeds_of[env]) for learner in data["learners"] for env in learner["envs"])
    for line in lines:
        script = line.split(" && ")[1].split()[1]
        assert Path(script).exists(), script


def test_report_redraws_a_figure_whose_curves_changed_and_check_says_so(tmp_path):
    import report

    result = json.loads((ROOT / "benchmarks" / "results" / "a2c-cartpole-sb3.json").read_text())
    result["suite"]["figure"] = str(tmp_path / "figure.png")
    drawn = []
    page = ROOT / "docs" / "a2c.md"
    text = report.render_figure("a2c-cartpole-sb3", {"a2c-cartpole-sb3": result}, page, True, drawn)
    assert drawn == ["a2c-cartpole-sb3"] and not Path(result["suite"]["figure"]).exists()  # --check draws nothing
    assert "figure.png)" in text and "python benchmarks/launch.py a2c-cartpole-sb3" in text
    pytest.importorskip("matplotlib")
    report.render_figure("a2c-cartpole-sb3", {"a2c-cartpole-sb3": result}, page, False, [])
    drawn = []
    report.render_figure("a2c-cartpole-sb3", {"a2c-cartpole-sb3": result}, page, True, drawn)
    assert drawn == []  # drawn from these curves: current
    result["runs"][0]["curve"][-1][3] -= 1.0
    report.render_figure("a2c-cartpole-sb3", {"a2c-cartpole-sb3": result}, page, True, drawn)
    assert drawn == ["a2c-cartpole-sb3"]


def test_random_tetris_writes_the_games_mean_at_each_tenth(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "benchmarks" / "anchors"))
    import random_tetris

    from common.tetris import Tetris

    monkeypatch.chdir(tmp_path)
    run_dir = random_tetris.write_run(3, seed=2, budget=1000)
    totals = []  # the same three games stepped here, their rewards summed
    for episode in range(3):
        env = Tetris(num_envs=1, seed=200_000 + episode, log_interval=1)
        rng = np.random.default_rng(200_000 + episode)
        total = 0.0
        ended = False
        while not ended:
            _, rewards, terminals, truncations, _ = env.step(rng.integers(0, 7, 1, dtype=np.int32))
            total += float(rewards[0])
            ended = terminals[0] or truncations[0]
        totals.append(total)
    curve = compare.read_curve(run_dir, "charts/episodic_return")
    assert [point[0] for point in curve] == list(range(0, 1001, 100))
    assert [point[3] for point in curve] == pytest.approx([np.mean(totals)] * 11, rel=1e-5)
    assert len(compare.read_curve(run_dir, "tetris/lines_deleted")) == 11


def test_a_run_that_exits_without_events_is_a_failed_run_not_a_crash_of_the_launcher(tmp_path, monkeypatch, capsys):
    import launch
    import results

    suite = tmp_path / "empty.toml"
    suite.write_text(
        textwrap.dedent("""
        title = "empty"
        tag = "eval/return_mean"
        budget = 1000
        seeds = [1, 2, 3]
        [[learners]]
        label = "silent"
        envs = ["Env-v0"]
        command = "{python} -c pass"
        """)
    )
    monkeypatch.setattr(results, "RESULTS", tmp_path / "results")
    with pytest.raises(SystemExit, match="no finished run to report"):
        launch.main([str(suite), "--workers", "2", "--out", str(tmp_path / "runs")])
    assert capsys.readouterr().out.count("failed (0 runs' events, not one)") == 3


@pytest.mark.fixed_seed  # 100 games of seed 1 with the known-good ale-py: another version may play others
def test_random_atari_play_gives_the_random_score_the_atari_suite_normalizes_by():
    pytest.importorskip("ale_py")
    import tomllib

    sys.path.insert(0, str(ROOT / "benchmarks" / "anchors"))
    import random_atari

    suite = tomllib.loads((ROOT / "benchmarks" / "suites" / "atari.toml").read_text())
    random_score = suite["normalize"]["atari-breakout"][0]
    # 100 whole games (five lives each): a score per life would be about a fifth of it
    assert round(random_atari.random_atari("atari-breakout", 100), 1) == random_score


def test_a_suites_caption_names_its_runs_cpus_where_they_ran_on_several():
    import report

    result = {"command": "python benchmarks/launch.py fake", "minutes": 30, "commit": "abc", "date": "2026-11-30"}
    result["machine"] = "CPU A, 2 cores, Linux x86_64"
    result["versions"] = {"python": "3.11.7"}
    result["suite"] = {"runs_made_at": ["abc"], "runs_made_on": ["CPU A"]}
    assert "CPUs" not in report.stamp_line(result)  # one machine: the stamp's says it
    result["suite"]["runs_made_on"] = ["", "CPU A", "CPU B"]  # "": a run made before CPUs were kept
    assert "(its runs' CPUs: CPU A; CPU B; not recorded)" in report.stamp_line(result)
