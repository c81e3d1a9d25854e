"""Training SPS at the scripts' defaults, against another checkout of this repository (an earlier commit): each case
runs its default flags for a short budget, the two checkouts alternating (A B A B ...), --runs times each; the ratio
is the median of the pairs' ratios (each run of this checkout over the other's run just after it): the machine's
speed drifts over a bench by more than the few percent measured, and a pair runs at one time. A change to the scripts
should leave every ratio >= 0.97.

    git worktree add /tmp/before <commit>
    python benchmarks/bench_defaults.py --baseline /tmp/before            # ~12 min on 2 cores
    python benchmarks/bench_defaults.py --baseline /tmp/before --cases cartpole-a2c

The figure is the training SPS the script itself prints at the end (evaluation excluded); evaluation is cut to one
episode and checkpoints are off, so that each run is mostly training. Every run gets the machine to itself.
"""

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import results as results_module  # noqa: E402

QUIET = ["--checkpoint-freq", "0", "--eval-episodes", "1"]
# (script, flags): each default, for about 10-20 s of training
CASES = {
    "tetris-ppo_tetris": ("ppo_tetris.py", ["--total-timesteps", "393216"]),
    "tetris-ppo_puffer_async": ("ppo_puffer_async.py", ["--total-timesteps", "983040"]),
    "mpe-spread": ("ppo_puffer_async.py", ["--env-id", "mpe-spread", "--total-timesteps", "196608"]),
    "cartpole-a2c": ("a2c_cartpole.py", ["--total-timesteps", "100000"]),
    "halfcheetah-ppo_puffer": ("ppo_puffer_async.py", ["--env-id", "HalfCheetah-v5", "--total-timesteps", "49152"]),
}


def sps(checkout: Path, script: str, flags: list, out: Path) -> float:
    """The training SPS a run of `script` in `checkout` prints, evaluation and checkpoints cut (QUIET)."""
    return printed_sps([sys.executable, str(checkout / script), *flags, *QUIET], out)


def printed_sps(command: list, out: Path) -> float:
    """The training SPS a command prints on its last line, run in `out`; a failed run stops the bench with its error."""
    done = subprocess.run(command, cwd=out, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return float(re.findall(r"SPS:?\s+([\d,]+)", done.stdout)[-1].replace(",", ""))


def paired_sps(command: list, flag: str, runs: int, out: Path) -> tuple:
    """`runs` pairs of `command` as it is and with `flag` added, alternating in fresh processes, run in `out`: (the
    SPS without it, with it, the median of the pairs' ratios: a pair runs at one time, so the drift mostly cancels)."""
    out.mkdir(parents=True, exist_ok=True)
    plain, changed = [], []
    for _ in range(runs):
        plain.append(printed_sps(command, out))
        changed.append(printed_sps([*command, flag], out))
    return plain, changed, statistics.median(fast / slow for fast, slow in zip(changed, plain))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, help="another checkout of this repository (git worktree add)")
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", default="bench_results/defaults")
    opts = parser.parse_args()
    baseline = Path(opts.baseline).resolve()
    base_commit = subprocess.run(
        ["git", "-C", str(baseline), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    start, rows, runs = time.time(), [], []
    for case in opts.cases:
        script, flags = CASES[case]
        out = Path(opts.out) / case
        out.mkdir(parents=True, exist_ok=True)
        ours, theirs = [], []
        for _ in range(opts.runs):
            ours.append(sps(ROOT, script, flags, out))
            theirs.append(sps(baseline, script, flags, out))
        ratios = [mine / base for mine, base in zip(ours, theirs)]  # paired: drift mostly cancels
        runs.append(dict(case=case, ours=ours, baseline=theirs))
        rows.append(
            [
                case,
                f"`{script} {' '.join(flags)}`",
                f"{statistics.median(ratios):.3f}x",
                f"{min(ratios):.3f}x to {max(ratios):.3f}x",
            ]
        )
        print(f"| {' | '.join(rows[-1])} |", flush=True)
    columns = ["case", "run", f"this checkout / {base_commit} (median of pairs)", "pairs (lowest to highest)"]
    print(results_module.markdown(columns, rows))
    if opts.cases == list(CASES) and opts.runs == 5:
        notes = [
            f"{opts.runs} runs of each checkout, alternating; a pair's ratio: the training SPS the script prints, "
            f"this checkout's run over the baseline's just after it; the baseline is commit {base_commit}. Only "
            "ratios here: a script's own speed is on its page."
        ]
        table = dict(columns=columns, rows=rows, notes=notes)
        results_module.save("defaults-speed", (time.time() - start) / 60, table=table, runs=runs)


if __name__ == "__main__":
    main()
