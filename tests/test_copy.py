"""Each script copies on its own: the script and exactly the common/ files the README's "Copy a script" table lists
for it, put in an empty directory, train a few updates there, and every common module the run loaded is one of
the copied files (an editable install would otherwise serve a missing one silently from the checkout)."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.one_set  # the smoke set trains every script on every kind of env with the newest versions

TINY = {
    "a2c_cartpole.py": ["--total-timesteps", "160", "--eval-episodes", "1"],
    "ppo_tetris.py": "--total-timesteps 128 --num-envs 8 --num-steps 8 --num-minibatches 2 --max-ticks 20 "
    "--eval-episodes 1".split(),
    "ppo_puffer_async.py": "--env-id mpe-spread --total-timesteps 384 --num-envs 2 --horizon 32 --num-minibatches 2 "
    "--eval-episodes 1".split(),
}
# One env id per family the docs run each script on, and the package (as the README's table names it) that
# Gymnasium or the script loads for it: the copy trains on each with only what the table lists.
FAMILIES = {
    "a2c_cartpole.py": {
        "LunarLander-v3": "box2d",
        "HalfCheetah-v5": "gymnasium[mujoco]",
        "popgym-RepeatPreviousEasy-v0": "popgym",
    },
    "ppo_puffer_async.py": {
        "tetris": "pufferlib-core",
        "LunarLander-v3": "box2d",
        "HalfCheetah-v5": "gymnasium[mujoco]",
        "repeat-previous-easy": "popgym",
        "mpe2.simple_speaker_listener_v4": "mpe2",
        "atari-breakout": "ale-py",
    },
}
FAMILY_FLAGS = {
    "a2c_cartpole.py": "--total-timesteps 256 --num-envs 2 --eval-episodes 1 --eval-max-steps 50".split(),
    "ppo_puffer_async.py": "--total-timesteps 256 --num-envs 2 --horizon 16 --num-minibatches 2 --eval-episodes 1 "
    "--eval-max-steps 50 --backend Serial --num-workers 1 --batch-size 64".split(),
}
RUNNER = """import json, sys
sys.argv = [sys.argv[1]] + sys.argv[2:]
import {module}
{module}.main(sys.argv[1:])
loaded = {{name: module.__file__ for name, module in sys.modules.items() if name.split(".")[0] == "common"}}
packages = [name for name in ("pufferlib", "pettingzoo", "mpe2", "popgym") if name in sys.modules]
print(json.dumps(dict(loaded=loaded, packages=packages)))
"""


def readme_row(script: str) -> str:
    """The README's "Copy a script" table row for `script`."""
    readme = open(os.path.join(ROOT, "README.md")).read()
    (row,) = [line for line in readme.splitlines() if line.startswith(f"| `{script}` | `common/")]
    return row


def train_in_copy(tmp_path, script: str, flags: list) -> dict:
    """Copies `script` and the common/ files its README row lists into `tmp_path`, trains there with `flags`; the
    common/ modules and the packages the run loaded."""
    files = re.findall(r"common/(\w+\.py)", readme_row(script))
    os.makedirs(tmp_path / "common")
    shutil.copy(os.path.join(ROOT, script), tmp_path)
    for name in files:
        shutil.copy(os.path.join(ROOT, "common", name), tmp_path / "common")
    (tmp_path / "runner.py").write_text(RUNNER.format(module=script[:-3]))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    command = [sys.executable, "runner.py", script, *flags]
    out = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=240, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "done: step" in out.stdout
    report = json.loads(out.stdout.strip().splitlines()[-1])
    outside = {name: path for name, path in report["loaded"].items() if not path.startswith(str(tmp_path))}
    assert not outside, f"loaded from outside the copy: {outside}"
    used = {os.path.basename(path) for path in report["loaded"].values()}
    assert used <= set(files), f"the README lists {sorted(files)}, the run loaded {sorted(used)}"
    return dict(report, used=used, files=set(files))


@pytest.mark.parametrize("script", sorted(TINY))
def test_a_script_with_the_files_the_readme_lists_trains_on_its_own(tmp_path, script):
    report = train_in_copy(tmp_path, script, TINY[script])
    assert report["used"] == report["files"], "the README lists a file the default run does not need"
    if script == "a2c_cartpole.py":  # the README's packages: no pufferlib, pettingzoo or popgym
        assert report["packages"] == []
    if script == "ppo_tetris.py":
        assert report["packages"] == ["pufferlib"]


def test_importing_the_a2c_loads_no_pufferlib_tetris_or_workers():
    code = "import a2c_cartpole, sys; print(sorted(m for m in sys.modules if m.startswith(('common.', 'pufferlib'))))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    loaded = eval(out.stdout)
    assert "common.tetris" not in loaded and "common.vector" not in loaded and "common.puffer_envs" not in loaded
    assert not any(name.startswith("pufferlib") for name in loaded), loaded


@pytest.mark.parametrize("script, env_id", [(script, env_id) for script in FAMILIES for env_id in FAMILIES[script]])
def test_the_copy_trains_on_each_env_family_the_docs_use_with_the_packages_the_readme_lists(tmp_path, script, env_id):
    """LunarLander needs box2d, MuJoCo gymnasium[mujoco], POPGym popgym, MPE mpe2: the table names each."""
    assert FAMILIES[script][env_id] in readme_row(script), f"the README's copy table for {script} omits it"
    train_in_copy(tmp_path, script, ["--env-id", env_id, *FAMILY_FLAGS[script]])
