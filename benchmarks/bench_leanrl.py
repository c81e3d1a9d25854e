"""Which of LeanRL's speed changes pay on a CPU? LeanRL (pytorch-labs/LeanRL) rewrites CleanRL's scripts for speed and
measures them on a GPU; this times each of its per-step changes against what ppo_puffer_async.py does instead, at
CleanRL's ppo_continuous_action.py settings on HalfCheetah-v5 (1 env x 2048 steps, 32 minibatches of 64, 10 epochs,
64 x 64), where a step is per-call Python and small tensors. One core, one torch thread. LeanRL here is its
leanrl/ppo_continuous_action_torchcompile.py at commit 8dbb633; CleanRL's is cleanrl/ppo_continuous_action.py at
commit fe8d8a03.

Each change is timed per call (the median of 5 alternating rounds, on the shapes of that run) and turned into
microseconds per agent step (acting: once a step; an update's call: 320 per 2,048 steps). The sampling change, and all
the changes together, are also timed as whole training runs of the script with the change swapped in by this file
(the script has no switch for it), alternating with the script as it is, --runs pairs in fresh processes; the ratio
is the median of the pairs' ratios, as in bench_tricks.py. torch.compile, LeanRL's largest change: bench_compile.py.

    python benchmarks/bench_leanrl.py                        # ~11 min on 2 cores; docs/benchmarks.md's table
    python benchmarks/bench_leanrl.py --runs 0               # the per-call figures only (~1 min)
    python benchmarks/bench_leanrl.py --run all --leanrl     # one run with every change (used by the above)
"""

import argparse
import contextlib
import copy
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench_compile import ppo_case, time_calls  # noqa: E402
from bench_defaults import QUIET, paired_sps  # noqa: E402
from bench_mujoco import MATCHED  # noqa: E402

import ppo_puffer_async  # noqa: E402
import results  # noqa: E402

ROUNDS = 5
STEPS = 40960  # a whole run: 20 updates of 2,048 steps
RUN = ["--env-id", "HalfCheetah-v5", *MATCHED, "--total-timesteps", str(STEPS), "--seed", "1", "--eval-freq", "0"]
PER_STEP = {"acting": 1.0, "update": 320 / 2048}  # calls per agent step at CleanRL's settings


def leanrl_sample(self, out, mask=None):
    """LeanRL's draw, mean + std * randn, taken one step further: LeanRL still builds a Normal and takes its log_prob
    (and entropy); this stand-in builds no Distribution object and takes the log-probability in closed form from the
    noise (a Gaussian's, summed over the action's dimensions: what Policy.sample returns for a Box)."""
    noise = torch.randn_like(out)
    logprobs = -0.5 * noise.square() - self.log_std - 0.5 * math.log(2 * math.pi)
    return out + self.log_std.exp() * noise, logprobs.sum(-1)


class TensorLrAdam(torch.optim.Adam):
    """LeanRL's learning rate as a tensor (its schedule copies each new value in, so that a compiled or captured step
    never sees a new Python float). The script sets a float once per update; the next step copies it in. On a CPU
    torch takes a tensor rate only in its loop over the tensors, not with the script's foreach=True."""

    def __init__(self, params, lr, **kwargs):
        self.lr = torch.tensor(float(lr))
        super().__init__(params, lr=self.lr, **{**kwargs, "foreach": False})

    def step(self, closure=None):
        group = self.param_groups[0]
        if not torch.is_tensor(group["lr"]):
            self.lr.fill_(group["lr"])
            group["lr"] = self.lr
        return super().step(closure)


FINITE = torch.tensor(True)


def no_loss_check(x):
    """The update's per-minibatch check of the loss, `not torch.isfinite(loss)`, left out: LeanRL's update reads no
    tensor's value in its loop (on a GPU, each read waits for the device). The script's rollout checks its values
    with the same function (`torch.isfinite(values).all()`), so the stand-in is a tensor: the rollout's check then
    costs one small op on a constant."""
    return FINITE


def swap_in(changes: list) -> None:
    """Puts LeanRL's changes into ppo_puffer_async.py, in this process."""
    if "sampling" in changes:
        ppo_puffer_async.Policy.sample = leanrl_sample  # HalfCheetah's actions are a Box: only that branch is replaced
    if "tensor-lr" in changes:
        torch.optim.Adam = TensorLrAdam
    if "no-loss-check" in changes:
        torch.isfinite = no_loss_check


CASES = {"sampling": ["sampling"], "all": ["sampling", "tensor-lr", "no-loss-check"]}


def one_run(case: str, leanrl: bool) -> None:
    if leanrl:
        swap_in(CASES[case])
    ppo_puffer_async.main([*RUN, *QUIET])


def per_call() -> list:
    """Rows: (LeanRL's change, what the script does, us per call as the script does it, with LeanRL's, us per step)."""
    torch.manual_seed(0)
    _, policy, optimizer, loss_fn, inputs = ppo_case()
    obs = inputs[0][:1, 0]
    detached = copy.deepcopy(policy).requires_grad_(False)  # LeanRL acts through a copy that shares no autograd

    def act(model, mode, sample):
        def call():
            with mode():
                out, values, _ = model.step(obs)
                return sample(model, out)[0], values  # a Box: no action mask

        return call

    def sample_only(sample):
        out = policy.step(obs)[0].detach()
        return lambda: sample(policy, out)

    scalar = loss_fn(*inputs).detach()
    lrs = {}
    for name, lr in (("float", 3e-4), ("tensor", torch.tensor(3e-4))):  # the script's Adam, and LeanRL's on a CPU
        model = copy.deepcopy(policy)
        opt = torch.optim.Adam(model.parameters(), lr=lr, eps=1e-5, foreach=name == "float")
        for p in model.parameters():
            p.grad = torch.randn_like(p) * 1e-3
        lrs[name] = opt.step

    plain_sample = ppo_puffer_async.Policy.sample
    nothing = contextlib.nullcontext
    cases = [
        (
            "sampling: `mean + std * randn` (LeanRL's draw), no Distribution",
            "`Normal(mean, std)`: its sample and log_prob",
            "acting",
            sample_only(plain_sample),
            sample_only(leanrl_sample),
        ),
        (
            "acting on a detached copy of the policy, no grad mode",
            "the policy under `torch.inference_mode()`",
            "acting",
            act(policy, torch.inference_mode, plain_sample),
            act(detached, nothing, plain_sample),
        ),
        (
            "(for scale) acting with autograd on",
            "the policy under `torch.inference_mode()`",
            "acting",
            act(policy, torch.inference_mode, plain_sample),
            act(policy, nothing, plain_sample),
        ),
        (
            "no read of a tensor's value in the update loop",
            "`if not torch.isfinite(loss)`, once per minibatch",
            "update",
            lambda: not torch.isfinite(scalar),
            lambda: None,
        ),
        (
            "the learning rate as a tensor (torch's loop)",
            "a float (Adam's step, foreach)",
            "update",
            lrs["float"],
            lrs["tensor"],
        ),
    ]
    rows = []
    for change, ours, where, plain, leanrl in cases:
        times = {"ours": [], "leanrl": []}
        for fn in (plain, leanrl):
            time_calls(fn, (), 500)  # warm-up
        for _ in range(ROUNDS):  # alternating, so that a noisy neighbour hits both
            times["ours"].append(time_calls(plain, (), 5000))
            times["leanrl"].append(time_calls(leanrl, (), 5000))
        a = np.median(times["ours"])
        b = np.median(times["leanrl"])
        saved = (a - b) * PER_STEP[where]
        rows.append([change, ours, f"{a:.1f}", f"{b:.1f}", f"{saved:+.1f}"])
        print(f"| {' | '.join(rows[-1])} |", flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="pairs of whole runs for each case (0: per call only)")
    parser.add_argument("--out", default="bench_results/leanrl")
    parser.add_argument("--core", type=int, default=0)
    parser.add_argument("--run", choices=list(CASES), help="one whole run (what the timed processes do)")
    parser.add_argument("--leanrl", action="store_true", help="with --run: with the case's LeanRL changes")
    opts = parser.parse_args()
    if opts.run:
        return one_run(opts.run, opts.leanrl)
    os.sched_setaffinity(0, {opts.core})  # the timed processes inherit it
    torch.set_num_threads(1)
    start = time.time()
    columns = [
        "LeanRL's change",
        "what ppo_puffer_async.py does",
        "ours, us per call",
        "LeanRL's, us per call",
        "us saved per agent step",
    ]
    rows = per_call()
    print(results.markdown(columns, rows))
    runs = []
    whole = []
    for case in CASES if opts.runs else ():
        command = [sys.executable, str(Path(__file__).resolve()), "--run", case]
        ours, leanrl, ratio = paired_sps(command, "--leanrl", opts.runs, Path(opts.out) / case)
        runs.append(dict(case=case, changes=CASES[case], ours=ours, leanrl=leanrl))
        whole.append(
            f"{' + '.join(CASES[case])}: {statistics.median(leanrl):,.0f} against "
            f"{statistics.median(ours):,.0f} training SPS, **{ratio:.3f}x**"
        )
        print(whole[-1], flush=True)
    if opts.runs == 5:
        notes = [
            f"One core, one torch thread; per call: the median of {ROUNDS} alternating rounds (each the median "
            "of 5 blocks of 1,000 calls); per agent step at CleanRL's settings: acting once a step, an update's "
            "call 320 times per 2,048 steps.",
            f"Whole training runs of `ppo_puffer_async.py {' '.join(RUN)}` with LeanRL's changes swapped in, "
            f"against the script as it is ({opts.runs} pairs, alternating, fresh processes; the median of the "
            f"pairs' ratios): {'; '.join(whole)}.",
        ]
        results.save(
            "leanrl", (time.time() - start) / 60, table=dict(columns=columns, rows=rows, notes=notes), runs=runs
        )


if __name__ == "__main__":
    main()
