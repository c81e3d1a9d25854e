"""scripts/fixed_seed_runs.py's comparison: bit for bit, or across the value loss's factor of 2 (--half-value-loss)."""

import importlib.util
import json

import pytest

from conftest import ROOT

spec = importlib.util.spec_from_file_location("fixed_seed_runs", f"{ROOT}/scripts/fixed_seed_runs.py")
fixed_seed_runs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fixed_seed_runs)


def write(path, record):
    path.write_text(json.dumps(record))
    return str(path)


def test_half_value_loss_compares_the_value_loss_after_its_factor_and_nothing_else_loosely(tmp_path, capsys):
    before = {
        "a2c-cartpole": {"losses/value_loss": [[8, 1.5]], "losses/entropy": [[8, 0.7]], "losses/clipfrac": [[8, 0.1]]},
        "tetris-serial": {"losses/value_loss": [[8, 2.0]]},
    }
    halved = {
        "a2c-cartpole": {"losses/value_loss": [[8, 0.75]], "losses/entropy": [[8, 0.7]], "losses/clipfrac": [[8, 0.3]]},
        "tetris-serial": {"losses/value_loss": [[8, 2.0]]},  # ppo_tetris.py's was already 0.5 x squared error
    }
    old = write(tmp_path / "old.json", before)
    new = write(tmp_path / "new.json", halved)
    with pytest.raises(SystemExit) as e:
        fixed_seed_runs.compare(old, new, half_value_loss=True)
    assert e.value.code == 0, capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        fixed_seed_runs.compare(old, new)  # bit for bit: the value loss and clipfrac differ
    assert e.value.code == 1 and "DIFFERS in losses/clipfrac, losses/value_loss" in capsys.readouterr().out
    moved = {"a2c-cartpole": dict(halved["a2c-cartpole"], **{"losses/entropy": [[8, 0.71]]}), "tetris-serial": {}}
    with pytest.raises(SystemExit) as e:
        fixed_seed_runs.compare(old, write(tmp_path / "moved.json", moved), half_value_loss=True)
    assert e.value.code == 1 and "a2c-cartpole: DIFFERS in losses/entropy" in capsys.readouterr().out
