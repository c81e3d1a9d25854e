"""Where a PPO minibatch step's time goes at CleanRL's ppo_continuous_action.py settings (at commit fe8d8a03: 64 rows,
64 x 64, Adam), and what torch's fused Adam (`torch.optim.Adam(..., fused=True)`, one kernel for all of a step's
tensors) would pay. ppo_puffer_async.py's Adam is `foreach=True` (each op of the step on all the tensors at once: the
same numbers as torch's CPU default, which loops over the tensors, a few small ops each); ppo_tetris.py's is the
default.

Per call: the forward pass and loss, the backward pass, the gradient clipping two ways (torch's CPU default,
foreach=True) and Adam's step three ways (torch's CPU default, foreach=True, fused=True), the median of 5 alternating
rounds, one core, one torch thread; each turned into microseconds per agent step (an update's call: 320 per 2,048
steps). Whole runs: each case's training run with the fused Adam swapped in by this file (the scripts have no switch
for it), alternating with the script as it is, --runs pairs in fresh processes; the ratio is the median of the pairs'
ratios, as in bench_leanrl.py. At CleanRL's settings the script also runs with torch's CPU default loop swapped in:
what foreach=True pays. The CleanRL case runs on one core; the defaults as bench_defaults.py runs them (the machine
to themselves).

    python benchmarks/bench_optimizer.py                     # ~20 min on 2 cores; docs/benchmarks.md's table
    python benchmarks/bench_optimizer.py --runs 0            # the per-call figures only (~1 min)
    python benchmarks/bench_optimizer.py --run cleanrl-settings --adam fused   # one run with the fused Adam
"""

import argparse
import copy
import importlib
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench_compile import ppo_case, time_calls  # noqa: E402
from bench_defaults import CASES as DEFAULTS  # noqa: E402
from bench_defaults import QUIET, paired_sps  # noqa: E402
from bench_leanrl import RUN  # noqa: E402

import results  # noqa: E402

ROUNDS, PER_STEP = 5, 320 / 2048  # an update's calls per agent step at CleanRL's settings
# (script, flags, pinned to one core): CleanRL's settings, and the defaults that train with Adam (a2c_cartpole.py's
# is RMSprop, which has no fused form in torch)
CASES = {"cleanrl-settings": ("ppo_puffer_async.py", RUN, True)}
CASES.update({case: (*DEFAULTS[case], False) for case in DEFAULTS if case != "cartpole-a2c"})


class FusedAdam(torch.optim.Adam):
    """The scripts' Adam with torch's fused kernel: the same update rule, rounded differently (~1e-7 apart per step)."""

    def __init__(self, params, **kwargs):
        super().__init__(params, **{**kwargs, "foreach": False, "fused": True})  # torch takes one of the two


class LoopAdam(torch.optim.Adam):
    """The scripts' Adam as torch's CPU default runs it, a loop over the tensors: the same numbers as foreach=True."""

    def __init__(self, params, **kwargs):
        super().__init__(params, **{**kwargs, "foreach": False})


def one_run(case: str, adam=None) -> None:
    """One training run of `case`, with the script's Adam (None), the fused one or torch's CPU default loop."""
    script, flags, _ = CASES[case]
    torch.optim.Adam = {None: torch.optim.Adam, "fused": FusedAdam, "loop": LoopAdam}[adam]
    importlib.import_module(script.removesuffix(".py")).main([*flags, *QUIET])


def per_call() -> list:
    """Rows: (part of a minibatch step, us per call, us per agent step at CleanRL's settings)."""
    torch.manual_seed(0)
    _, policy, optimizer, loss_fn, inputs = ppo_case()
    params = list(policy.parameters())
    loss_fn(*inputs).backward()

    def backward():
        optimizer.zero_grad(set_to_none=True)
        loss_fn(*inputs).backward()

    adams = {}
    for name, kwargs in (
        ("torch's CPU default (a loop over the tensors)", {}),
        ("foreach=True (ppo_puffer_async.py's)", dict(foreach=True)),
        ("fused=True", dict(fused=True)),
    ):
        model = copy.deepcopy(policy)
        for p in model.parameters():
            p.grad = torch.randn_like(p) * 1e-3
        adams[name] = torch.optim.Adam(model.parameters(), lr=3e-4, eps=1e-5, **kwargs).step
    clip = torch.nn.utils.clip_grad_norm_
    parts = {
        "forward pass and loss": lambda: loss_fn(*inputs),
        "backward pass (with the forward pass)": backward,
        "gradient clipping, torch's CPU default": lambda: clip(params, 0.5),
        "gradient clipping, foreach=True": lambda: clip(params, 0.5, foreach=True),
    }
    parts.update({f"Adam's step, {name}": step for name, step in adams.items()})
    times = {name: [] for name in parts}
    for fn in parts.values():
        time_calls(fn, (), 500)  # warm-up
    for _ in range(ROUNDS):  # alternating, so that a noisy neighbour hits all
        for name, fn in parts.items():
            times[name].append(time_calls(fn, (), 5000))
    rows = []
    for name in parts:
        us = float(np.median(times[name]))
        rows.append([name, f"{us:.1f}", f"{us * PER_STEP:.1f}"])
        print(f"| {' | '.join(rows[-1])} |", flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="pairs of whole runs for each case (0: per call only)")
    parser.add_argument("--out", default="bench_results/optimizer")
    parser.add_argument("--core", type=int, default=0)
    parser.add_argument("--run", choices=list(CASES), help="one whole run (what the timed processes do)")
    parser.add_argument("--adam", choices=["fused", "loop"], help="with --run: the fused Adam, or torch's CPU loop")
    opts = parser.parse_args()
    if opts.run:
        return one_run(opts.run, opts.adam)
    start = time.time()
    columns = ["part of a minibatch step (64 rows, 64 x 64)", "us per call", "us per agent step"]
    everywhere = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {opts.core})
    torch.set_num_threads(1)
    rows = per_call()
    print(results.markdown(columns, rows))
    runs, whole = [], []
    # (case, the Adam swapped in): the fused Adam in every case; torch's CPU loop where foreach=True is the script's
    pairs = [(case, "fused") for case in CASES] + [("cleanrl-settings", "loop")]
    for case, adam in pairs if opts.runs else ():
        script, _, pinned = CASES[case]
        os.sched_setaffinity(0, {opts.core} if pinned else everywhere)  # the timed processes inherit it
        command = [sys.executable, str(Path(__file__).resolve()), "--run", case]
        ours, swapped, ratio = paired_sps(command, f"--adam={adam}", opts.runs, Path(opts.out) / f"{case}-{adam}")
        runs.append(dict(case=case, adam=adam, ours=ours, swapped=swapped))
        whole.append(f"{case} ({script}), {adam}: **{ratio:.3f}x**")
        print(whole[-1], flush=True)
    if opts.runs == 5:
        notes = [
            f"Per call: one core, one torch thread, the median of {ROUNDS} alternating rounds (each the median "
            "of 5 blocks of 1,000 calls); per agent step at CleanRL's settings: 320 calls per 2,048 steps.",
            f"Whole training runs with the fused Adam (fused) or torch's CPU default loop (loop) swapped in, "
            f"against the scripts as they are ({opts.runs} pairs, alternating, fresh processes; the median of "
            "the pairs' ratios: above 1, the swapped-in Adam trains faster). CleanRL's settings: "
            f"`ppo_puffer_async.py {' '.join(RUN)}` on one core; the defaults: bench_defaults.py's runs. "
            f"{'; '.join(whole)}.",
        ]
        results.save(
            "optimizer", (time.time() - start) / 60, table=dict(columns=columns, rows=rows, notes=notes), runs=runs
        )


if __name__ == "__main__":
    main()
