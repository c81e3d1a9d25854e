"""benchmarks/bench_leanrl.py swaps LeanRL's forms into ppo_puffer_async.py: each must compute what the script's own
form computes, or its speed figure would compare different work."""

import sys

import gymnasium as gym
import numpy as np
import torch

import ppo_puffer_async
from conftest import ROOT, puffer_args

sys.path.insert(0, f"{ROOT}/benchmarks")
import bench_leanrl  # noqa: E402


def box_policy():
    torch.manual_seed(0)
    args = puffer_args("HalfCheetah-v5", hidden_size=8)
    policy = ppo_puffer_async.Policy((5,), gym.spaces.Box(-1.0, 1.0, (3,), np.float32), args)
    with torch.no_grad():
        policy.log_std.copy_(torch.tensor([-1.0, 0.0, 0.5]))
    return policy


def test_leanrl_sampling_draws_from_the_gaussian_and_scores_as_normal_does():
    policy = box_policy()
    out = torch.tensor([[0.5, -2.0, 1.0]]).expand(20000, 3)
    actions, logprobs = bench_leanrl.leanrl_sample(policy, out)
    expected, _ = policy.logprob_and_entropy(out, actions)
    torch.testing.assert_close(logprobs, expected, rtol=1e-5, atol=1e-5)
    # the draws: mean 0.5, -2, 1 and std e^-1, 1, e^0.5 (4 standard errors of 20,000 draws)
    torch.testing.assert_close(actions.mean(0), out[0], rtol=0, atol=4 * 1.7 / 20000**0.5)
    torch.testing.assert_close(actions.std(0), policy.log_std.exp().detach(), rtol=0.02, atol=0)


def test_tensor_lr_adam_takes_the_same_steps_as_adam_with_the_script_setting_floats():
    """The script sets the annealed rate as a float once per update; TensorLrAdam copies it into its tensor."""
    policies = [box_policy(), box_policy()]
    optimizers = [
        torch.optim.Adam(policies[0].parameters(), lr=3e-4, eps=1e-5, foreach=True),  # the script's
        bench_leanrl.TensorLrAdam(policies[1].parameters(), lr=3e-4, eps=1e-5, foreach=True),
    ]
    obs = torch.randn(16, 5)
    for lr in (3e-4, 2e-4, 1e-4):
        for policy, optimizer in zip(policies, optimizers):
            optimizer.param_groups[0]["lr"] = lr
            for _ in range(2):
                optimizer.zero_grad()
                out, values, _ = policy.step(obs)
                (out.square().sum() + values.sum()).backward()
                optimizer.step()
    assert (
        torch.is_tensor(optimizers[1].param_groups[0]["lr"]) and abs(optimizers[1].lr.item() - 1e-4) < 1e-10
    )  # float32, as LeanRL
    for a, b in zip(policies[0].parameters(), policies[1].parameters()):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


def test_every_per_call_case_runs_on_the_scripts_current_policy(monkeypatch):
    """Each timed call, made once: a change to the script's Policy that a case still calls the old way fails here,
    not minutes into the benchmark."""
    calls = []

    def once(fn, inputs, count):
        calls.append(fn)
        fn(*inputs)
        return 1.0

    monkeypatch.setattr(bench_leanrl, "time_calls", once)
    monkeypatch.setattr(bench_leanrl, "ROUNDS", 1)
    rows = bench_leanrl.per_call()
    assert len(rows) == 5
    assert len(calls) == 5 * 4  # each case: a warm-up and a timed call of both forms


def test_a_whole_run_trains_with_all_of_leanrls_changes_swapped_in(monkeypatch, tmp_path):
    """What each timed process of the "all" case does, for two updates."""
    monkeypatch.chdir(tmp_path)
    # recorded here, so that the test puts them back after swap_in replaces them
    monkeypatch.setattr(torch, "isfinite", torch.isfinite)
    monkeypatch.setattr(torch.optim, "Adam", torch.optim.Adam)
    monkeypatch.setattr(ppo_puffer_async.Policy, "sample", ppo_puffer_async.Policy.sample)
    bench_leanrl.swap_in(bench_leanrl.CASES["all"])
    run = [flag if flag != str(bench_leanrl.STEPS) else "4096" for flag in bench_leanrl.RUN]
    ppo_puffer_async.main([*run, *bench_leanrl.QUIET])
    assert torch.optim.Adam is bench_leanrl.TensorLrAdam
    assert list(tmp_path.glob("runs/*/events.out.tfevents.*"))
