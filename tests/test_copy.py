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

TINY = {
    "a2c_cartpole.py": ["--total-timesteps", "160", "--eval-episodes", "1"],
    "ppo_tetris.py": "--total-timesteps 128 --num-envs 8 --num-steps 8 --num-minibatches 2 --max-ticks 20 "
    "--eval-episodes 1".split(),
    "ppo_puffer_async.py": "--env-id mpe-spread --total-timesteps 384 --num-envs 2 --horizon 32 --num-minibatches 2 "
    "--eval-episodes 1".split(),
}
RUNNER = """import json, sys
sys.argv = [sys.argv[1]] + sys.argv[2:]
import {module}
{module}.main(sys.argv[1:])
loaded = {{name: module.__file__ for name, module in sys.modules.items() if name.split(".")[0] == "common"}}
packages = [name for name in ("pufferlib", "pettingzoo", "mpe2", "popgym") if name in sys.modules]
print(json.dumps(dict(loaded=loaded, packages=packages)))
"""


def readme_files(script: str) -> list:
    """The common/ files the README's table row for `script` names."""
    readme = open(os.path.join(ROOT, "README.md")).read()
    (row,) = [line for line in readme.splitlines() if line.startswith(f"| `{script}` |") and "common/" in line]
    return re.findall(r"common/(\w+\.py)", row)


@pytest.mark.parametrize("script", sorted(TINY))
def test_a_script_with_the_files_the_readme_lists_trains_on_its_own(tmp_path, script):
    files = readme_files(script)
    os.makedirs(tmp_path / "common")
    shutil.copy(os.path.join(ROOT, script), tmp_path)
    for name in files:
        shutil.copy(os.path.join(ROOT, "common", name), tmp_path / "common")
    (tmp_path / "runner.py").write_text(RUNNER.format(module=script[:-3]))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "runner.py", script, *TINY[script]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "done: step" in out.stdout
    report = json.loads(out.stdout.strip().splitlines()[-1])
    outside = {name: path for name, path in report["loaded"].items() if not path.startswith(str(tmp_path))}
    assert not outside, f"loaded from outside the copy: {outside}"
    used = {os.path.basename(path) for path in report["loaded"].values()}
    assert used == set(files), f"the README lists {sorted(files)}, the run loaded {sorted(used)}"
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
