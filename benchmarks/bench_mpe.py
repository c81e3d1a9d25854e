"""ppo_puffer_async.py on PettingZoo's MPE tasks (mpe2), against uniform-random play: per-agent episode returns, per
kind of agent where a task has several (a kind: the agents' name without its trailing _N).

    python benchmarks/bench_mpe.py --random-play               # every mpe2 task, 10,000 episodes of random play
    python benchmarks/bench_mpe.py --envs mpe2.simple_tag_v3 --seeds 1 2 3
    python benchmarks/bench_mpe.py --envs mpe2.simple_v3 --seeds 1 --total-timesteps 500000

Random play: every agent acts uniformly at random in its own action space, on the raw parallel env, episodes seeded
10,000 + i; mean and standard error of the per-agent returns of each kind. A standard error counts episodes, not
agents: the agents of a kind share their episode, and in most of these tasks their reward (tag's three adversaries
score the same), so they are not independent samples. Training: the script at its defaults (those
of every PettingZoo env: 2 env worker processes), with --total-timesteps where TOTALS sets one (a task whose default
run would pass 10 minutes on 2 cores), one run at a time; then --eval-checkpoint with 4,000 episodes (sampled actions,
as in training) and, for tasks of two or more teams, --eval-opponents random (each team against random teams). A
finished run's result is kept under --out, so rerunning only runs what is missing.
"""

import argparse
import glob
import importlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import results as results_module  # noqa: E402
from common.presets import PPO_PUFFER_ASYNC  # noqa: E402
from common.puffer_envs import TEAMS  # noqa: E402

# Agent steps for the tasks whose default 7.5M would not finish within 10 minutes on 2 cores: their many agents and
# landmarks make a step slow (~5k agent steps a second at the defaults, so 3M took 9.6-10.4 minutes), or slow runs
# passed 10 minutes at 7.5M: push 11.7 (8.5-8.8 in the others), tag 10.9 and 11.6 (9.8 in the third)
DEFAULT_TOTAL = PPO_PUFFER_ASYNC["pettingzoo"]["total_timesteps"]  # the preset's, for every PettingZoo env
TOTALS = {
    "mpe2.simple_world_comm_v3": 2_500_000,
    "mpe2.collect_treasure_v1": 2_000_000,
    "mpe2.simple_push_v3": 6_000_000,
    "mpe2.simple_tag_v3": 6_000_000,
}


# Random play's episodes, and a trained run's evaluation episodes (in a game of two teams, each team plays its policy in
# half of them). A per-agent return's spread is ~10 in world_comm and tag, so 1,000 episodes of each left a standard
# error of ~0.5 on a lead of ~1 (world_comm's lead adversary scored 3.68 and 2.95 in random play on two seed bases)
RANDOM_EPISODES, EVAL_EPISODES = 10_000, 4_000


def random_play(env_id: str, episodes: int, seed: int = 10_000, keep=None) -> dict:
    """{kind: (episodes, the kind's agents) episode returns} of uniform-random play on the raw parallel env; kept in
    the folder `keep` if given (they depend on mpe2 alone)."""
    kept = keep / f"random-play-{episodes}-{seed}.json" if keep else None
    if kept and kept.exists():
        return {kind: np.array(values) for kind, values in json.loads(kept.read_text()).items()}
    env = importlib.import_module(env_id).parallel_env()
    rng, returns = np.random.default_rng(seed), {}
    for episode in range(episodes):
        env.reset(seed=seed + episode)
        totals = dict.fromkeys(env.agents, 0.0)
        while env.agents:
            actions = {agent: env.action_space(agent).sample() for agent in env.agents}
            if hasattr(env.action_space(env.agents[0]), "n"):  # the env's own sampler is unseeded: draw from ours
                actions = {agent: int(rng.integers(env.action_space(agent).n)) for agent in env.agents}
            _, rewards, *_ = env.step(actions)
            for agent, reward in rewards.items():
                totals[agent] += reward
        for agent, total in totals.items():
            returns.setdefault(re.sub(r"_\d+$", "", agent), []).append(total)
    env.close()
    returns = {kind: np.reshape(values, (episodes, -1)) for kind, values in returns.items()}  # agents in their order
    if kept:
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps({kind: values.tolist() for kind, values in returns.items()}))
    return returns


def mean_se(returns: np.ndarray) -> str:
    """Mean and standard error of (episodes, agents) returns, over the episodes' means (an episode is one sample)."""
    means = returns.mean(1)
    return f"{means.mean():.2f} +/- {means.std(ddof=1) / np.sqrt(len(means)):.2f}"


def train(env_id, seed, total, folder):
    """A run's result: trained and evaluated, or kept from an earlier run (`commit`: the one that trained it). A kept
    run evaluated on fewer than EVAL_EPISODES episodes whose checkpoint is still there is evaluated again
    (`evaluated_on`: that commit)."""
    result_file, env = folder / "result.json", {**os.environ, "OMP_NUM_THREADS": "1"}
    result = json.loads(result_file.read_text()) if result_file.exists() else None
    if result is None:
        folder.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable,
            str(ROOT / "ppo_puffer_async.py"),
            "--env-id",
            env_id,
            "--seed",
            str(seed),
            "--checkpoint-freq",
            "0",
        ] + (["--total-timesteps", str(total)] if total else [])
        start = time.time()
        out = subprocess.run(command, cwd=folder, capture_output=True, text=True, env=env)
        if out.returncode != 0:
            raise SystemExit(f"{env_id} seed {seed} failed:\n{out.stderr[-2000:]}")
        sps = float(re.search(r"SPS ([\d,]+)", out.stdout.splitlines()[-1]).group(1).replace(",", ""))
        # A table may keep older runs of code that has not changed since: each run says which commit it measured
        result = {"wall": time.time() - start, "sps": sps, "commit": results_module.stamp(0)["commit"]}
    checkpoints = glob.glob(str(folder / "runs" / "*" / "ppo_puffer_async.pt"))
    if result.get("eval_episodes", 100) == EVAL_EPISODES and "eval" in result or not checkpoints:
        return result
    command = [
        sys.executable,
        str(ROOT / "ppo_puffer_async.py"),
        "--eval-checkpoint",
        checkpoints[0],
        "--eval-episodes",
        str(EVAL_EPISODES),
        "--seed",
        str(seed),
    ]
    if env_id in TEAMS_OF_TWO_OR_MORE:
        command += ["--eval-opponents", "random"]
    evaluation = subprocess.run(command, capture_output=True, text=True, env=env)
    if evaluation.returncode != 0:
        raise SystemExit(f"{env_id} seed {seed} evaluation failed:\n{evaluation.stderr[-2000:]}")
    means = dict(re.findall(r"^\s+(return\S*)\s+(-?[\d.]+)", evaluation.stdout, re.M))
    spreads = dict(re.findall(r"^\s+(return\S*)\s+-?[\d.]+ \+/- ([\d.]+)", evaluation.stdout, re.M))
    if "eval" in result:  # a kept run, evaluated again on this commit
        result["evaluated_on"] = results_module.stamp(0)["commit"]
    result.update(eval={key: float(value) for key, value in means.items()}, std=spreads, eval_episodes=EVAL_EPISODES)
    result["episodes"] = int(re.search(r"(\d+) episodes", evaluation.stdout).group(1))  # agent-episodes
    result_file.write_text(json.dumps(result))
    return result


TEAMS_OF_TWO_OR_MORE = [
    "mpe2.simple_crypto_v3",
    "mpe2.simple_adversary_v3",
    "mpe2.simple_push_v3",
    "mpe2.simple_tag_v3",
    "mpe2.simple_world_comm_v3",
]
ALL = [f"mpe2.{name.split('/')[1]}" for name in sorted(importlib.import_module("mpe2.all_modules").mpe_environments)]
# The tasks judged on three seeds (every team against random play, and speaker_listener); the others on one
THREE_SEEDS = [*TEAMS_OF_TWO_OR_MORE, "mpe2.simple_speaker_listener_v4"]
NOTES = [
    "Per-agent return: each agent's own episode return (25 steps), mean over the agents of a kind and over the "
    "evaluation episodes (actions sampled, as in training), then over seeds. A team's result against random play is "
    "from `--eval-opponents random`: the team plays its policy, every other team acts uniformly at random. "
    "*Above random by*: (trained - random) over the standard error of the difference, the smallest over the seeds; "
    "standard errors count episodes, not agents (a kind's agents share an episode, and often its reward).",
]


def se_of_difference(trained: float, spread: float, n: int, random: np.ndarray) -> float:
    """(trained - random play) in standard errors. Trained's: its spread over agent-episodes divided by the root of
    the n episodes, not of the agent-episodes (the mean of correlated agents varies at most as much as one agent);
    random play's (episodes, agents) returns: over the episodes' means."""
    means = random.mean(1)
    se = np.hypot(spread / np.sqrt(n), means.std(ddof=1) / np.sqrt(len(means)))
    return (trained - means.mean()) / se


def evaluation_episodes(env_id: str, seeds: list, results: dict, random: dict) -> int:
    """A task's evaluation episodes per run (a run's result counts agent-episodes), the same for each of its seeds."""
    agents = sum(returns.shape[1] for returns in random.values())
    (episodes,) = {results[(env_id, seed)]["episodes"] // agents for seed in seeds}
    return episodes


def task_row(env_id: str, seeds: list, results: dict, random: dict) -> list:
    """The docs' row of one task: per kind, the trained return (against random teams where there are several teams),
    random play, and how far above it, in standard errors."""
    teams = len(TEAMS[env_id].split(",")) if env_id in TEAMS_OF_TWO_OR_MORE else 1
    trained, above = [], []
    n = evaluation_episodes(env_id, seeds, results, random) // teams  # those in which a team played its policy
    for kind, returns in random.items():
        key = f"return_vs_random/{kind}" if teams > 1 else f"return/{kind}" if len(random) > 1 else "return"
        values = [results[(env_id, seed)]["eval"][key] for seed in seeds]
        spreads = [float(results[(env_id, seed)]["std"][key]) for seed in seeds]
        trained.append(
            f"{kind} {np.mean(values):.2f}"
            + (f" ({' / '.join(f'{v:.2f}' for v in values)})" if len(values) > 1 else "")
        )
        above.append(f"{kind} {min(se_of_difference(v, s, n, returns) for v, s in zip(values, spreads)):+.1f}")
    minutes = [results[(env_id, seed)]["wall"] / 60 for seed in seeds]
    minutes = f"{np.mean(minutes):.1f}" + (f" ({max(minutes):.1f})" if len(minutes) > 1 else "")
    agents = ", ".join(f"{kind} x{r.shape[1]}" for kind, r in random.items())
    steps = f"{TOTALS.get(env_id, DEFAULT_TOTAL) / 1e6:g}M"
    return [
        env_id.split(".")[1],
        agents,
        TEAMS.get(env_id, "one team").replace(",", " vs ").replace("+", " + "),
        "; ".join(trained),
        "; ".join(f"{k} {mean_se(v)}" for k, v in random.items()),
        "; ".join(above),
        " ".join(map(str, seeds)),
        f"{n * teams:,}",
        steps,
        minutes,
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=ALL, help="default: every mpe2 task (then the docs' table)")
    parser.add_argument("--seeds", nargs="+", type=int, default=None, help="default: 1 2 3 for THREE_SEEDS, else 1")
    parser.add_argument("--total-timesteps", type=int, default=None, help="default: the script's (TOTALS's)")
    parser.add_argument("--random-play", action="store_true", help="only random play, every mpe2 task")
    parser.add_argument("--episodes", type=int, default=RANDOM_EPISODES, help="episodes of random play")
    parser.add_argument("--out", default="bench_results/mpe")
    opts = parser.parse_args()
    if opts.random_play:
        print(f"uniform-random play, {opts.episodes} episodes (seeded 10,000 + i); mean +/- standard error")
        print("| task | per-agent return by kind |\n|---|---|")
        for env_id in ALL:
            returns = random_play(env_id, opts.episodes)
            print(f"| {env_id} | " + "; ".join(f"{k} {mean_se(v)}" for k, v in returns.items()) + " |")
        return
    seeds = {env_id: opts.seeds or ([1, 2, 3] if env_id in THREE_SEEDS else [1]) for env_id in opts.envs}
    results = {}
    for env_id in opts.envs:
        for seed in seeds[env_id]:
            total = opts.total_timesteps or TOTALS.get(env_id)
            results[(env_id, seed)] = train(env_id, seed, total, Path(opts.out) / env_id / str(seed))
            print(f"  {env_id} seed {seed}: {results[(env_id, seed)]}", flush=True)
    columns = [
        "task",
        "agents",
        "teams",
        "trained: per-agent return (per seed)",
        f"uniform-random play ({RANDOM_EPISODES:,} episodes)",
        "above random by (s.e.)",
        "seeds",
        "evaluation episodes",
        "agent steps",
        "minutes a run (longest)",
    ]
    random = {env_id: random_play(env_id, RANDOM_EPISODES, keep=Path(opts.out) / env_id) for env_id in opts.envs}
    rows = [task_row(env_id, seeds[env_id], results, random[env_id]) for env_id in opts.envs]
    print(results_module.markdown(columns, rows))
    if opts.envs == ALL and opts.total_timesteps is None and opts.seeds is None:
        task = "mpe2.simple_speaker_listener_v4"
        listener = [results[(task, seed)]["eval"]["return"] for seed in (1, 2, 3)]
        random_listener = np.mean(random[task]["listener"])
        minutes = sum(result["wall"] for result in results.values()) / 60
        runs = [dict(env_id=env_id, seed=seed, **result) for (env_id, seed), result in results.items()]
        readme = dict(
            task="MPE, all 12 `mpe2` tasks (`ppo_puffer_async.py`)",
            order=4,
            result=f"speaker_listener per-agent return {np.mean(listener):.1f} (random play "
            f"{random_listener:.1f}); each team against random teams: the page",
            page="docs/ppo_puffer_async.md#agents-that-differ-pettingzoo",
        )
        results_module.save(
            "mpe", minutes, table=dict(columns=columns, rows=rows, notes=NOTES), runs=runs, readme=readme
        )


if __name__ == "__main__":
    main()
