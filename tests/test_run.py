"""The run's plumbing shared by every script (common/run.py, common/checkpoint.py), through each script: a
checkpoint given to the wrong script, --exp-name and the checkpoint's name, the progress line's total, the
evaluation after the last update, --render of a non-Tetris run, and a disk that fills up while saving.
"""

import errno
import os
import subprocess
import sys

import pytest
import torch

import a2c_cartpole
import ppo_puffer_async
import ppo_tetris
from common import checkpoint, presets, run
from common.checkpoint import SaveError, save_checkpoint
from conftest import ROOT

SCRIPTS = {"a2c_cartpole": a2c_cartpole, "ppo_tetris": ppo_tetris, "ppo_puffer_async": ppo_puffer_async}
TINY = {
    "a2c_cartpole": dict(total_timesteps=160, eval_freq=0, checkpoint_freq=0),
    "ppo_tetris": dict(
        total_timesteps=128, num_envs=8, num_steps=8, num_minibatches=2, checkpoint_freq=0, max_ticks=20
    ),
    "ppo_puffer_async": dict(env_id="CartPole-v1", total_timesteps=128, num_envs=2, horizon=32, num_minibatches=2),
}


PRESETS = {"a2c_cartpole": presets.a2c_cartpole, "ppo_tetris": None, "ppo_puffer_async": presets.ppo_puffer_async}


def tiny_run(name, **overrides):
    """A tiny run of script `name`: its env's preset, then TINY's flags and `overrides`."""
    module = SCRIPTS[name]
    flags = {**TINY[name], **overrides}
    preset = {} if PRESETS[name] is None else PRESETS[name](flags.get("env_id", module.Args.env_id))
    return module.train(module.Args(**{**preset, **flags}))


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """One finished tiny run of each script: {script: checkpoint path}."""
    directory = tmp_path_factory.mktemp("checkpoints")
    cwd = os.getcwd()
    os.chdir(directory)
    try:
        return {name: str(directory / tiny_run(name)["checkpoint"]) for name in SCRIPTS}
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize("flag", ["--eval-checkpoint", "--resume"])
@pytest.mark.parametrize("loader,saver", [(a, b) for a in sorted(SCRIPTS) for b in sorted(SCRIPTS) if a != b])
def test_a_checkpoint_given_to_another_script_names_the_one_that_saved_it(
    checkpoints, tmp_path, monkeypatch, loader, saver, flag
):
    monkeypatch.chdir(tmp_path)
    path = checkpoints[saver]
    with pytest.raises(SystemExit) as e:
        SCRIPTS[loader].main([flag, path])
    assert str(e.value) == (
        f"error: {flag}: {path} was saved by {saver}.py, not {loader}.py; use python {saver}.py {flag} {path}"
    )


@pytest.mark.parametrize("flag", ["--eval-checkpoint", "--resume"])
@pytest.mark.parametrize("saver", sorted(SCRIPTS))
def test_a_checkpoint_missing_an_entry_is_one_line(checkpoints, tmp_path, saver, flag):
    """A checkpoint written by an earlier version of a script (here: one entry gone) gets the same one-line error
    as any file that lacks what the script needs: no guessing, no silent defaults."""
    payload = torch.load(checkpoints[saver], weights_only=True)
    del payload["model" if flag == "--eval-checkpoint" else "schedule"]
    path = tmp_path / "old.pt"
    torch.save(payload, path)
    with pytest.raises(SystemExit) as e:
        SCRIPTS[saver].main([flag, str(path)])
    missing = "model" if flag == "--eval-checkpoint" else "schedule"
    assert str(e.value) == (
        f"error: {flag}: checkpoint {path} lacks the entries {missing}: it was not written by this script; "
        f"pass a runs/<run>/{saver}.pt that this script saved"
    )


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_resume_and_eval_checkpoint_take_the_saved_flags_and_refuse_others(checkpoints, capsys, name):
    """--resume and --eval-checkpoint run with the saved run's flags: --help shows them; a flag they would ignore is
    a one-line error naming it."""
    saved = torch.load(checkpoints[name], weights_only=True)["args"]
    with pytest.raises(SystemExit):
        SCRIPTS[name].main(["--resume", checkpoints[name], "--help"])
    assert f"(default: {saved['total_timesteps']})" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        SCRIPTS[name].main(["--resume", checkpoints[name], "--total-timesteps", "1000000", "--gamma", "0.5"])
    assert str(e.value).startswith("error: --resume uses the saved run's flags: drop --gamma (--total-timesteps")


def test_render_of_a_run_that_is_not_tetris_is_one_line(checkpoints, capsys):
    with pytest.raises(SystemExit) as e:
        ppo_puffer_async.main(["--eval-checkpoint", checkpoints["ppo_puffer_async"], "--render"])
    assert str(e.value).startswith("error: --render draws Tetris games; ") and "CartPole-v1 run" in str(e.value)
    assert "\033[H" not in capsys.readouterr().out  # no board was drawn first


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_exp_name_names_the_run_but_not_the_checkpoint(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    result = tiny_run(name, exp_name="det1")
    assert "__det1__" in os.path.basename(result["run_dir"])
    assert os.path.basename(result["checkpoint"]) == f"{name}.pt" and os.path.exists(result["checkpoint"])


def test_the_progress_line_counts_to_the_rounded_total_on_resume(tmp_path, monkeypatch, capsys):
    """An extension to a total that is not whole updates runs to the rounded total, and says so."""
    monkeypatch.chdir(tmp_path)
    first = tiny_run("ppo_puffer_async")  # 2 updates of 64
    capsys.readouterr()
    ppo_puffer_async.train(ppo_puffer_async.Args(resume=first["checkpoint"], total_timesteps=300))
    out = capsys.readouterr().out
    assert "step        192/256 |" in out and "/300" not in out.replace("--total-timesteps 300", "")


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_every_run_ends_with_an_evaluation_on_the_console_and_in_tensorboard(tmp_path, monkeypatch, capsys, name):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.chdir(tmp_path)
    result = tiny_run(name, eval_episodes=2)  # --eval-freq 0: only after the last update
    done = [line for line in capsys.readouterr().out.splitlines() if line.startswith("done: ")]
    assert len(done) == 1 and "eval return " in done[0] and "(2 episodes)" in done[0], done
    events = EventAccumulator(result["run_dir"]).Reload()
    assert [e.step for e in events.Scalars("eval/return_mean")] == [result["global_step"]]


def test_evaluating_does_not_change_what_training_samples(tmp_path, monkeypatch):
    """Tetris evaluates with sampled actions; the evaluation draws from its own seeded stream, so a run with
    an evaluation every update learns exactly what the same run without them learns."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    def losses(**flags):
        result = ppo_puffer_async.train(
            ppo_puffer_async.Args(
                total_timesteps=4 * 128, num_envs=16, horizon=8, num_minibatches=2, max_ticks=50, **flags
            )
        )
        return [e.value for e in EventAccumulator(result["run_dir"]).Reload().Scalars("losses/policy_loss")]

    monkeypatch.chdir(tmp_path)  # distinct names: two runs started in the same second would share a run dir
    assert losses(eval_freq=1, eval_episodes=3, exp_name="a") == losses(eval_freq=0, eval_episodes=1, exp_name="b")


# ----- a full disk, a Ctrl-C while saving -----


def test_a_ctrl_c_while_saving_stays_a_ctrl_c_and_keeps_the_previous_file(tmp_path, monkeypatch):
    """torch.save's zip writer turns a KeyboardInterrupt that lands mid-write into a RuntimeError as it closes;
    the run must still see Ctrl-C (and save and exit 130), not a crash."""
    path = tmp_path / "run.pt"
    save_checkpoint(str(path), {"step": 1})

    def interrupted(obj, f):  # what torch.save does when SIGINT arrives while it writes
        f.write(b"PK" * 1000)
        try:
            raise KeyboardInterrupt
        finally:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 4544 vs 4438")

    monkeypatch.setattr(torch, "save", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(str(path), {"step": 2})
    monkeypatch.undo()
    assert torch.load(path, weights_only=True) == {"step": 1}
    assert os.listdir(tmp_path) == ["run.pt"]


def test_a_failed_write_is_one_line_and_keeps_the_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "run.pt"
    save_checkpoint(str(path), {"step": 1})

    def no_space(obj, f):  # what torch.save does when the disk fills: its writer fails inside an OSError
        f.write(b"PK" * 1000)
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0")

    monkeypatch.setattr(torch, "save", no_space)
    with pytest.raises(SaveError) as e:
        save_checkpoint(str(path), {"step": 2})
    assert str(e.value) == f"could not save {path}: [Errno 28] No space left on device"
    monkeypatch.undo()
    assert torch.load(path, weights_only=True) == {"step": 1}  # the old checkpoint, whole
    assert os.listdir(tmp_path) == ["run.pt"]  # no temporary file left behind


def test_a_real_write_past_the_file_size_limit_is_a_save_error(tmp_path):
    """The OS refuses the write itself (a file-size limit stands in for a full disk): same one line."""
    code = (
        "import resource, signal, sys; sys.path.insert(0, sys.argv[1]); import torch;"
        "from common.checkpoint import SaveError, save_checkpoint;"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN); resource.setrlimit(resource.RLIMIT_FSIZE, (50000, 50000))\n"
        "try:\n save_checkpoint(sys.argv[2], {'w': torch.zeros(100_000)})\n"
        "except SaveError as e:\n print(e)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, ROOT, str(tmp_path / "big.pt")], capture_output=True, text=True, timeout=60
    )
    assert out.stdout.strip() == f"could not save {tmp_path / 'big.pt'}: [Errno 27] File too large", out
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_a_disk_that_fills_for_a_while_warns_and_a_failed_final_save_is_one_line(tmp_path, monkeypatch, capsys, name):
    """Periodic saves 2 and 3 fail: a warning each, training goes on; the final save fails too: exit 1 with
    one line naming what was kept (the checkpoint of update 1, intact)."""
    monkeypatch.chdir(tmp_path)
    real = checkpoint.save_checkpoint
    calls = []

    def filling_disk(path, payload):
        calls.append(payload["update"])
        if len(calls) >= 2:
            raise SaveError(f"could not save {path}: [Errno 28] No space left on device")
        real(path, payload)

    monkeypatch.setattr(checkpoint, "save_checkpoint", filling_disk)
    module = SCRIPTS[name]
    flags = {**TINY[name], "checkpoint_freq": 1}
    per_update = {"a2c_cartpole": 80, "ppo_tetris": 64, "ppo_puffer_async": 64}[name]
    flags["total_timesteps"] = 3 * per_update
    argv = [f"--{key.replace('_', '-')}={value}" for key, value in flags.items()]
    with pytest.raises(SystemExit) as e:
        module.main(argv)
    captured = capsys.readouterr()
    assert calls == [1, 2, 3, 3]  # updates 1-3, then the final save
    warnings = [line for line in captured.err.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 2 and all(
        "the checkpoint of step " + f"{per_update:,} is kept; training goes on" in w for w in warnings
    ), captured.err
    (path,) = [os.path.join(root, f) for root, _, files in os.walk("runs") for f in files if f.endswith(".pt")]
    assert str(e.value) == (
        f"error: could not save {path}: [Errno 28] No space left on device; "
        f"the checkpoint of step {per_update:,} is kept"
    )
    assert torch.load(path, weights_only=True)["update"] == 1


def test_the_cpu_default_says_how_to_use_a_gpu_when_there_is_one(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert run.resolve_device("cpu") == torch.device("cpu")
    assert capsys.readouterr().out.count("pass --device cuda to use the GPU") == 1
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    run.resolve_device("cpu")
    assert capsys.readouterr().out == ""  # no GPU: nothing to say
