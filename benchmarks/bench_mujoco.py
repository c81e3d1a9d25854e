"""The speed of ppo_puffer_async.py on MuJoCo against Stable-Baselines3's PPO at CleanRL's settings, side by side,
and CleanRL's own ppo_continuous_action.py (with --cleanrl). (Their learning is compared by the suite
`python benchmarks/launch.py mujoco --cleanrl CLEANRL_CLONE`.)

    python benchmarks/bench_mujoco.py --cleanrl CLEANRL_CLONE      # the docs' table: HalfCheetah-v5, 200k steps each

Each row's learner runs on one core while SB3's PPO runs on the other, one torch thread each, the same steps; each
ratio is from one pair run at the same time. Needs `pip install -e ".[bench]"`.
"""

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from anchors import cleanrl as cleanrl_anchor  # noqa: E402

import results as results_module  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# CleanRL's ppo_continuous_action.py settings (at fe8d8a03), as this script spells them. SB3 below takes them as
# arguments; they are SB3 2.9.2's PPO defaults (stable_baselines3/ppo/ppo.py), which RL Zoo v2.8.0's
# hyperparams/ppo.yml keeps for some MuJoCo tasks (its mujoco-defaults) but not HalfCheetah (tuned there).
MATCHED = ["--num-envs", "1", "--horizon", "64", "--batch-size", "2048", "--num-minibatches", "32"]
MATCHED += ["--update-epochs", "10", "--hidden-size", "64"]
SB3 = """
import sys, time, gymnasium as gym, torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize
torch.set_num_threads(1)
env = VecNormalize(make_vec_env(sys.argv[1], n_envs=1, seed=1), gamma=0.99)
model = PPO("MlpPolicy", env, n_steps=2048, batch_size=64, n_epochs=10, learning_rate=3e-4, gamma=0.99,
            gae_lambda=0.95, clip_range=0.2, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5, seed=1, device="cpu")
start = time.perf_counter()
model.learn(int(sys.argv[2]))
print(f"SPS {int(sys.argv[2]) / (time.perf_counter() - start):.0f}")
"""


def speed(env_id: str, steps: int, out: Path, cleanrl=None):
    """Training SPS side by side with SB3's PPO (SB3 on core 0, the other on core 1, one torch thread each, the same
    steps): ppo_puffer_async.py at CleanRL's settings, CleanRL's own script (with --cleanrl), ppo_puffer_async.py at
    its defaults. Each ratio is from one pair run at the same time."""
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    ours = [
        sys.executable,
        str(ROOT / "ppo_puffer_async.py"),
        "--env-id",
        env_id,
        "--total-timesteps",
        str(steps),
        "--checkpoint-freq",
        "0",
        "--seed",
        "1",
        "--eval-freq",
        "0",
        "--eval-episodes",
        "1",
    ]
    learners = [
        ("ppo_puffer_async.py", "CleanRL's: 1 env x 2048 steps, 32 minibatches, 10 epochs, 64 x 64", ours + MATCHED)
    ]
    if cleanrl:
        command = [
            sys.executable,
            str(cleanrl_anchor.write_script("ppo_continuous_action", cleanrl, out)),
            "--env-id",
            env_id,
            "--total-timesteps",
            str(steps),
        ]
        learners.append(
            (f"CleanRL's ppo_continuous_action.py ({cleanrl_anchor.COMMIT[:8]})", "its own (the same)", command)
        )
    learners.append(("ppo_puffer_async.py", "its defaults: 8 envs x 256 steps, minibatches of 256, 64 x 64", ours))

    def launch(core, name, command):
        log = open(out / f"{name}.txt", "w")
        return subprocess.Popen(
            ["taskset", "-c", str(core), *command], cwd=out, env=env, stdout=log, stderr=subprocess.STDOUT
        )

    def sps_of(proc, name) -> float:
        if proc.wait() != 0:
            raise SystemExit(f"{name} failed: {out / (name + '.txt')}")
        return float(re.findall(r"SPS:?\s+([\d,]+)", (out / f"{name}.txt").read_text())[-1].replace(",", ""))

    rows, runs, sb3_version = [], [], __import__("stable_baselines3").__version__
    for i, (learner, settings, command) in enumerate(learners):
        pair = (
            launch(0, f"sb3_{i}", [sys.executable, "-c", SB3, env_id, str(steps)]),
            launch(1, f"learner_{i}", command),
        )
        sb3_sps, sps = sps_of(pair[0], f"sb3_{i}"), sps_of(pair[1], f"learner_{i}")
        runs.append(dict(learner=learner, settings=settings, sps=sps, sb3_sps=sb3_sps))
        rows.append([learner, settings, f"{sps:,.0f}", f"{sb3_sps:,.0f}", f"**{sps / sb3_sps:.2f}x**"])
        print(f"| {' | '.join(rows[-1])} |", flush=True)
    columns = ["learner", "settings", "training SPS", f"SB3 {sb3_version} PPO beside it (CleanRL's settings)", "ratio"]
    return columns, rows, runs


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", default="v5", help="v5, or v4 for CleanRL's versions")
    parser.add_argument("--out", default="bench_results/mujoco")
    parser.add_argument("--cleanrl", help="a clone of github.com/vwxyzjn/cleanrl, to run its script too")
    opts = parser.parse_args()
    start = time.time()
    columns, rows, runs = speed(f"HalfCheetah-{opts.version}", 200_000, Path(opts.out) / "speed", opts.cleanrl)
    print(results_module.markdown(columns, rows))
    notes = [
        f"HalfCheetah-{opts.version}, 200,000 steps per run; each row's learner on one core while SB3's PPO "
        "runs on the other, one torch thread each; training SPS as each learner reports it."
    ]
    if opts.version == "v5" and opts.cleanrl:
        results_module.save(
            "mujoco-speed",
            (time.time() - start) / 60,
            table=dict(columns=columns, rows=rows, notes=notes),
            runs=runs,
        )


if __name__ == "__main__":
    main()
