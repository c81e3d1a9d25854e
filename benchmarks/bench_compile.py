"""Does torch.compile pay on a CPU at the sizes users compare at? The scripts' own networks and losses, one torch
thread, one core: `ppo_puffer_async.py`'s minibatch step at CleanRL's ppo_continuous_action.py settings (at commit
fe8d8a03; HalfCheetah-v5 sizes: 17 observations, 6 actions, 64 x 64, minibatches of 64 rows) and its acting step (one
observation: forward and sample), and `a2c_cartpole.py`'s update at the settings SB3's A2C is compared at (CartPole-v1,
8 envs x 5 steps, RMSprop: RL Zoo v2.8.0's hyperparams/a2c.yml and SB3 2.9.2's A2C defaults). Each is
timed eager and under torch.compile (its default inductor backend), alternating; the compile's warm-up (the first
calls, which trace and build the C++ kernels) is timed on its own.

    python benchmarks/bench_compile.py              # ~1-2 min, a third of it compiling; docs/benchmarks.md's table
    python benchmarks/bench_compile.py --calls 500 --compile-optimizer

A training step is a minibatch's forward pass and loss (compiled: one graph, with its backward), then backward,
gradient clipping and the optimizer's step (compiled too with --compile-optimizer). Needs a C++ compiler (gcc or
clang); without one, torch.compile fails at its first call and this says so.
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

# A fresh compile cache: the warm-up timed is a first run's, not one that reuses kernels an earlier run built
os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench_compile_")

import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import a2c_cartpole  # noqa: E402
import ppo_puffer_async  # noqa: E402
import results  # noqa: E402
from common import presets  # noqa: E402

ROUNDS = 5


def ppo_case(rows: int = 64):
    """(what one call does, the model, the optimizer, the loss function, its inputs): a PPO minibatch."""
    import gymnasium as gym

    action_space = gym.spaces.Box(-1.0, 1.0, (6,), np.float32)
    args = ppo_puffer_async.Args(**{**presets.ppo_puffer_async("HalfCheetah-v5"), "hidden_size": 64})
    policy = ppo_puffer_async.Policy((17,), action_space, args)
    optimizer = torch.optim.Adam(policy.parameters(), lr=3e-4, eps=1e-5, foreach=True)  # ppo_puffer_async.py's
    g = torch.Generator().manual_seed(0)
    mb = dict(
        logprobs=torch.randn(rows, 1, generator=g) - 6,
        values=torch.randn(rows, 1, generator=g),
        returns=torch.randn(rows, 1, generator=g),
        advantages=torch.randn(rows, 1, generator=g),
        masks=torch.ones(rows, 1),
    )
    obs, actions = torch.randn(rows, 1, 17, generator=g), torch.randn(rows, 1, 6, generator=g)

    def loss_fn(obs, actions, mb):
        out, new_values = policy.unroll(obs)
        new_logprobs, entropy = policy.logprob_and_entropy(out, actions)  # a Box: no action mask
        ratio = (new_logprobs - mb["logprobs"]).exp()
        pg_loss, v_loss = ppo_puffer_async.ppo_loss(
            ratio,
            mb["advantages"],
            new_values,
            mb["values"],
            mb["returns"],
            mb["masks"],
            weights=None,
            clip_coef=0.2,
            vf_clip_coef=0.2,
        )
        return pg_loss + 0.5 * v_loss - 0.0 * ppo_puffer_async.masked_mean(entropy, mb["masks"])

    return "PPO minibatch step (64 rows, Adam)", policy, optimizer, loss_fn, (obs, actions, mb)


def a2c_case(rows: int = 40):
    """An A2C update at RL Zoo's CartPole-v1 settings for SB3's A2C: the whole 8 x 5 rollout, RMSprop."""
    import gymnasium as gym

    args = a2c_cartpole.Args(hidden_size=64)
    agent = a2c_cartpole.Agent(4, gym.spaces.Discrete(2), args)
    optimizer = a2c_cartpole.make_optimizer(agent, "rmsprop", 7e-4)
    g = torch.Generator().manual_seed(0)
    obs, actions = torch.randn(rows, 4, generator=g), torch.randint(0, 2, (rows,), generator=g)
    advantages, returns = torch.randn(rows, generator=g), torch.randn(rows, generator=g)

    def loss_fn(obs, actions, advantages, returns):
        logprobs, entropy, values = agent.get_logprob_entropy_value(obs, actions)
        policy_loss, value_loss = a2c_cartpole.a2c_loss(logprobs, advantages, values, returns)
        return policy_loss + 1.0 * value_loss - 0.0 * entropy.mean()  # a2c_cartpole.py's, at --ent-coef 0

    return "A2C update (40 rows, RMSprop)", agent, optimizer, loss_fn, (obs, actions, advantages, returns)


def training_step(model, optimizer, loss_fn, step_fn):
    def step(*inputs):
        optimizer.zero_grad(set_to_none=True)
        loss_fn(*inputs).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        step_fn()

    return step


def acting_step(policy):
    def act(obs):
        with torch.inference_mode():
            out, values, _ = policy.step(obs)
            return policy.sample(out)[0], values  # a Box: no action mask

    return act


def time_calls(fn, inputs, calls: int) -> float:
    """Microseconds per call, the median of 5 blocks of `calls` // 5 calls."""
    blocks = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls // 5):
            fn(*inputs)
        blocks.append((time.perf_counter() - start) / (calls // 5) * 1e6)
    return float(np.median(blocks))


def compare(name, eager, compiled, inputs, calls: int) -> list:
    eager(*inputs)  # eager's own warm-up (allocator, first kernels)
    start = time.perf_counter()
    try:
        for _ in range(3):  # tracing, then recompiles for what changed (e.g. the optimizer's step count)
            compiled(*inputs)
    except Exception as e:  # no C++ compiler, or a torch without inductor: say so, time eager alone
        print(f"{name}: torch.compile failed ({type(e).__name__}: {str(e).splitlines()[0][:120]})")
        return [name, f"{time_calls(eager, inputs, calls):.0f}", "failed", "-", "-"]
    warm_up = time.perf_counter() - start
    times = {"eager": [], "compiled": []}
    for _ in range(ROUNDS):  # alternating, so that a noisy neighbour hits both
        times["eager"].append(time_calls(eager, inputs, calls))
        times["compiled"].append(time_calls(compiled, inputs, calls))
    e, c = np.median(times["eager"]), np.median(times["compiled"])
    print(f"{name}: eager {e:.0f} us, compiled {c:.0f} us ({e / c:.2f}x), warm-up {warm_up:.1f} s", flush=True)
    return [name, f"{e:.0f}", f"{c:.0f}", f"{e / c:.2f}x", f"{warm_up:.1f}"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1000, help=f"timed calls of each, per round ({ROUNDS} rounds)")
    parser.add_argument("--compile-optimizer", action="store_true", help="compile the optimizer's step too")
    parser.add_argument("--core", type=int, default=0)
    opts = parser.parse_args()
    os.sched_setaffinity(0, {opts.core})
    start = time.time()
    torch.set_num_threads(1)
    rows = []
    for case in (ppo_case, a2c_case):
        torch.manual_seed(0)
        name, model, optimizer, loss_fn, inputs = case()
        compiled_step = torch.compile(optimizer.step) if opts.compile_optimizer else optimizer.step
        eager = training_step(model, optimizer, loss_fn, optimizer.step)
        compiled = training_step(model, optimizer, torch.compile(loss_fn), compiled_step)
        rows.append(compare(name, eager, compiled, inputs, opts.calls))
        if case is ppo_case:
            obs = inputs[0][:1, 0]
            rows.append(
                compare(
                    "PPO acting step (1 observation)",
                    acting_step(model),
                    torch.compile(acting_step(model)),
                    (obs,),
                    opts.calls,
                )
            )
    columns = ["step", "eager, us", "torch.compile, us", "eager / compiled", "compile warm-up, s"]
    print(f"\n{results.markdown(columns, rows)}")
    if not opts.compile_optimizer and opts.calls == 1000:  # the docs' configuration
        note = f"One core, one torch thread; the median of {ROUNDS} alternating rounds of 1,000 calls each."
        table = dict(columns=columns, rows=rows, notes=[note])
        results.save("compile", (time.time() - start) / 60, table=table, runs=[dict(zip(columns, row)) for row in rows])


if __name__ == "__main__":
    main()
