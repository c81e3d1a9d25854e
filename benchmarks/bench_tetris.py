"""A Tetris script's default run, then its final checkpoint over 100 games, beside uniform-random play: return and
lines cleared per game, training SPS, minutes.

    python benchmarks/bench_tetris.py --script ppo_tetris          # seed 1: ~13 min on 2 cores
    python benchmarks/bench_tetris.py --script ppo_puffer_async    # seed 1: ~10 min on 2 cores
    python benchmarks/bench_tetris.py --script ppo_puffer_async --seeds 2 3

Each run is `python <script>.py --seed S` at the script's defaults (both cores: one run at a time), then
`--eval-checkpoint <its checkpoint> --eval-episodes 100` (games seeded 10,001 + i at --seed 1). A finished
run is kept under --out (its training and its result), so rerunning only runs what is missing.
"""

import argparse
import glob
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import results as results_module  # noqa: E402
from common.tetris import Tetris  # noqa: E402

PAGES = {"ppo_tetris": "docs/ppo_tetris.md#results", "ppo_puffer_async": "docs/ppo_puffer_async.md#tetris"}


def random_play(games: int, seed: int = 10_001) -> dict:
    """Return and lines of `games` games of uniformly random moves (seeded as the scripts' evaluation games)."""
    returns, lines = [], []
    for game in range(games):
        env = Tetris(num_envs=1, seed=seed + game, log_interval=1)  # as the scripts' evaluation games
        rng = np.random.default_rng(seed + game)
        while True:
            _, _, terminals, truncations, infos = env.step(rng.integers(0, 7, 1, dtype=np.int32))
            if terminals[0] or truncations[0]:
                returns.append(infos[0]["ep_return"])
                lines.append(infos[0]["lines_deleted"])
                break
    return {"return": np.array(returns), "lines": np.array(lines)}


def train(script: str, seed: int, folder: Path) -> dict:
    """One default run, then its final checkpoint over 100 games. The training's wall time and SPS are kept in
    training.json and the whole result in result.json, so a rerun trains again only what never finished."""
    result_file = folder / "result.json"
    if result_file.exists():
        return json.loads(result_file.read_text())
    training_file = folder / "training.json"
    if not training_file.exists():
        folder.mkdir(parents=True, exist_ok=True)
        start = time.time()
        command = [sys.executable, str(ROOT / f"{script}.py"), "--seed", str(seed), "--checkpoint-freq", "0"]
        out = subprocess.run(command, cwd=folder, capture_output=True, text=True)
        (folder / "log.txt").write_text(out.stdout + out.stderr)
        if out.returncode != 0:
            raise SystemExit(f"{script} seed {seed} failed:\n{out.stderr[-2000:]}")
        wall = time.time() - start
        sps = float(re.search(r"SPS ([\d,]+)", out.stdout.splitlines()[-1]).group(1).replace(",", ""))
        training_file.write_text(json.dumps(dict(wall=wall, sps=sps)))
    training = json.loads(training_file.read_text())
    (checkpoint,) = glob.glob(str(folder / "runs" / "*" / f"{script}.pt"))
    command = [sys.executable, str(ROOT / f"{script}.py"), "--eval-checkpoint", checkpoint, "--eval-episodes", "100"]
    evaluation = subprocess.run(command, capture_output=True, text=True)
    if evaluation.returncode != 0:
        raise SystemExit(f"{script} seed {seed} evaluation failed:\n{evaluation.stderr[-2000:]}")
    stats = {}
    # "  name  mean +/- std (s.e. se, n games)", or "  name  mean" where the script reports no spread
    pattern = r"^\s+(\w+)\s+(-?[\d.]+)(?: \+/- ([\d.]+))?(?: \(s\.e\. [\d.]+, n \d+\))?$"
    for key, mean, std in re.findall(pattern, evaluation.stdout, re.M):
        stats[key] = (float(mean), float(std) if std else None)
    if "return" not in stats:
        raise SystemExit(f"{script} seed {seed}: no return in the evaluation's output:\n{evaluation.stdout[-2000:]}")
    result = dict(seed=seed, wall=training["wall"], sps=training["sps"])
    for key, value in stats.items():
        result[key] = list(value)
    result_file.write_text(json.dumps(result))
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--script", required=True, choices=list(PAGES))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1])
    parser.add_argument("--out", default="bench_results/tetris")
    opts = parser.parse_args()
    runs = [train(opts.script, seed, Path(opts.out) / opts.script / str(seed)) for seed in opts.seeds]
    random = random_play(100)
    columns = ["", "seed", "return per game (100 games)", "lines per game", "training SPS", "minutes"]
    rows = [
        [
            f"`{opts.script}.py` defaults",
            run["seed"],
            f"{run['return'][0]:.2f} +/- {run['return'][1]:.2f}",
            f"{run['lines_deleted'][0]:.2f}",
            f"{run['sps']:,.0f}",
            f"{run['wall'] / 60:.1f}",
        ]
        for run in runs
    ]
    rows.append(
        [
            "uniformly random moves",
            "",
            f"{random['return'].mean():.2f} +/- {random['return'].std():.2f}",
            f"{random['lines'].mean():.2f}",
            "",
            "",
        ]
    )
    print(results_module.markdown(columns, rows))
    if opts.seeds == [1]:
        name = "tetris-ppo_tetris" if opts.script == "ppo_tetris" else "tetris-puffer"
        run = runs[0]
        readme = dict(
            task=f"Tetris, `{opts.script}.py` defaults",
            order=1 if opts.script == "ppo_tetris" else 2,
            result=f"{run['lines_deleted'][0]:.2f} lines per game, return {run['return'][0]:.2f} (random "
            f"moves: {random['lines'].mean():.2f} lines, return {random['return'].mean():.2f})",
            page=PAGES[opts.script],
        )
        notes = [
            "The final checkpoint over 100 games (actions sampled, as in training; games seeded 10,001 + i); "
            "+/- is the standard deviation over games."
        ]
        table = dict(columns=columns, rows=rows, notes=notes)
        results_module.save(name, sum(run["wall"] for run in runs) / 60, table=table, runs=runs, readme=readme)


if __name__ == "__main__":
    main()
