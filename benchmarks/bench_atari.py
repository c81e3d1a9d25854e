"""ppo_puffer_async.py on Atari beside CleanRL's ppo_atari.py, run here: training speed (and Stable-Baselines3's PPO
with CnnPolicy) at CleanRL's settings, and where a step's time goes. Learning is a suite
(`python benchmarks/launch.py atari --cleanrl CLEANRL_CLONE`, benchmarks/suites/atari.toml).

    python benchmarks/bench_atari.py --speed --cleanrl CLEANRL_CLONE         # SPS side by side; ~10 min

CLEANRL_CLONE is a clone of github.com/vwxyzjn/cleanrl holding CLEANRL_COMMIT; its ppo_atari.py is written out with
the edits of benchmarks/anchors/cleanrl.py, the fewest that Gymnasium 1.x and ale-py 0.12 need, beside the
cleanrl_utils/atari_wrappers.py it imports (unchanged). Needs `pip install -e ".[atari,bench]"` (ale-py; SB3 for its
PPO; OpenCV for Gymnasium's ResizeObservation in CleanRL's make_env and for SB3's WarpFrame in its make_atari_env).

Speed: each learner trains --speed-steps agent steps with both cores, one after the other, twice over in alternation
(ours, CleanRL's, SB3's, ours, ...); a row's SPS is the better of its two, the ratio is against CleanRL's.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from anchors import cleanrl as cleanrl_anchor  # noqa: E402

import results as results_module  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GAMES = {"breakout": "BreakoutNoFrameskip-v4", "pong": "PongNoFrameskip-v4"}
CLEANRL_COMMIT = cleanrl_anchor.COMMIT
# CleanRL's ppo_atari_envpool.py was written for envpool 0.6 and gym 0.23 (a 4-tuple step; its pyproject.toml at
# CLEANRL_COMMIT: envpool>=0.6.4,<0.7, gym==0.23.1). With envpool 1.2.5, whose env_type="gym" envs are Gymnasium envs
# (a 5-tuple step, reset returning (obs, info), num_envs and the single spaces read-only properties: its
# envpool/registration.py and envpool/python/gymnasium_envpool.py), the fewest edits that run it:
ENVPOOL_EDITS = [
    (
        "        observations = super().reset(**kwargs)\n",
        "        observations, _ = super().reset(**kwargs)\n",
    ),
    (
        "        observations, rewards, dones, infos = super().step(action)\n",
        "        observations, rewards, terminations, truncations, infos = super().step(action)\n"
        "        dones = np.logical_or(terminations, truncations)\n",
    ),
    ("    envs.num_envs = args.num_envs\n", ""),
    ("    envs.single_action_space = envs.action_space\n", ""),
    ("    envs.single_observation_space = envs.observation_space\n", ""),
    (
        'assert isinstance(envs.action_space, gym.spaces.Discrete), "only discrete action space is supported"',
        'assert hasattr(envs.action_space, "n"), "only discrete action space is supported"',
    ),
]
SB3 = """
import sys, time, torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_atari_env
from stable_baselines3.common.vec_env import VecFrameStack
import ale_py, gymnasium
gymnasium.register_envs(ale_py)
env = VecFrameStack(make_atari_env(sys.argv[1], n_envs=8, seed=1), n_stack=4)
model = PPO("CnnPolicy", env, n_steps=128, batch_size=256, n_epochs=4, learning_rate=2.5e-4, gamma=0.99,
            gae_lambda=0.95, clip_range=0.1, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5, seed=1, device="cpu")
start = time.perf_counter()
model.learn(int(sys.argv[2]))
print(f"SPS {int(sys.argv[2]) / (time.perf_counter() - start):.0f}")
"""


def envpool_script(clone: str, out: Path) -> Path:
    """CleanRL's ppo_atari_envpool.py at CLEANRL_COMMIT, edited for envpool 1.2.5, written into `out`."""
    show = ["git", "-C", clone, "show", f"{CLEANRL_COMMIT}:cleanrl/ppo_atari_envpool.py"]
    text = subprocess.run(show, capture_output=True, text=True, check=True).stdout
    for old, new in ENVPOOL_EDITS:
        assert old in text, f"CleanRL's envpool script changed: {old!r} not found"
        text = text.replace(old, new)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "cleanrl_ppo_atari_envpool.py"
    path.write_text(text)
    return path.resolve()


def ours_command(game: str, seed: int, steps: int) -> list:
    flags = ["--env-id", f"atari-{game}", "--seed", str(seed), "--total-timesteps", str(steps)]
    return [sys.executable, str(ROOT / "ppo_puffer_async.py"), *flags]


def sps_in(text: str) -> float:
    """The last SPS a learner printed ("SPS: 412", "SPS 412", "SPS    412")."""
    return float(re.findall(r"SPS:?\s+([\d,]+)", text)[-1].replace(",", ""))


def cleanrl_split(script: Path, game: str, steps: int = 2048) -> dict:
    """CleanRL's ppo_atari.py's rollout, its parts timed apart (seconds per agent step): its vector env of 8 games
    with its wrappers stepped on its agent's actions, and its agent's forward pass on the 8 observations."""
    import importlib.util

    import gymnasium as gym
    import torch

    sys.path.insert(0, str(script.parent))  # its cleanrl_utils
    spec = importlib.util.spec_from_file_location("cleanrl_ppo_atari", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # defines make_env and Agent; training runs only as __main__
    envs = gym.vector.SyncVectorEnv(
        [module.make_env(GAMES[game], i, False, "split") for i in range(8)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    agent = module.Agent(envs)
    obs, _ = envs.reset(seed=1)
    env_time = 0.0
    forward_time = 0.0
    for _ in range(steps // 8):
        start = time.perf_counter()
        with torch.no_grad():
            action, _, _, _ = agent.get_action_and_value(torch.Tensor(obs))
        forward_time += time.perf_counter() - start
        start = time.perf_counter()
        obs, _, _, _, _ = envs.step(action.cpu().numpy())
        env_time += time.perf_counter() - start
    envs.close()
    return {"env": env_time / steps, "forward": forward_time / steps}


def ours_split(folder: Path) -> dict:
    """Ours' shares of the loop's time (its perf/ scalars: env, inference with the rollout's bookkeeping, learn)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (run_dir,) = (folder / "runs").iterdir()
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0}).Reload()
    return {key: events.Scalars(f"perf/{key}_time_frac")[-1].value for key in ("env", "inference", "learn")}


def speed(opts, out: Path):
    """Training SPS of each learner with both cores, alternating; ours' time split from its perf/ scalars."""
    game = "breakout"
    steps = opts.speed_steps
    learners = [
        ("ppo_puffer_async.py", ours_command(game, 1, steps) + ["--checkpoint-freq", "0", "--eval-freq", "0"]),
    ]
    if opts.cleanrl:
        script = cleanrl_anchor.write_script("ppo_atari", opts.cleanrl, out)
        command = [sys.executable, str(script), "--env-id", GAMES[game], "--total-timesteps", str(steps)]
        learners.append((f"CleanRL's ppo_atari.py ({CLEANRL_COMMIT[:8]})", command))
    if opts.envpool_python:  # a Python with envpool 1.2.5, gym 0.26, torch, tyro and tensorboard
        envpool_path = envpool_script(opts.cleanrl, out)
        command = [opts.envpool_python, str(envpool_path), "--env-id", "Breakout-v5", "--total-timesteps", str(steps)]
        learners.append((f"CleanRL's ppo_atari_envpool.py ({CLEANRL_COMMIT[:8]}), envpool 1.2.5", command))
    sb3_version = __import__("stable_baselines3").__version__
    learners.append((f"SB3 {sb3_version} PPO, CnnPolicy", [sys.executable, "-c", SB3, GAMES[game], str(steps)]))
    measured = {name: [] for name, _ in learners}
    for round_ in range(opts.rounds):
        for name, command in learners:
            folder = out / f"{len(measured[name])}_{re.sub(r'[^a-z0-9]+', '_', name.lower())}"
            shutil.rmtree(folder, ignore_errors=True)  # an earlier invocation's run would be read as this one's
            folder.mkdir(parents=True)
            log = subprocess.run(command, cwd=folder, capture_output=True, text=True)
            (folder / "log.txt").write_text(log.stdout + log.stderr)
            if log.returncode != 0:
                raise SystemExit(f"{name} failed: {folder / 'log.txt'}")
            measured[name].append(sps_in(log.stdout))
            print(f"round {round_ + 1}: {name}: SPS {measured[name][-1]:,.0f}", flush=True)
    base = max(measured[learners[1][0]]) if opts.cleanrl else None
    rows = []
    for name, _ in learners:
        best = max(measured[name])
        ratio = f"**{best / base:.2f}x**" if base else ""
        rows.append([name, " / ".join(f"{s:,.0f}" for s in measured[name]), f"{best:,.0f}", ratio])
    columns = ["learner", "SPS of each run", "best", "vs CleanRL's"]
    # Where a step's time goes, in microseconds per agent step, at each learner's best SPS
    split_columns = ["learner", "env", "forward (and the rollout's bookkeeping)", "update", "all"]
    split_rows = []
    ours_best = max(measured[learners[0][0]])
    shares = ours_split(out / f"{measured[learners[0][0]].index(ours_best)}_ppo_puffer_async_py")
    total = 1e6 / ours_best
    split = [shares["env"] * total, shares["inference"] * total, shares["learn"] * total]
    split_rows.append([learners[0][0], *[f"{x:,.0f}" for x in split], f"{total:,.0f}"])
    if opts.cleanrl:
        parts = cleanrl_split(script, game)
        total = 1e6 / base
        update = total - 1e6 * (parts["env"] + parts["forward"])
        split = [1e6 * parts["env"], 1e6 * parts["forward"], update]
        split_rows.append([learners[1][0], *[f"{x:,.0f}" for x in split], f"{total:,.0f}"])
    measured["split"] = dict(columns=split_columns, rows=split_rows)
    return columns, rows, measured


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--speed", action="store_true", help="training SPS side by side")
    parser.add_argument("--cleanrl", help="a clone of github.com/vwxyzjn/cleanrl (for CleanRL's script)")
    parser.add_argument(
        "--envpool-python",
        help="with --speed: a Python that has envpool 1.2.5, gym 0.26, torch, tyro and tensorboard, to run CleanRL's "
        "ppo_atari_envpool.py too (that script imports the old gym, so it lives in a venv of its own)",
    )
    parser.add_argument("--speed-steps", type=int, default=40_960)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", default="bench_results/atari")
    opts = parser.parse_args()
    if not opts.speed:
        raise SystemExit("--speed: the only measurement here (learning: python benchmarks/launch.py atari)")
    start = time.time()
    if opts.speed:
        columns, rows, runs = speed(opts, Path(opts.out) / "speed")
        print(results_module.markdown(columns, rows))
        print(results_module.markdown(runs["split"]["columns"], runs["split"]["rows"]))
        notes = [
            f"Breakout, {opts.speed_steps:,} agent steps per run at CleanRL's settings (8 envs x 128 steps, 4 "
            f"minibatches, 4 epochs, the Nature CNN), each learner alone with both cores, {opts.rounds} rounds in "
            "alternation; the SPS each learner reports."
        ]
        if opts.cleanrl and opts.speed_steps == 40_960 and opts.rounds == 2:
            minutes = (time.time() - start) / 60
            split = runs.pop("split")
            split["notes"] = [
                "Microseconds per agent step at each learner's best SPS above. Ours: its own clocks (perf/ scalars; "
                "forward includes the rollout's bookkeeping). CleanRL's: its vector env of 8 games with its wrappers "
                "and its agent's forward pass timed apart on 2,048 steps; its update is the rest of its step."
            ]
            ours, cleanrl = list(runs)[:2]
            readme = dict(
                task="Atari (Breakout): training speed at CleanRL's `ppo_atari.py` settings",
                result=f"{max(runs[ours]) / max(runs[cleanrl]):.2f}x CleanRL's `ppo_atari.py` SPS",
                page="docs/atari.md#speed",
                order=11,
            )
            table = dict(columns=columns, rows=rows, notes=notes)
            results_module.save("atari-speed", minutes, table=table, runs=[runs], readme=readme)
            results_module.save("atari-split", minutes, table=split, runs=[])


if __name__ == "__main__":
    main()
