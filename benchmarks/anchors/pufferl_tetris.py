"""PufferLib 3.0.0's own trainer (pufferlib.pufferl.PuffeRL) on its Ocean Tetris, on the CPU, writing TensorBoard
events with our scripts' tag names, so that benchmarks/launch.py runs it beside ours (the suite `tetris`).

    bash benchmarks/anchors/setup_pufferlib.sh            # its own venv: PufferLib 3.0.0 from the sdist, Tetris only
    PUFFERLIB_PYTHON=bench_envs/pufferlib/bin/python python benchmarks/launch.py tetris
    bench_envs/pufferlib/bin/python benchmarks/anchors/pufferl_tetris.py --seed 1 --total-timesteps 25000000

Its settings are PufferLib's: pufferl.load_config("puffer_tetris") merges config/ocean/tetris.ini over
config/default.ini, as `puffer train puffer_tetris` does. This driver adds, as overrides for that same parser,
--train.seed and --vec.seed (= --seed), --train.device (cpu), --train.total-timesteps and --train.data-dir
(runs/<run>/checkpoints); any other argument goes to PufferLib's parser (`--vec.backend Serial`; `--help-puffer`
lists them). What differs from `puffer train puffer_tetris`: TensorBoard instead of W&B or Neptune; torch, numpy
and random are seeded here (PufferLib 3.0.0 has those lines commented out); vec.num_workers "auto" (num_envs, 8) is
lowered to the largest divisor of num_envs within the physical cores, since PufferLib refuses more workers than
cores; one line per log instead of the dashboard (--dashboard restores it); the evaluation rollouts that
pufferl.train() runs after training (no learning, steps logged past the total) are left out. Boolean options of
PufferLib 3.0.0's parser are parsed with type=bool (any value is True): leave them as its config has them.

Tags (step = agent steps = env steps: Tetris has one agent per env): charts/episodic_return, tetris/lines_deleted
and tetris/score (the means over the games finished since the last log, weighted by their count), charts/episodes,
charts/env_steps, charts/SPS, and every value PuffeRL logs under its own name (SPS, environment/*, losses/*,
performance/*).
"""

import argparse
import json
import math
import os
import random
import sys
import time

ENV_NAME = "puffer_tetris"
# Ocean Tetris's per-game stats under our scripts' tag names
OUR_TAGS = {"ep_return": "charts/episodic_return", "lines_deleted": "tetris/lines_deleted", "score": "tetris/score"}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--total-timesteps",
        type=int,
        default=None,
        help="default: tetris.ini's 2_000_000_000; must be >= the batch (8192 agents x 64 = 524288 by default)",
    )
    p.add_argument("--run-name", type=str, default=None)
    p.add_argument("--device", type=str, default="cpu")
    p.add_argument("--torch-threads", type=int, default=None, help="torch.set_num_threads (default: torch default)")
    p.add_argument(
        "--dashboard", action="store_true", help="print PufferLib's rich dashboard instead of one line per log"
    )
    p.add_argument("--help-puffer", action="store_true", help="show PufferLib's own options for puffer_tetris")
    return p.parse_known_args()


def main():
    args, passthrough = parse_args()
    run_name = args.run_name or f"pufferl_tetris__{args.seed}__{int(time.time())}"
    run_dir = os.path.join("runs", run_name)

    # PufferLib's own config loading: it parses sys.argv, so hand it our overrides first, user pass-through last.
    puffer_argv = ["--train.seed", str(args.seed), "--vec.seed", str(args.seed), "--train.device", args.device]
    if args.total_timesteps is not None:
        puffer_argv += ["--train.total-timesteps", str(args.total_timesteps)]
    if not any(a.startswith("--train.data-dir") for a in passthrough):
        puffer_argv += ["--train.data-dir", os.path.join(run_dir, "checkpoints")]
    sys.argv = [sys.argv[0]] + puffer_argv + passthrough + (["--help"] if args.help_puffer else [])

    import numpy as np
    import psutil
    import pufferlib
    import pufferlib.pufferl as pufferl
    import torch

    cfg = pufferl.load_config(ENV_NAME)

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)

    vec = cfg["vec"]
    if vec.get("backend") == "Multiprocessing" and vec.get("num_workers") == "auto":
        cores = psutil.cpu_count(logical=False) or 1
        if vec["num_envs"] > cores:
            nw = max(d for d in range(1, cores + 1) if vec["num_envs"] % d == 0)
            print(f"[anchor] vec.num_workers auto -> {nw} (num_envs={vec['num_envs']}, physical cores={cores})")
            vec["num_workers"] = nw

    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "puffer_config.json"), "w") as f:
        json.dump(cfg, f, indent=2, default=str)

    vecenv = pufferl.load_env(ENV_NAME, cfg)
    policy = pufferl.load_policy(cfg, vecenv)

    from torch.utils.tensorboard import SummaryWriter

    class TensorBoardLogger:
        def __init__(self):
            self.run_id = run_name
            self.writer = SummaryWriter(run_dir)
            self.writer.add_text("puffer_config", "```\n" + json.dumps(cfg, indent=2, default=str) + "\n```")
            self.episodes = None

        def log(self, logs, step):
            w = self.writer
            for k, v in logs.items():
                if isinstance(v, (int, float, np.floating, np.integer)) and math.isfinite(float(v)):
                    w.add_scalar(k, float(v), step)
            if self.episodes is not None:
                for tag, value in self.episodes.items():
                    w.add_scalar(tag, value, step)
                self.episodes = None
            w.add_scalar("charts/env_steps", step, step)
            w.add_scalar("charts/SPS", float(logs["SPS"]), step)
            w.flush()

        def close(self, model_path):
            self.writer.close()

    class AnchorPuffeRL(pufferl.PuffeRL):
        def mean_and_log(self):
            # Each Tetris info dict holds per-chunk means plus their episode count n: weight by n.
            ns = self.stats.get("n", [])
            if ns and sum(ns) > 0:
                episodes = {"charts/episodes": float(np.sum(ns))}
                for key, tag in OUR_TAGS.items():
                    values = self.stats.get(key, [])
                    if len(values) == len(ns):
                        episodes[tag] = float(np.dot(values, ns) / np.sum(ns))
                self.logger.episodes = episodes
            logs = super().mean_and_log()
            if not args.dashboard and logs is not None:
                ret = logs.get("environment/ep_return")
                print(
                    f"[anchor] step {logs['agent_steps']:>11d}  epoch {logs['epoch']:>5d}  SPS {logs['SPS']:>8.0f}  "
                    f"ep_return {ret if ret is None else round(float(ret), 3)}  "
                    f"uptime {logs['uptime']:.0f}s",
                    flush=True,
                )
            return logs

        def print_dashboard(self, *a, **k):
            if args.dashboard:
                return super().print_dashboard(*a, **k)

    logger = TensorBoardLogger()
    train_config = dict(**cfg["train"], env=ENV_NAME)
    print(
        f"[anchor] pufferlib {pufferlib.__version__} torch {torch.__version__} run_dir {run_dir} "
        f"vec {dict(vec)} train {{batch_size: {train_config['batch_size']}, "
        f"minibatch_size: {train_config['minibatch_size']}, total_timesteps: {train_config['total_timesteps']}}}",
        flush=True,
    )
    trainer = AnchorPuffeRL(train_config, vecenv, policy, logger)
    # Same loop as pufferlib.pufferl.train(), minus its post-training evaluation rollouts.
    while trainer.global_step < train_config["total_timesteps"]:
        trainer.evaluate()
        trainer.train()
    model_path = trainer.close()
    logger.close(model_path)
    print(f"[anchor] done: {trainer.global_step} agent steps in {trainer.uptime:.1f}s, model {model_path}", flush=True)


if __name__ == "__main__":
    main()
