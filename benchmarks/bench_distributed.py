"""Data-parallel scaling under torchrun: training SPS with 1 rank vs 2 ranks (1 torch thread each), the same
total envs, for ppo_tetris.py and ppo_puffer_async.py (Tetris, mpe-spread); and the gradient averaging
itself, one flat all_reduce vs DistributedDataParallel, on the Tetris network.

    python benchmarks/bench_distributed.py                     # all rows, ~5 minutes on 2 cores
    python benchmarks/bench_distributed.py --updates 10 --rows tetris-async

Each row runs the script as a user would (`python script.py` or `torchrun --nproc-per-node 2 script.py`) for a
fixed number of updates and reads the SPS the run prints at its end (training time only, start-up excluded).
Run it on a quiet machine: every process here wants a core.

The default run (no flags) also writes benchmarks/results/distributed.json (docs/distributed.md's table).
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import results as results_module  # noqa: E402

TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]

# (row, script, flags per rank, steps per update per rank); the 2-rank run has half the envs per rank.
ROWS = {
    "tetris-cleanrl": ("ppo_tetris.py", lambda envs: ["--num-envs", str(envs)], 512, 64),
    "tetris-async": ("ppo_puffer_async.py", lambda envs: ["--num-envs", str(envs)], 512, 64),
    "mpe-spread": (
        "ppo_puffer_async.py",
        lambda envs: (
            ["--env-id", "mpe-spread", "--num-envs", str(envs), "--backend", "Serial", "--num-workers", "1"]
            + ["--async-factor", "1"]
        ),
        128,
        64 * 3,
    ),
    # The default for mpe-spread: per rank, sleeping env workers step one group while the policy runs on the other.
    "mpe-spread-workers": (
        "ppo_puffer_async.py",
        lambda envs: ["--env-id", "mpe-spread", "--num-envs", str(envs), "--num-workers", "2" if envs == 128 else "1"],
        128,
        64 * 3,
    ),
}


def run(command, cwd):
    out = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    match = re.search(r"done: step [\d,]+, SPS ([\d,]+)", out.stdout)
    if not match:
        raise SystemExit(f"{' '.join(command)} failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return float(match.group(1).replace(",", ""))


def scaling(rows, updates):
    """Prints the scaling table; returns its rows as (label, 1 rank's SPS, 2 ranks' SPS)."""
    measured = []
    print("| script, env | 1 rank: SPS | 2 ranks: SPS | 2 ranks / 1 rank |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in rows:
            script, flags, envs, steps_per_env = ROWS[name]
            total = ["--total-timesteps", str(updates * envs * steps_per_env), "--checkpoint-freq", "0"]
            one = run([sys.executable, os.path.join(ROOT, script)] + flags(envs) + total, tmp)
            two = run(TORCHRUN + [os.path.join(ROOT, script)] + flags(envs // 2) + total, tmp)
            env = "mpe-spread" if name.startswith("mpe") else "tetris"
            backend = ", async workers (2 in all)" if name.endswith("workers") else ", Serial"
            label = f"{script}, {env}{backend} ({envs} envs in all)"
            print(f"| {label} | {one:,.0f} | {two:,.0f} | {two / one:.2f}x |", flush=True)
            measured.append((label, one, two))
    return measured


def allreduce_vs_ddp(iters: int = 200) -> None:
    """One rank of the gradient-averaging comparison (started by torchrun with --ddp-rank)."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    sys.path.insert(0, ROOT)
    import ppo_puffer_async
    from common.distributed import World, allreduce_mean

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    world = World(dist.get_rank(), dist.get_world_size())
    obs = torch.randn(4096, 234)  # a Tetris minibatch per rank: 512 games x 64 steps / 8

    class Forward(torch.nn.Module):  # DDP needs forward(): ours calls unroll()
        def __init__(self, policy):
            super().__init__()
            self.policy = policy

        def forward(self, x):
            logits, values = self.policy.unroll(x)
            return logits.logsumexp(-1).mean() + values.mean()

    results = {}
    for name in ("flat all_reduce", "DDP", "no averaging (1 rank's cost)"):
        torch.manual_seed(0)
        policy = ppo_puffer_async.Policy((234,), ppo_puffer_async.gym.spaces.Discrete(7), ppo_puffer_async.Args())
        model = DistributedDataParallel(Forward(policy)) if name == "DDP" else Forward(policy)
        for i in range(iters + 20):
            if i == 20:
                dist.barrier()
                start = time.perf_counter()
            policy.zero_grad(set_to_none=True)
            model(obs).backward()
            if name == "flat all_reduce":
                allreduce_mean(list(policy.parameters()), torch.zeros(2), world)
        results[name] = (time.perf_counter() - start) / iters * 1e3
        dist.barrier()
    if world.rank == 0:
        print("| gradient averaging, 2 ranks | ms per minibatch (forward + backward + averaging) |")
        print("|---|---|")
        for name, ms in results.items():
            print(f"| {name} | {ms:.2f} |")
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=20, help="updates per run (all ranks together)")
    parser.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    parser.add_argument("--ddp-rank", action="store_true", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.ddp_rank:
        return allreduce_vs_ddp()
    import torch

    start = time.time()
    cores = f"{os.cpu_count()} cores, torch {torch.__version__}"
    print(f"{time.strftime('%Y-%m-%d')}, {cores}, {opts.updates} updates per run")
    measured = scaling(opts.rows, opts.updates)
    print()
    out = subprocess.run(
        TORCHRUN + [os.path.abspath(__file__), "--ddp-rank"],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    print(out.stdout if out.returncode == 0 else out.stderr[-2000:])
    averaging = re.findall(r"^\| ([^|]+) \| ([\d.]+) \|$", out.stdout, re.M)  # the rows rank 0 printed
    if opts.updates == 20 and opts.rows == list(ROWS) and out.returncode == 0:
        part = "gradient averaging: ms per minibatch (forward + backward + averaging)"
        rows = [["training SPS, 2 ranks / 1 rank", label, f"{two / one:.2f}x"] for label, one, two in measured]
        rows += [[part, name, ms] for name, ms in averaging]
        notes = [
            f"{opts.updates} updates per run, the same total envs with 1 and 2 ranks; gradient averaging: 2 ranks "
            "under torchrun, 1 torch thread each, a minibatch of 4,096 Tetris observations through the Tetris network."
            " Only ratios for training speed: a script's own speed is on its page."
        ]
        table = dict(columns=["part", "run", "measured"], rows=rows, notes=notes)
        runs = [dict(run=label, sps_1_rank=one, sps_2_ranks=two) for label, one, two in measured]
        runs += [dict(run=f"gradient averaging: {name}", ms_per_minibatch=float(ms)) for name, ms in averaging]
        results_module.save("distributed", (time.time() - start) / 60, table=table, runs=runs)


if __name__ == "__main__":
    main()
