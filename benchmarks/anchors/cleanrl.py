"""CleanRL's own scripts (ppo.py, ppo_continuous_action.py, ppo_atari.py at a pinned commit of
github.com/vwxyzjn/cleanrl), with the fewest edits Gymnasium 1.x needs, so that benchmarks/launch.py runs them beside
ours. Their TensorBoard events (runs/<env>__<script>__<seed>__<time>/, charts/episodic_return ...) are CleanRL's own.

    python benchmarks/anchors/cleanrl.py ppo_continuous_action --cleanrl CLEANRL_CLONE --env-id Hopper-v5 --seed 1

CLEANRL_CLONE: a clone of github.com/vwxyzjn/cleanrl with the commit below (`git clone` gives it), or the variable
CLEANRL_CLONE. Every flag after the script's name but --cleanrl goes to CleanRL's script.

The scripts were written for Gymnasium 0.29 (their pyproject.toml at this commit pins 0.29.1). The edits: the vector
env's same-step autoreset, which 0.29 did and 1.x no longer does by default (without it, an episode's end hands the
learner one transition across the reset); episode logging from 1.x's final_info, a dict of arrays where 0.29 had a
list of dicts (without it, no return is logged); TransformObservation's observation space, which 1.x requires; for
Atari, registering ale-py's envs and the two wrappers' new names.
"""

import os
import subprocess
import sys
from pathlib import Path

COMMIT = "fe8d8a03c41a7ef5b523e2e354bd01c363e786bb"
SCRIPTS = ("ppo", "ppo_continuous_action", "ppo_atari")
EDITS = {
    "all": [
        (
            """            if "final_info" in infos:
                for info in infos["final_info"]:
                    if info and "episode" in info:
                        print(f"global_step={global_step}, episodic_return={info['episode']['r']}")
                        writer.add_scalar("charts/episodic_return", info["episode"]["r"], global_step)
                        writer.add_scalar("charts/episodic_length", info["episode"]["l"], global_step)
""",
            """            if "final_info" in infos and "episode" in infos["final_info"]:
                ended = infos["final_info"]["_episode"]
                for r, l in zip(infos["final_info"]["episode"]["r"][ended], infos["final_info"]["episode"]["l"][ended]):
                    print(f"global_step={global_step}, episodic_return={r}")
                    writer.add_scalar("charts/episodic_return", r, global_step)
                    writer.add_scalar("charts/episodic_length", l, global_step)
""",
        ),
    ],
    "ppo": [
        (
            "[make_env(args.env_id, i, args.capture_video, run_name) for i in range(args.num_envs)],\n",
            "[make_env(args.env_id, i, args.capture_video, run_name) for i in range(args.num_envs)],\n"
            "        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,\n",
        ),
    ],
    "ppo_continuous_action": [
        (
            "[make_env(args.env_id, i, args.capture_video, run_name, args.gamma) for i in range(args.num_envs)]\n",
            "[make_env(args.env_id, i, args.capture_video, run_name, args.gamma) for i in range(args.num_envs)],\n"
            "        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,\n",
        ),
        (
            "gym.wrappers.TransformObservation(env, lambda obs: np.clip(obs, -10, 10))",
            "gym.wrappers.TransformObservation(env, lambda obs: np.clip(obs, -10, 10), env.observation_space)",
        ),
    ],
    "ppo_atari": [
        ("import gymnasium as gym\n", "import ale_py\nimport gymnasium as gym\n\ngym.register_envs(ale_py)\n"),
        ("gym.wrappers.GrayScaleObservation(env)", "gym.wrappers.GrayscaleObservation(env)"),
        ("gym.wrappers.FrameStack(env, 4)", "gym.wrappers.FrameStackObservation(env, 4)"),
        (
            "[make_env(args.env_id, i, args.capture_video, run_name) for i in range(args.num_envs)],\n",
            "[make_env(args.env_id, i, args.capture_video, run_name) for i in range(args.num_envs)],\n"
            "        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,\n",
        ),
    ],
}


def show(clone: str, path: str) -> str:
    """A file of CleanRL's repository at COMMIT."""
    shown = subprocess.run(["git", "-C", clone, "show", f"{COMMIT}:{path}"], capture_output=True, text=True)
    if shown.returncode != 0:
        raise SystemExit(
            f"error: --cleanrl {clone}: no commit {COMMIT[:8]} there "
            "(pass a full clone: git clone https://github.com/vwxyzjn/cleanrl)"
        )
    return shown.stdout


def write_script(name: str, clone: str, out: Path) -> Path:
    """CleanRL's cleanrl/<name>.py at COMMIT, edited, written into `out` as cleanrl_<name>.py (ppo_atari.py with the
    cleanrl_utils/atari_wrappers.py it imports, unchanged); its path."""
    text = show(clone, f"cleanrl/{name}.py")
    for old, new in EDITS["all"] + EDITS[name]:
        if old not in text:
            raise SystemExit(f"error: CleanRL's {name}.py differs from what the edits expect: {old[:60]!r}")
        text = text.replace(old, new)
    out.mkdir(parents=True, exist_ok=True)
    if name == "ppo_atari":
        (out / "cleanrl_utils").mkdir(exist_ok=True)
        (out / "cleanrl_utils" / "__init__.py").write_text("")
        (out / "cleanrl_utils" / "atari_wrappers.py").write_text(show(clone, "cleanrl_utils/atari_wrappers.py"))
    path = out / f"cleanrl_{name}.py"
    path.write_text(text)
    return path.resolve()


def main():
    argv = sys.argv[1:]
    if not argv or argv[0] not in SCRIPTS:
        raise SystemExit(f"error: name CleanRL's script first: one of {', '.join(SCRIPTS)}")
    name = argv.pop(0)
    clone = os.environ.get("CLEANRL_CLONE")
    if "--cleanrl" in argv:
        at = argv.index("--cleanrl")
        clone = argv[at + 1]
        del argv[at : at + 2]
    if not clone:
        raise SystemExit("error: pass --cleanrl CLEANRL_CLONE (a clone of github.com/vwxyzjn/cleanrl)")
    path = write_script(name, clone, Path("."))
    os.execv(sys.executable, [sys.executable, str(path), *argv])


if __name__ == "__main__":
    main()
