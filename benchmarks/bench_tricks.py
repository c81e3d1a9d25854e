"""The speed tricks the scripts keep, each timed against the plain form it replaces, on the script's default run: a
trick (code less plain than the obvious form) stays only where it pays at least 10% there. Each case runs a script's
default flags for a short budget, as bench_defaults.py does (evaluation cut to one episode, checkpoints off), in a
fresh process each time, with the trick and with the plain form alternating, --runs times each; the ratio is the
median of the pairs' ratios (each run with the trick over the plain run just after it), as in bench_defaults.py.

    python benchmarks/bench_tricks.py                                  # ~10 min on 2 cores
    python benchmarks/bench_tricks.py --cases gumbel-max --runs 9
    python benchmarks/bench_tricks.py --run gumbel-max --plain         # one run, the plain form (used by the above)

The tricks and their plain forms:
- gumbel-max: a2c_cartpole.py draws a categorical as argmax(logits + Gumbel noise); plain: Categorical(logits).sample()
- same-step-vector-env: common/gym_envs.SameStepVectorEnv steps a2c_cartpole.py's envs; plain: Gymnasium's own
  RecordEpisodeStatistics(SyncVectorEnv(..., autoreset_mode=SAME_STEP)), which returns the same (tests/test_envs.py);
  also at the settings SB3's A2C is compared at (8 envs x 5 steps: RL Zoo v2.8.0's hyperparams/a2c.yml for
  CartPole-v1 and SB3 2.9.2's A2C defaults), where the env is a larger share of a step (bench_a2c_vs_sb3.py)
- np-take: common/tetris.py gathers table rows with np.take(x, rows, axis=0); plain: x[rows] (ppo_tetris.py's default
  run and ppo_puffer_async.py's, both on our Tetris)
- channels-last: ppo_puffer_async.py's CNN reads Atari's frames in channels-last layout; plain: the frames as they
  are (Breakout at the Atari defaults; needs the atari extra)
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench_defaults import CASES as DEFAULTS  # noqa: E402
from bench_defaults import QUIET, printed_sps  # noqa: E402

import results  # noqa: E402

SB3_SETTINGS = ["--num-envs", "8", "--num-steps", "5", "--learning-rate", "7e-4", "--no-norm-obs", "--no-anneal-lr"]
# case: (script, its flags: bench_defaults.py's default run of it, or as the case's name says)
CASES = {
    "gumbel-max": DEFAULTS["cartpole-a2c"],
    "same-step-vector-env": DEFAULTS["cartpole-a2c"],
    "same-step-vector-env-sb3": ("a2c_cartpole.py", SB3_SETTINGS + ["--total-timesteps", "100000"]),
    "np-take-ppo_tetris": DEFAULTS["tetris-ppo_tetris"],
    "np-take-ppo_puffer_async": DEFAULTS["tetris-ppo_puffer_async"],
    "channels-last": ("ppo_puffer_async.py", ["--env-id", "atari-breakout", "--total-timesteps", "20480"]),
}


def plain_sampling():
    """a2c_cartpole.py's categoricals sampled by torch.distributions.Categorical (its Gaussian as it is)."""
    import torch
    from torch.distributions import Categorical

    import a2c_cartpole

    gaussian = a2c_cartpole.Agent.sample

    def sample(self, out):
        if self.log_std is not None:
            return gaussian(self, out)
        draws = [Categorical(logits=chunk).sample() for chunk in out.split(self.nvec, dim=-1)]
        return draws[0] if len(draws) == 1 else torch.stack(draws, dim=-1)

    a2c_cartpole.Agent.sample = sample


def plain_vector_env():
    """Gymnasium's own vector env and episode statistics, resetting in the same step, wherever common/gym_envs.py
    builds its SameStepVectorEnv."""
    import gymnasium as gym

    from common import gym_envs

    def sync_vector_env(env_fns):
        envs = gym.vector.SyncVectorEnv(env_fns, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
        wrapped = gym.wrappers.vector.RecordEpisodeStatistics(envs)
        wrapped.envs = envs.envs  # the evaluation reads envs.envs[0] (its frame rate), which the wrapper hides
        return wrapped

    gym_envs.SameStepVectorEnv = sync_vector_env


def plain_gathers():
    """common/tetris.py's row gathers as x[rows] (bench_tetris_env.py's --fancy-indexing)."""
    from bench_tetris_env import FancyIndexingNumpy

    from common import tetris

    tetris.np = FancyIndexingNumpy()


def plain_layout():
    """ppo_puffer_async.py's CNN given the frames as they come (contiguous, channels first)."""
    import ppo_puffer_async

    def encode(self, encoder, obs):
        if not self.frames:
            return encoder(obs)
        images = obs.reshape(-1, *obs.shape[-3:]).float() / 255.0
        return encoder(images).reshape(*obs.shape[:-3], -1)

    ppo_puffer_async.Policy.encode = encode


PLAIN = {
    "gumbel-max": plain_sampling,
    "same-step-vector-env": plain_vector_env,
    "same-step-vector-env-sb3": plain_vector_env,
    "np-take-ppo_tetris": plain_gathers,
    "np-take-ppo_puffer_async": plain_gathers,
    "channels-last": plain_layout,
}


def one_run(case: str, plain: bool) -> None:
    """Runs the case's script in this process, its trick replaced by the plain form if `plain`."""
    script, flags = CASES[case]
    if plain:
        PLAIN[case]()
    module = __import__(script.removesuffix(".py"))
    module.main([*flags, *QUIET])


def sps(case: str, plain: bool, out: Path) -> float:
    """The training SPS of one run of the case (this file with --run), with the trick or the plain form."""
    command = [sys.executable, str(Path(__file__).resolve()), "--run", case, *(["--plain"] if plain else [])]
    return printed_sps(command, out)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", default="bench_results/tricks")
    parser.add_argument("--run", choices=list(CASES), help="one run of this case (what the timed processes do)")
    parser.add_argument("--plain", action="store_true", help="with --run: the plain form instead of the trick")
    opts = parser.parse_args()
    if opts.run:
        return one_run(opts.run, opts.plain)
    start, rows, runs = time.time(), [], []
    for case in opts.cases:
        out = Path(opts.out) / case
        out.mkdir(parents=True, exist_ok=True)
        trick, plain = [], []
        for _ in range(opts.runs):
            trick.append(sps(case, False, out))
            plain.append(sps(case, True, out))
        script, flags = CASES[case]
        ratios = [fast / slow for fast, slow in zip(trick, plain)]  # paired: drift mostly cancels
        runs.append(dict(case=case, trick=trick, plain=plain))
        rows.append(
            [
                case,
                f"`{script} {' '.join(flags)}`",
                f"{statistics.median(ratios):.3f}x",
                f"{min(ratios):.3f}x to {max(ratios):.3f}x",
            ]
        )
        print(f"| {' | '.join(rows[-1])} |", flush=True)
    columns = ["trick", "run", "with it / plain form (median of pairs)", "pairs (lowest to highest)"]
    print(results.markdown(columns, rows))
    if opts.cases == list(CASES) and opts.runs == 5:
        notes = [
            f"{opts.runs} runs of each form, alternating, each in a fresh process; a pair's ratio: the training SPS "
            "the script prints with the trick over the plain run just after it. Only ratios here: a script's own "
            "speed is on its page."
        ]
        results.save(
            "tricks", (time.time() - start) / 60, table=dict(columns=columns, rows=rows, notes=notes), runs=runs
        )


if __name__ == "__main__":
    main()
