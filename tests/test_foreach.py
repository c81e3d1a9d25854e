"""The scripts' optimizers and gradient clipping run with foreach=True (one multi-tensor kernel for all parameters
instead of a Python loop over them): the same bits as the plain per-tensor form, step after step."""

import copy

import gymnasium as gym
import pytest
import torch
from torch import nn

import a2c_cartpole
import ppo_puffer_async


def train_steps(model: nn.Module, make_optimizer, foreach: bool, steps: int = 50):
    """`steps` Adam/RMSprop steps on a random regression loss, clipped at 0.5; (the final parameters, the norms)."""
    torch.manual_seed(1)
    model, norms = copy.deepcopy(model), []
    optimizer = make_optimizer(model.parameters(), foreach)
    for _ in range(steps):
        obs = torch.randn(64, 8)
        out, values, _ = model.step(obs) if hasattr(model, "step") else (*model(obs)[:2], None)
        loss = out.pow(2).mean() + (values - 1).pow(2).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norms.append(nn.utils.clip_grad_norm_(model.parameters(), 0.5, foreach=foreach))
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()], torch.stack(norms)


OPTIMIZERS = {
    "adam": lambda params, foreach: torch.optim.Adam(params, lr=3e-4, eps=1e-5, foreach=foreach),
    "rmsprop": lambda params, foreach: torch.optim.RMSprop(params, lr=7e-4, alpha=0.99, eps=1e-5, foreach=foreach),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_foreach_gives_the_plain_loops_bits(name):
    box = gym.spaces.Box(-1.0, 1.0, (3,))
    model = ppo_puffer_async.Policy(8, box, ppo_puffer_async.args_for("HalfCheetah-v5", hidden_size=64))
    plain, fused = (train_steps(model, OPTIMIZERS[name], foreach) for foreach in (False, True))
    assert all(torch.equal(a, b) for a, b in zip(plain[0], fused[0]))
    assert torch.equal(plain[1], fused[1])
    assert not all(torch.equal(a, b) for a, b in zip(plain[0], model.parameters()))  # it trained


def test_a2cs_optimizers_are_the_foreach_forms():
    agent = nn.Linear(4, 2)
    for name in ("rmsprop", "adam"):
        assert a2c_cartpole.make_optimizer(agent, name, 1e-3).defaults["foreach"] is True
