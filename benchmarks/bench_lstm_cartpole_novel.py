"""Recurrent PPO on CartPole with the velocities hidden (cartpole-novel): ppo_puffer_async.py --lstm vs
sb3-contrib's RecurrentPPO with RL Zoo's tuned CartPoleNoVel-v1 settings (its hyperparams/ppo_lstm.yml at commit
22e3ff2), and the memoryless MLP control.

    pip install -e ".[bench]"          # stable-baselines3, sb3-contrib
    python benchmarks/bench_lstm_cartpole_novel.py            # the docs' table: 13 seeds, ~20 min
    python benchmarks/bench_lstm_cartpole_novel.py --sps-only # only the side-by-side SPS pair, ~3 min
    python benchmarks/bench_lstm_cartpole_novel.py --learners lstm sb3-contrib mlp --seeds 1 2 3 4 5
    python benchmarks/bench_lstm_cartpole_novel.py --learners lstm --seeds 11 12 13 14 15 16 17 18 --set gamma=0.99

Every learner: 100k steps; every ~10k steps a deterministic evaluation of 10 episodes on a separate env,
the LSTM state carried through each episode (and, for sb3-contrib, VecNormalize's statistics frozen).
Reported per seed: the first step with eval >= 475, the step after which every eval stays >= 475 ("stable
solve"), the final eval, and training SPS (wall time minus evaluation). Runs one at a time, in this process.
--set NAME=VALUE changes one of our flags from its cartpole-novel default (a tuning sweep); evaluations stay
every 10k steps whatever the batch size.

sb3-contrib's runs do not depend on our code: unless --learners names sb3-contrib, the table shows
SB3_CONTRIB_RECORDED, our recorded runs of it, labelled so. The SPS ratio is always measured in the run: after the
learning runs (ours at its defaults), ours --lstm and sb3-contrib train side by side, seed 1, --sps-timesteps steps
each, one on each of --cores, one torch thread each.

The default configuration (no flag but --cores; --learners may add sb3-contrib) also writes
benchmarks/results/cartpole-novel.json, from which `python benchmarks/report.py` renders docs/ppo_puffer_async.md's
table and the README's row; any other run only prints its table.
"""

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ppo_puffer_async  # noqa: E402
import results as results_module  # noqa: E402
from common import presets  # noqa: E402
from common.puffer_envs import make_cartpole_novel  # noqa: E402

TOTAL, EVAL_EVERY, EVAL_EPISODES = 100_000, 10_000, 10
FIXED = ("env_id", "seed", "lstm", "total_timesteps", "eval_freq", "eval_episodes", "checkpoint_freq")  # not for --set
SEEDS = [1, 2, 3, 4, 5, 11, 12, 13, 14, 15, 16, 17, 18]
SPS_STEPS = 50_000  # each side of the SPS pair
# Our runs of sb3-contrib 2.9.2's RecurrentPPO (sb3_contrib below, 100k steps), recorded: they do not depend on our
# code, so the table uses them unless --learners names sb3-contrib. {seed: (first eval >= 475, stable solve, final
# eval)}. Seeds 1-5: 2026-11-23, `python benchmarks/bench_lstm_cartpole_novel.py --seeds 1 2 3 4 5` (commit 188f716,
# re-run with the same outcomes at 3801aba); seeds 11-18: 2026-11-23, commit 3801aba, `python
# benchmarks/bench_lstm_cartpole_novel.py --learners sb3-contrib --seeds 11 12 13 14 15 16 17 18` (docs/ppo_puffer_
# async.md at git HEAD 46636a5, "cartpole-novel vs sb3-contrib" and the seeds 11-18 table).
SB3_CONTRIB_RECORDED_DATE = "2026-11-23"
SB3_CONTRIB_RECORDED = {
    1: (20_000, None, 384),
    2: (20_000, 20_000, 500),
    3: (40_000, None, 192),
    4: (30_000, None, 339),
    5: (50_000, 50_000, 500),
    11: (30_000, None, 410),
    12: (10_000, None, 273),
    13: (50_000, 50_000, 500),
    14: (40_000, 40_000, 500),
    15: (20_000, None, 282),
    16: (20_000, None, 473),
    17: (20_000, 20_000, 500),
    18: (20_000, 70_000, 500),
}


def ours(seed, lstm, changes=None, total=TOTAL):
    """Our defaults for cartpole-novel (8 envs x 25 steps = 200 per update) with `changes`: an eval every
    10,000 steps."""
    args = ppo_puffer_async.Args(**{**presets.ppo_puffer_async("cartpole-novel"), **(changes or {})})
    batch = args.batch_size or args.num_envs * args.horizon
    if EVAL_EVERY % batch:
        raise SystemExit(f"--set: an update of {batch} steps does not divide the {EVAL_EVERY:,}-step eval interval")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            start = time.perf_counter()
            result = ppo_puffer_async.train(
                ppo_puffer_async.Args(
                    **{
                        **presets.ppo_puffer_async("cartpole-novel"),
                        "seed": seed,
                        "lstm": lstm,
                        "total_timesteps": total,
                        "eval_freq": EVAL_EVERY // batch,
                        "eval_episodes": EVAL_EPISODES,
                        "checkpoint_freq": 0,
                        **(changes or {}),
                    }
                )
            )
            wall = time.perf_counter() - start
            events = EventAccumulator(result["run_dir"], size_guidance={"scalars": 0})
            events.Reload()
            evals = [(e.step, e.value) for e in events.Scalars("eval/return_mean")]
        finally:
            os.chdir(cwd)
    return evals, result["sps"], wall


def sb3_contrib(seed, make_env=make_cartpole_novel, total=TOTAL, eval_every=EVAL_EVERY, eval_episodes=EVAL_EPISODES):
    """RL Zoo's CartPoleNoVel-v1 RecurrentPPO: 8 envs, n_steps 32, batch 256, 20 epochs, gamma 0.98, lambda 0.8,
    lr and clip linear to 0, VecNormalize, LSTM 64 (critic LSTM too), ReLU, no ortho init. `make_env`: any
    Gymnasium env (bench_a2c_memory.py runs POPGym's tasks with these settings)."""
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    torch.set_num_threads(1)
    train_envs, eval_envs = make_vec_env(make_env, n_envs=8, seed=seed), make_vec_env(make_env, seed=seed + 10_000)
    box = len(train_envs.observation_space.shape) == 1  # VecNormalize scales Box observations only (POPGym's: Discrete)
    env = VecNormalize(train_envs, gamma=0.98, norm_obs=box)
    eval_env = VecNormalize(eval_envs, training=False, norm_obs=box, norm_reward=False)
    linear = lambda start: lambda progress: progress * start  # noqa: E731 (progress goes 1 -> 0)
    model = RecurrentPPO(
        "MlpLstmPolicy",
        env,
        n_steps=32,
        batch_size=256,
        n_epochs=20,
        gamma=0.98,
        gae_lambda=0.8,
        ent_coef=0.0,
        learning_rate=linear(1e-3),
        clip_range=linear(0.2),
        seed=seed,
        device="cpu",
        policy_kwargs=dict(
            ortho_init=False,
            activation_fn=torch.nn.ReLU,
            lstm_hidden_size=64,
            enable_critic_lstm=True,
            net_arch=dict(pi=[64], vf=[64]),
        ),
    )
    evals, eval_time = [], [0.0]

    def evaluate():
        start = time.perf_counter()
        if box:
            eval_env.obs_rms = env.obs_rms  # the training statistics, frozen
        returns = []
        for _ in range(eval_episodes):
            obs, state, done, ret = eval_env.reset(), None, np.ones(1, dtype=bool), 0.0
            while True:
                action, state = model.predict(obs, state=state, episode_start=done, deterministic=True)
                obs, reward, done, _ = eval_env.step(action)
                ret += eval_env.get_original_reward()[0]
                if done[0]:
                    break
            returns.append(ret)
        eval_time[0] += time.perf_counter() - start
        return float(np.mean(returns))

    class Every(BaseCallback):
        def _on_step(self):
            if self.num_timesteps % eval_every < 8:  # 8 envs: the first call past each multiple
                evals.append((self.num_timesteps, evaluate()))
            return True

    start = time.perf_counter()
    model.learn(total, callback=Every())
    if not evals or evals[-1][0] < total:  # and a final evaluation after the last step
        evals.append((model.num_timesteps, evaluate()))
    wall = time.perf_counter() - start
    return evals, total / (wall - eval_time[0]), wall


def summary(evals):
    first = next((s for s, v in evals if v >= 475), None)
    stable = next((s for i, (s, v) in enumerate(evals) if all(w >= 475 for _, w in evals[i:])), None)
    return first, stable, evals[-1][1] if evals else float("nan")


def speed_worker(learner: str, steps: int, out: str) -> None:
    """One side of the SPS pair, in its own (pinned) process, seed 1: writes {"sps"} to `out`."""
    torch.set_num_threads(1)
    _, sps, _ = sb3_contrib(1, total=steps) if learner == "sb3-contrib" else ours(1, True, total=steps)
    Path(out).write_text(json.dumps({"sps": sps}))


def speed_pair(steps: int, cores) -> dict:
    """Ours --lstm and sb3-contrib at the same time, sb3-contrib on the first of `cores`, ours on the last (one core
    given: one after the other), one torch thread each: {"lstm", "sb3-contrib", "wall"} training SPS."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    def one(learner, core, folder):
        out = Path(folder) / f"{learner}.json"
        command = [
            "taskset",
            "-c",
            str(core),
            sys.executable,
            os.path.abspath(__file__),
            "--speed-worker",
            learner,
            str(steps),
            str(out),
        ]
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=folder)
        if done.returncode != 0:
            raise SystemExit(f"{learner} (SPS pair) failed:\n{done.stderr[-2000:]}")
        return json.loads(out.read_text())["sps"]

    start = time.time()
    with tempfile.TemporaryDirectory() as folder, ThreadPoolExecutor(2 if len(set(cores)) > 1 else 1) as pool:
        theirs, mine = pool.submit(one, "sb3-contrib", cores[0], folder), pool.submit(one, "lstm", cores[-1], folder)
        return {"lstm": mine.result(), "sb3-contrib": theirs.result(), "wall": time.time() - start}


def steps_text(steps) -> str:
    """30k; - for none (or an infinite median: most seeds never got there)."""
    return "-" if steps is None or not np.isfinite(steps) else f"{steps / 1000:g}k"


def seeds_text(seeds) -> str:
    """1-5, 11-18 for runs of consecutive seeds."""
    groups = []
    for seed in seeds:
        if groups and seed == groups[-1][-1] + 1:
            groups[-1].append(seed)
        else:
            groups.append([seed])
    return ", ".join(f"{g[0]}-{g[-1]}" if len(g) > 2 else ", ".join(map(str, g)) for g in groups)


def learner_row(name, outcomes, sps) -> list:
    """The docs' row of one learner from its per-seed (first, stable, final)."""
    firsts, stables, finals = zip(*outcomes)
    median = np.median([f if f is not None else np.inf for f in firsts])
    solved = sum(s is not None for s in stables)
    final = f"{finals[0]:.0f} x {len(finals)}" if len(set(finals)) == 1 else " / ".join(f"{f:.0f}" for f in finals)
    first = " / ".join(map(steps_text, firsts)) + f" (median **{steps_text(median)}**)" if any(firsts) else "-"
    stable = (" / ".join(map(steps_text, stables)) + " " if solved else "") + f"(**{solved} of {len(stables)}**)"
    return [name, first, stable, final, sps]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=SEEDS)
    parser.add_argument(
        "--learners",
        nargs="+",
        default=["lstm", "mlp"],
        choices=["lstm", "sb3-contrib", "mlp"],
        help="sb3-contrib: run its learning runs instead of showing SB3_CONTRIB_RECORDED",
    )
    parser.add_argument(
        "--set",
        nargs="+",
        default=[],
        metavar="NAME=VALUE",
        help="our flags changed from the cartpole-novel defaults, e.g. learning_rate=1e-3 gamma=0.99",
    )
    parser.add_argument("--sps-only", action="store_true", help="only the side-by-side SPS pair")
    parser.add_argument("--sps-timesteps", type=int, default=SPS_STEPS, help="steps of each side of the SPS pair")
    parser.add_argument("--cores", type=int, nargs="+", default=[0, 1], help="the SPS pair: sb3-contrib on the first")
    parser.add_argument("--speed-worker", nargs=3, help=argparse.SUPPRESS)  # internal: one side of the SPS pair
    opts = parser.parse_args()
    if opts.speed_worker:
        learner, steps, out = opts.speed_worker
        return speed_worker(learner, int(steps), out)
    if opts.sps_only:
        pair = speed_pair(opts.sps_timesteps, opts.cores)
        print(
            f"seed 1, {opts.sps_timesteps:,} steps each, side by side: ours --lstm {pair['lstm']:,.0f} SPS, "
            f"sb3-contrib {pair['sb3-contrib']:,.0f} SPS: {pair['lstm'] / pair['sb3-contrib']:.2f}x"
        )
        return
    changes = {}
    for item in opts.set:
        name, _, value = item.partition("=")
        if name not in ppo_puffer_async.Args.__dataclass_fields__ or not value:
            raise SystemExit(f"--set {item}: expected NAME=VALUE with NAME a field of ppo_puffer_async.Args")
        if name in FIXED:
            raise SystemExit(f"--set {name}: the benchmark sets it itself (the seed: --seeds; the LSTM: --learners)")
        try:
            changes[name] = ast.literal_eval(value)  # numbers, True/False, None
        except (ValueError, SyntaxError):
            changes[name] = value  # a word, e.g. advantage=lambda-return
    start = time.time()
    print(
        f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, torch {torch.__version__}, {TOTAL:,} steps per run"
        + (f"; ours with {changes}" if changes else "")
    )
    print("| learner | seed | first eval >= 475 | stable solve | final eval | train SPS |")
    print("|---|---|---|---|---|---|")
    outcomes, runs = {learner: [] for learner in opts.learners}, []
    for seed in opts.seeds:
        for learner in opts.learners:
            evals, sps, wall = sb3_contrib(seed) if learner == "sb3-contrib" else ours(seed, learner == "lstm", changes)
            first, stable, final = summary(evals)
            outcomes[learner].append((first, stable, final))
            runs.append(dict(learner=learner, seed=seed, first=first, stable=stable, final=final, sps=sps, wall=wall))
            cells = [f"{x:,}" if x is not None else "-" for x in (first, stable)]
            print(f"| {learner} | {seed} | {cells[0]} | {cells[1]} | {final:.0f} | {sps:,.0f} |", flush=True)
    pair = speed_pair(opts.sps_timesteps, opts.cores) if "lstm" in opts.learners and not changes else None
    recorded = "sb3-contrib" not in opts.learners and set(opts.seeds) <= set(SB3_CONTRIB_RECORDED)
    if recorded:
        outcomes["sb3-contrib"] = [SB3_CONTRIB_RECORDED[seed] for seed in opts.seeds]
    sps = {"lstm": "not measured", "sb3-contrib": "not measured", "mlp": "-"}
    if pair:
        sps["lstm"] = f"{pair['lstm']:,.0f} (**{pair['lstm'] / pair['sb3-contrib']:.2f}x** sb3-contrib's)"
        sps["sb3-contrib"] = f"{pair['sb3-contrib']:,.0f}"
    names = {
        "lstm": "`ppo_puffer_async.py --lstm`" + (f" with {changes}" if changes else ""),
        "sb3-contrib": f"sb3-contrib {__import__('sb3_contrib').__version__} RecurrentPPO, RL Zoo's settings",
        "mlp": "`ppo_puffer_async.py`, MLP (no memory)" + (f" with {changes}" if changes else ""),
    }
    if recorded:
        names["sb3-contrib"] = (
            f"sb3-contrib 2.9.2 RecurrentPPO, RL Zoo's settings (recorded runs, {SB3_CONTRIB_RECORDED_DATE})"
        )
    columns = [
        "learner",
        f"first eval >= 475, seeds {seeds_text(opts.seeds)}",
        "stable solve (every later eval >= 475)",
        "final eval",
        f"training SPS, side by side (seed 1, {opts.sps_timesteps // 1000}k steps, one core each)",
    ]
    rows = [
        learner_row(names[learner], outcomes[learner], sps[learner])
        for learner in ("lstm", "sb3-contrib", "mlp")
        if outcomes.get(learner)
    ]
    print(results_module.markdown(columns, rows))
    default = opts.seeds == SEEDS and not changes and opts.sps_timesteps == SPS_STEPS
    if default and set(opts.learners) in ({"lstm", "mlp"}, {"lstm", "mlp", "sb3-contrib"}):
        notes = [
            "100k steps per run at the cartpole-novel defaults; a deterministic evaluation of 10 episodes every 10k "
            "steps on a separate env, the LSTM state carried through each episode; runs one at a time. sb3-contrib's "
            "RecurrentPPO runs RL Zoo's CartPoleNoVel-v1 settings (8 envs x 32 steps, 20 epochs, 64-wide LSTMs, "
            "gamma 0.98, lambda 0.8, `VecNormalize`)"
            + (
                f"; its row: our recorded runs of it (sb3-contrib 2.9.2, {SB3_CONTRIB_RECORDED_DATE}), which do not "
                "depend on our code (`python benchmarks/bench_lstm_cartpole_novel.py --learners sb3-contrib` re-runs "
                "them)."
                if recorded
                else "; its runs here, the same seeds."
            ),
            f"Training SPS: ours `--lstm` and sb3-contrib's RecurrentPPO trained side by side in this run, seed 1, "
            f"{opts.sps_timesteps:,} steps each, one core and one torch thread each, evaluation excluded; the ratio "
            "is ours over sb3-contrib's.",
        ]
        if recorded:
            runs += [
                dict(
                    learner=f"sb3-contrib (recorded, {SB3_CONTRIB_RECORDED_DATE})",
                    seed=seed,
                    first=first,
                    stable=stable,
                    final=final,
                )
                for seed, (first, stable, final) in zip(opts.seeds, outcomes["sb3-contrib"])
            ]
        runs.append(
            dict(
                learner="lstm beside sb3-contrib",
                seed=1,
                steps=opts.sps_timesteps,
                sps=pair["lstm"],
                sb3_contrib_sps=pair["sb3-contrib"],
            )
        )
        ours_solved = sum(stable is not None for _, stable, _ in outcomes["lstm"])
        theirs_solved = sum(stable is not None for _, stable, _ in outcomes["sb3-contrib"])
        readme = dict(
            task="CartPole without velocities (cartpole-novel), `ppo_puffer_async.py --lstm` against "
            "sb3-contrib's RecurrentPPO",
            result=f"stably solved on {ours_solved} of {len(opts.seeds)} "
            f"seeds in 100k steps (sb3-contrib: {theirs_solved} of {len(opts.seeds)})",
            page="docs/ppo_puffer_async.md#recurrent-policies---lstm",
            order=10,
        )
        results_module.save(
            "cartpole-novel",
            (time.time() - start) / 60,
            table=dict(columns=columns, rows=rows, notes=notes),
            runs=runs,
            readme=readme,
        )


if __name__ == "__main__":
    main()
