"""benchmarks/tune.py: the search on a time budget, its journal, pruning on learning curves, Ctrl-C and resume, and
the proof on unseen seeds with the winner's preset."""

import math
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

optuna = pytest.importorskip("optuna")
import tune  # noqa: E402

# A learner whose curve is known: it rises to 1000 * learning_rate (+ a hundredth per seed) over its budget, so the
# trial with the smallest learning rate has the worst curve at every point.
FAKE_LEARNER = """
import argparse
import dataclasses


@dataclasses.dataclass
class Args:
    env_id: str = "Env-v0"
    seed: int = 1
    total_timesteps: int = 1000
    learning_rate: float = 0.001


if __name__ == "__main__":
    import time

    # TensorBoard's own event writer: the events a SummaryWriter writes, without torch's start-up time
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    parser = argparse.ArgumentParser()
    for name, value in dataclasses.asdict(Args()).items():
        parser.add_argument("--" + name.replace("_", "-"), type=type(value), default=value)
    parser.add_argument("--checkpoint-freq", type=int)
    args = parser.parse_args()
    writer = EventFileWriter(f"runs/{args.env_id}__fake__{args.seed}__1")
    tenth = args.total_timesteps // 10
    for step in range(tenth, args.total_timesteps + 1, tenth):
        value = 1000 * args.learning_rate * step / args.total_timesteps + args.seed / 100
        for tag, number in (("charts/episodic_return", value), ("charts/SPS", 500.0)):
            summary = Summary(value=[Summary.Value(tag=tag, simple_value=number)])
            writer.add_event(Event(wall_time=time.time(), step=step, summary=summary))
    writer.close()
"""


def fake_space(tmp_path, monkeypatch, budget="budget = 1000"):
    (tmp_path / "fake.py").write_text(FAKE_LEARNER)
    space = tmp_path / "fake.toml"
    space.write_text(
        textwrap.dedent(f"""
        title = "fake"
        script = "fake.py"
        envs = ["Env-v0"]
        tag = "charts/episodic_return"
        {budget}
        seeds = [1, 2, 3]
        proof_seeds = [11, 12]
        [normalize]
        "Env-v0" = [0, 10]
        [params]
        learning-rate = {{ low = 0.0001, high = 0.01, log = true }}
        """)
    )
    monkeypatch.setattr(tune, "ROOT", tmp_path)
    monkeypatch.setattr(tune, "POLL_SECONDS", 0.2)
    return str(space)


def journal(out: Path):
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(out / "journal.log")))
    return optuna.load_study(study_name="fake", storage=storage)


def test_trial_value_is_the_mean_less_one_standard_error_and_reports_come_at_each_tenth():
    assert tune.trial_value([1.0, 2.0, 3.0]) == pytest.approx(2.0 - 1.0 / math.sqrt(3))
    assert tune.trial_value([5.0]) == 5.0
    curve = [[step, float(step), 0.0, step / 100] for step in (100, 150, 200, 300, 420)]
    # tenths of a 1,000-step budget: (0, 100] holds 1.0, (100, 200] holds 1.5 and 2.0, (200, 300] holds 3.0,
    # (300, 400] nothing (the last value before it stands); the curve has not reached 500 yet, so the fifth waits
    assert tune.report_points(curve, 1000, 0) == [(1, 1.0), (2, 1.75), (3, 3.0), (4, 3.0)]
    assert tune.report_points(curve, 1000, 2) == [(3, 3.0), (4, 3.0)]
    assert tune.flags_of({"learning-rate": 0.01, "anneal-lr": False, "norm-adv": True}) == (
        "--learning-rate 0.01 --no-anneal-lr --norm-adv"
    )


def test_the_search_prunes_the_worst_curves_and_a_stopped_search_goes_on_from_its_journal(tmp_path, monkeypatch):
    space = fake_space(tmp_path, monkeypatch)
    out = tmp_path / "out"
    # one worker: each trial starts after the one before has ended, so the pruner sees the same finished trials
    # whatever the machine's speed
    common = [space, "--workers", "1", "--out", str(out), "--no-proof", "--prune-after", "2"]
    assert tune.main([*common, "--n-trials", "4"]) == 0
    study = journal(out)
    assert len(study.trials) == 4
    assert study.trials[0].params == {"learning-rate": 0.001}  # trial 0: the script's defaults
    assert tune.main([*common, "--n-trials", "9"]) == 0  # started again: the same study, five trials more
    study = journal(out)
    assert len(study.trials) == 9
    first_part = [trial.params for trial in study.trials[:4]]
    assert not [trial.number for trial in study.trials[4:] if trial.params in first_part]  # new settings, no replay
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    pruned = [t for t in study.trials if t.state == optuna.trial.TrialState.PRUNED]
    assert pruned, "some trial fell below the median curve"
    worst = min(study.trials[2:], key=lambda t: t.params["learning-rate"])  # after the two the pruner waits for
    assert worst.state == optuna.trial.TrialState.PRUNED
    assert len(worst.user_attrs["run_seconds"]) == 0  # pruned on its first seed, past the warm-up
    for trial in pruned:  # stopped before its last seed's end
        assert len(trial.user_attrs["run_seconds"]) < 3
    for trial in done:  # the value: mean over seeds less one standard error, scores normalized by (0, 10)
        scores = [trial.user_attrs["scores"][str(seed)]["Env-v0"] / 10 for seed in (1, 2, 3)]
        assert trial.value == pytest.approx(tune.trial_value(scores))
    assert study.best_trial.params["learning-rate"] == max(t.params["learning-rate"] for t in done)


def test_successive_halving_stops_most_trials_at_its_first_rung_on_the_first_seed(tmp_path, monkeypatch):
    space = fake_space(tmp_path, monkeypatch)
    halving = 'pruner = "halving"\nprune_from = 3\nreduction = 3\n'
    Path(space).write_text(Path(space).read_text().replace("[normalize]", halving + "[normalize]"))
    out = tmp_path / "out"
    assert tune.main([space, "--workers", "1", "--out", str(out), "--no-proof", "--n-trials", "7"]) == 0
    study = journal(out)
    pruned = [t for t in study.trials if t.state == optuna.trial.TrialState.PRUNED]
    assert pruned
    # rungs at tenths 3, 9 and 27 (the third seed's seventh): a trial stops at one of them, on the values so far
    assert {max(t.intermediate_values) for t in pruned} <= {3, 9, 27}
    for trial in pruned:  # at its rung, it was not among the best third (at least the best one) of those there
        rung = max(trial.intermediate_values)
        reached = [
            t.intermediate_values[rung] for t in study.trials[: trial.number + 1] if rung in t.intermediate_values
        ]
        kept = sorted(reached, reverse=True)[: max(len(reached) // 3, 1)]
        assert trial.intermediate_values[rung] < min(kept)
    assert len(pruned) > len(study.trials) / 2  # most trials cost a fraction of one seed's run
    worst = min(study.trials, key=lambda t: t.params["learning-rate"])
    assert worst.state == optuna.trial.TrialState.PRUNED and max(worst.intermediate_values) == 3


def test_ctrl_c_stops_the_runs_and_their_trials_run_again_at_the_next_launch(tmp_path, monkeypatch):
    space = fake_space(tmp_path, monkeypatch)
    out = tmp_path / "out"
    sleeps = []

    def interrupted_sleep(seconds):
        sleeps.append(seconds)
        if len(sleeps) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(tune.time, "sleep", interrupted_sleep)
    with pytest.raises(SystemExit) as stopped:
        tune.main([space, "--workers", "2", "--out", str(out), "--no-proof", "--n-trials", "3"])
    assert stopped.value.code == 130
    monkeypatch.undo()
    fake_space(tmp_path, monkeypatch)
    study = journal(out)
    stopped_trials = [t for t in study.trials if t.user_attrs.get("stopped")]
    assert [t.number for t in stopped_trials] == [0, 1]
    assert tune.main([space, "--workers", "2", "--out", str(out), "--no-proof", "--n-trials", "3"]) == 0
    study = journal(out)
    finished = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(finished) == 3  # the two stopped trials again, and a third
    assert finished[0].params == {"learning-rate": 0.001} and finished[0].user_attrs["rerun_of"] == 0
    assert finished[1].params == stopped_trials[1].params


def test_a_trial_stopped_after_its_first_seed_goes_on_from_its_second_at_the_next_launch(tmp_path, monkeypatch, capsys):
    space = fake_space(tmp_path, monkeypatch)
    out = tmp_path / "out"
    second_seed = out / "trials" / "0" / "Env-v0" / "seed2"

    interrupts = []

    def sleep_until_the_second_seed(seconds):
        if second_seed.exists() and not interrupts:  # the first seed's run is done and the second's has started
            interrupts.append(seconds)
            raise KeyboardInterrupt

    monkeypatch.setattr(tune.time, "sleep", sleep_until_the_second_seed)
    with pytest.raises(SystemExit):
        tune.main([space, "--workers", "1", "--out", str(out), "--no-proof", "--n-trials", "1"])
    monkeypatch.undo()
    fake_space(tmp_path, monkeypatch)
    stopped = journal(out).trials[0]
    assert list(stopped.user_attrs["scores"]) == ["1"] and len(stopped.user_attrs["run_seconds"]) == 1
    assert tune.main([space, "--workers", "1", "--out", str(out), "--no-proof", "--n-trials", "1"]) == 0
    assert "trial 1 goes on from trial 0's 1 runs" in capsys.readouterr().out
    rerun = journal(out).trials[1]
    assert rerun.state == optuna.trial.TrialState.COMPLETE and rerun.user_attrs["rerun_of"] == 0
    assert not (out / "trials" / "1" / "Env-v0" / "seed1").exists()  # the first seed is not run again
    assert (out / "trials" / "1" / "Env-v0" / "seed3").exists()
    assert rerun.user_attrs["scores"]["1"] == stopped.user_attrs["scores"]["1"]
    assert list(rerun.user_attrs["scores"]) == ["1", "2", "3"] and len(rerun.user_attrs["run_seconds"]) == 3
    assert {step: rerun.intermediate_values[step] for step in range(1, 11)} == {
        step: stopped.intermediate_values[step] for step in range(1, 11)
    }  # the pruner sees the first seed's curve as it was reported
    scores = [rerun.user_attrs["scores"][str(seed)]["Env-v0"] / 10 for seed in (1, 2, 3)]
    assert rerun.value == pytest.approx(tune.trial_value(scores))


def test_a_stopped_trial_runs_again_unless_a_trial_ran_its_settings_to_an_end():
    rate = optuna.distributions.FloatDistribution(0.0001, 0.01, log=True)
    study = optuna.create_study(direction="maximize")
    for value, state in ((0.001, "COMPLETE"), (0.002, "PRUNED"), (0.001, "FAIL"), (0.002, "FAIL"), (0.003, "FAIL")):
        trial = optuna.trial.create_trial(
            params={"learning-rate": value},
            distributions={"learning-rate": rate},
            value=0.5 if state == "COMPLETE" else None,
            intermediate_values={1: 0.1} if state == "PRUNED" else None,
            state=getattr(optuna.trial.TrialState, state),
            user_attrs={"stopped": True} if state == "FAIL" else {},
        )
        study.add_trial(trial)
    tune.requeue_stopped(study)
    waiting = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    # trials 2 and 3 ran settings that trials 0 and 1 ran to their end: only trial 4's run again
    assert [(t.system_attrs["fixed_params"], t.user_attrs["rerun_of"]) for t in waiting] == [
        ({"learning-rate": 0.003}, 4)
    ]
    assert study.user_attrs["requeued"] == [2, 3, 4]  # none of the three counts as a trial started
    tune.requeue_stopped(study)  # a second launch enqueues nothing more
    assert len(study.get_trials(states=(optuna.trial.TrialState.WAITING,))) == 1


def test_the_budget_is_calibrated_to_minutes_at_the_defaults_speed(tmp_path, monkeypatch):
    space = fake_space(tmp_path, monkeypatch, budget="calibrate_steps = 1000")
    out = tmp_path / "out"
    assert tune.main([space, "--out", str(out), "--no-proof", "--n-trials", "1", "--run-minutes", "0.5"]) == 0
    assert journal(out).user_attrs["budget"] == 15_000  # 500 steps/s x 30 s


def test_the_calibration_leaves_the_start_up_out_of_the_rate():
    # 10 s of start-up, then 1,000 steps/s: charts/SPS (steps over all the time so far) reads 500 at step 10,000 and
    # 666.7 at 20,000 (30 s); the second half's rate is 1,000, and a minute reaches 20,000 + 1,000 x 30 steps
    curve = [[step, 0.0, 0.0, step / (10 + step / 1000)] for step in (5_000, 10_000, 15_000, 20_000)]
    sps, budget = tune.steps_in(curve, 1)
    assert sps == pytest.approx(1000) and budget == pytest.approx(50_000)  # the last value alone: 40,000


def test_a_tiny_search_on_cartpole_writes_its_journal_proves_its_winner_and_writes_its_preset(tmp_path, monkeypatch):
    import results

    space = tmp_path / "cartpole.toml"
    space.write_text(
        textwrap.dedent("""
        title = "a2c_cartpole.py on CartPole-v1"
        script = "a2c_cartpole.py"
        envs = ["CartPole-v1"]
        tag = "charts/episodic_return"
        budget = 2000
        seeds = [1, 2, 3]
        proof_seeds = [11, 12]
        [normalize]
        "CartPole-v1" = [22.9, 500]
        [params]
        learning-rate = { low = 0.0001, high = 0.01, log = true }
        gamma = { choices = [0.9, 0.99] }
        """)
    )
    monkeypatch.setattr(results, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(tune, "FIGURES", tmp_path / "figures")
    out = tmp_path / "out"
    kept = tmp_path / "kept" / "tune-cartpole.log"  # the journal where git would keep it
    common = [str(space), "--workers", "2", "--pruner", "none", "--journal", str(kept)]
    assert tune.main([*common, "--out", str(out), "--n-trials", "1", "--no-proof"]) == 0  # the defaults, then stopped
    assert tune.main([*common, "--out", str(out), "--n-trials", "2"]) == 0  # again: one trial more, then the proof
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(kept)))
    study = optuna.load_study(study_name="cartpole", storage=storage)
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.COMPLETE] * 2
    assert study.trials[0].params == {"learning-rate": 0.001, "gamma": 0.99}
    preset = (out / "preset.py").read_text()
    winner = eval(preset[preset.index("dict(") :])  # the form of common/presets.py's entries
    from common import presets

    assert set(winner) == set(presets.A2C_CARTPOLE["continuous"])  # every flag a preset names
    saved = __import__("json").loads((tmp_path / "results" / "tune-cartpole.json").read_text())
    assert len(saved["runs"]) == 4  # the tuned setting and the defaults, two unseen seeds each
    assert {run["seed"] for run in saved["runs"]} == {11, 12}
    assert saved["search"]["winner"] == {
        "label": "trial 1",
        "params": study.trials[1].params,
        "verdict": saved["values"]["winner.verdict"],
    }
    assert saved["values"]["winner.verdict"] in ("better", "on par", "worse")
    assert len(saved["search"]["trials"]["rows"]) == 2
    assert f"learning_rate={study.trials[1].params['learning-rate']!r}," in preset
    # where the defaults scored best in the search, the notes and the preset say that its winner is the best tuned one
    defaults_first = study.trials[0].value >= study.trials[1].value
    assert any("ranked the defaults first" in note for note in saved["table"]["notes"]) == defaults_first
    assert ("ranked the defaults first" in preset) == defaults_first
    minutes = [run["minutes"] for run in saved["runs"] if run["label"] == "defaults"]
    assert "on one core, the mean over its seeds: trial 1 " in saved["table"]["notes"][-2]  # wall time beside scores
    assert saved["table"]["notes"][-2].endswith(f"defaults {sum(minutes) / len(minutes):.1f}.")
    # another clone, with the journal and the proof's record only: nothing runs again, the same results
    assert len(__import__("json").loads(kept.with_suffix(".proof.json").read_text())) == 4
    assert tune.main([*common, "--out", str(tmp_path / "elsewhere"), "--n-trials", "2"]) == 0
    again = __import__("json").loads((tmp_path / "results" / "tune-cartpole.json").read_text())
    assert again["runs"] == saved["runs"] and again["values"] == saved["values"]
    assert not (tmp_path / "elsewhere" / "trials").exists() and not list(
        (tmp_path / "elsewhere").glob("proof/*/*/*/runs")
    )


@pytest.mark.parametrize("name", sorted(p.stem for p in (ROOT / "benchmarks" / "spaces").glob("*.toml")))
def test_every_space_holds_its_scripts_defaults_and_proves_on_seeds_it_never_searched(name):
    space = tune.load_space(name)
    defaults = tune.check_defaults(space, tune.script_defaults(space))  # trial 0: every default inside its range
    assert set(defaults) == set(space["params"])
    assert len(space["seeds"]) >= 3 and not set(space["seeds"]) & set(space["proof_seeds"])
    assert set(space["envs"]) <= set(space["normalize"])
    assert "budget" in space or "run_minutes" in space
    assert isinstance(space["minutes"], int)  # how long its search and proof take (report.py names the command)


def test_a_whole_run_score_takes_every_value_up_to_the_budget(tmp_path, monkeypatch):
    space = fake_space(tmp_path, monkeypatch, budget='budget = 1000\nscore = "whole run"')
    out = tmp_path / "out"
    assert tune.main([space, "--out", str(out), "--no-proof", "--n-trials", "1"]) == 0
    # the defaults' curve, 1000 x 0.001 x step / budget + seed / 100 at each tenth: its mean over the ten points is
    # 0.55 + seed / 100, normalized by (0, 10); seeds 1-3 give 0.056, 0.057, 0.058: mean 0.057, standard error
    # 0.001 / sqrt(3)
    assert journal(out).trials[0].value == pytest.approx(0.057 - 0.001 / math.sqrt(3))
    (tmp_path / "fake.toml").write_text((tmp_path / "fake.toml").read_text().replace("whole run", "best"))
    with pytest.raises(SystemExit, match="score must be one of final, whole run"):
        tune.main([space, "--out", str(out), "--n-trials", "1"])
