"""benchmarks/bench_optimizer.py swaps torch's fused Adam, or its CPU default loop, into the scripts: each must take
the steps the scripts' Adam takes, or its speed figure would compare different work. ppo_puffer_async.py's Adam is
foreach=True because it takes the loop's steps bit for bit."""

import sys

import gymnasium as gym
import numpy as np
import torch

import ppo_puffer_async
from conftest import ROOT, puffer_args

sys.path.insert(0, f"{ROOT}/benchmarks")
import bench_optimizer  # noqa: E402


def box_policy():
    torch.manual_seed(0)
    args = puffer_args("HalfCheetah-v5", hidden_size=8)
    return ppo_puffer_async.Policy((5,), gym.spaces.Box(-1.0, 1.0, (3,), np.float32), args)


def train_both(swapped):
    """Two copies of one policy, 60 Adam steps each under an annealed rate: the script's Adam (foreach=True) and
    `swapped`, each given the script's keywords. Returns (the policies, their optimizers)."""
    policies = [box_policy(), box_policy()]
    optimizers = [
        torch.optim.Adam(policies[0].parameters(), lr=3e-4, eps=1e-5, foreach=True),
        swapped(policies[1].parameters(), lr=3e-4, eps=1e-5, foreach=True),
    ]
    start = [p.detach().clone() for p in policies[0].parameters()]
    obs = torch.randn(16, 5)
    for lr in (3e-4, 2e-4, 1e-4):  # the script sets the annealed rate as a float once per update
        for policy, optimizer in zip(policies, optimizers):
            optimizer.param_groups[0]["lr"] = lr
            for _ in range(20):
                optimizer.zero_grad()
                out, values, _ = policy.step(obs)
                (out.square().sum() + values.sum() + policy.log_std.sum()).backward()
                optimizer.step()
    moved = [(a - before).abs().max().item() for a, before in zip(policies[0].parameters(), start)]
    assert min(moved) > 1e-4, moved  # 60 steps of up to 3e-4 each: every weight tensor moved
    return policies, optimizers


def test_fused_adam_takes_the_steps_of_the_scripts_adam_under_an_annealed_rate():
    policies, optimizers = train_both(bench_optimizer.FusedAdam)
    assert optimizers[1].defaults["fused"] and not optimizers[1].defaults["foreach"]
    for a, b in zip(policies[0].parameters(), policies[1].parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)  # the two Adams agree to float32 rounding


def test_the_scripts_foreach_adam_takes_the_steps_of_torchs_cpu_loop_bit_for_bit():
    policies, optimizers = train_both(bench_optimizer.LoopAdam)
    assert optimizers[0].defaults["foreach"] and optimizers[1].defaults["foreach"] is False
    for a, b in zip(policies[0].parameters(), policies[1].parameters()):
        assert torch.equal(a, b)  # not rounded differently: ppo_puffer_async.py's numbers are the loop's


def test_the_whole_runs_are_the_scripts_that_train_with_adam():
    assert bench_optimizer.CASES["cleanrl-settings"][0] == "ppo_puffer_async.py"
    assert "--num-envs" in bench_optimizer.CASES["cleanrl-settings"][1]
    # a2c_cartpole.py's default optimizer is RMSprop: the fused Adam would change nothing there
    assert "cartpole-a2c" not in bench_optimizer.CASES and len(bench_optimizer.CASES) == 5
