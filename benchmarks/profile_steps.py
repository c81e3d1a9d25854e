"""Where a training step's time goes: the env, the vector layer around it, the policy's forward pass,
sampling, storage (the rollout's bookkeeping), and the update, per agent step, from one training run of a script.

    python benchmarks/profile_steps.py ppo_puffer_async.py --env-id HalfCheetah-v5 --num-envs 1 --horizon 64 \\
        --batch-size 2048 --num-minibatches 32 --update-epochs 10 --hidden-size 64 --total-timesteps 20480
    python benchmarks/profile_steps.py a2c_cartpole.py --num-envs 8 --num-steps 5 --total-timesteps 100000

--save NAME writes benchmarks/results/NAME.json (docs/benchmarks.md's tables); --compile runs the update's forward
pass and loss under torch.compile (docs/benchmarks.md).

The script's own functions are wrapped with a clock (each call costs ~1 us more, so the shares are a little off for
the cheapest parts); everything else a step does is "other". The training loop runs from the first rollout to the
closing of the envs: the update is the loop's time outside the rollouts, and start-up (imports, building the envs)
and the end (the last checkpoint) are left out of the table and given below it. One torch thread; evaluation is off.
"""

import importlib
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch
import tyro

import results

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from common import presets  # noqa: E402

CLOCKS, IN_ROLLOUT, MARKS = defaultdict(float), [False], {}


def clocked(name, fn, rollout_only=False):
    def wrapper(*args, **kwargs):
        if rollout_only and not IN_ROLLOUT[0]:
            return fn(*args, **kwargs)
        start = time.perf_counter()
        IN_ROLLOUT[0] |= name == "rollout"
        try:
            return fn(*args, **kwargs)
        finally:
            CLOCKS[name] += time.perf_counter() - start
            IN_ROLLOUT[0] &= name != "rollout"

    return wrapper


def marked(name, fn):
    """fn, noting when it is first called: the training loop's first rollout, or the closing of the envs."""

    def wrapper(*args, **kwargs):
        MARKS.setdefault(name, time.perf_counter())
        return fn(*args, **kwargs)

    return wrapper


def wrap_env_steps(script, module):
    """The raw Gymnasium or PettingZoo env's step(), wherever the script builds it."""
    import gymnasium as gym

    real_make = gym.make

    def make(*args, **kwargs):
        env = real_make(*args, **kwargs)
        env.unwrapped.step = clocked("env", env.unwrapped.step)
        return env

    gym.make = make


def compile_update(script, module):
    """--compile: torch.compile the update's forward pass and loss (the minibatch step bench_compile.py times) to see
    what it gives a whole run; the acting step stays eager (bench_compile.py: no gain there)."""
    if script == "ppo_puffer_async":
        module.Policy.unroll = torch.compile(module.Policy.unroll)
        module.Policy.logprob_and_entropy = torch.compile(module.Policy.logprob_and_entropy)
        module.ppo_loss = torch.compile(module.ppo_loss)
    else:
        module.Agent.get_logprob_entropy_value = torch.compile(module.Agent.get_logprob_entropy_value)
        module.a2c_loss = torch.compile(module.a2c_loss)


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help") or not sys.argv[1].endswith(".py"):
        print(__doc__)
        raise SystemExit(0 if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help") else 2)
    script = sys.argv[1].removesuffix(".py")
    argv = sys.argv[2:]
    save = argv.pop(argv.index("--save") + 1) if "--save" in argv else None  # a results file's name
    argv = [arg for arg in argv if arg != "--save"]
    module = importlib.import_module(script)
    if "--compile" in argv:
        argv.remove("--compile")
        compile_update(script, module)
    wrap_env_steps(script, module)
    if script == "ppo_puffer_async":
        from common import vector

        for name in ("recv", "send"):  # the vector layer and the env objects, the env's step inside them
            for cls in (vector.Serial, vector.Multiprocessing):
                setattr(cls, name, clocked("env + vector layer", getattr(cls, name)))
        module.Policy.step = clocked("forward", module.Policy.step)
        module.Policy.sample = clocked("sample", module.Policy.sample)
        for name in ("store_steps", "finish_steps"):
            setattr(module.Experience, name, clocked("storage", getattr(module.Experience, name)))
        module.EpisodeStats.update = clocked("storage", module.EpisodeStats.update)
        module.rollout = marked("loop", clocked("rollout", module.rollout))
    else:
        from common import gym_envs

        gym_envs.SameStepVectorEnv.step = clocked("env + vector layer", gym_envs.SameStepVectorEnv.step)
        module.Agent.forward = clocked("forward", module.Agent.forward, rollout_only=True)
        module.Agent.sample = clocked("sample", module.Agent.sample)
        module.collect_rollout = marked("loop", clocked("rollout", module.collect_rollout))
    module.run.close = marked("end", module.run.close)  # the loop is over: the envs and the writer are closed
    flags = [*argv, "--eval-freq", "0", "--torch-threads", "1"]
    default = module.run.defaults(module.Args, script, getattr(presets, script), flags)  # as the script's main()
    args = tyro.cli(module.Args, args=flags, default=default)
    module.evaluate = lambda *a, **k: {"return": torch.zeros(1).numpy(), "length": torch.zeros(1).numpy()}
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:  # the run's files go nowhere
        os.chdir(tmp)
        start = time.perf_counter()
        result = module.train(args)
        total = time.perf_counter() - start
        os.chdir(here)
    steps = result["global_step"]
    loop = MARKS["end"] - MARKS["loop"]
    parts = {
        "env": CLOCKS["env"],
        "vector layer": CLOCKS["env + vector layer"] - CLOCKS["env"],
        "forward": CLOCKS["forward"],
        "sample": CLOCKS["sample"],
        "storage": CLOCKS["storage"],
    }
    parts["rollout, other"] = CLOCKS["rollout"] - sum(parts.values())
    parts["update"] = loop - CLOCKS["rollout"]
    about = (
        f"{script}.py {' '.join(argv)}: {steps:,} agent steps in a training loop of {loop:.1f} s ({steps / loop:,.0f} "
        f"SPS); start-up and the end took {total - loop:.1f} s more"
    )
    rows = [[name, f"{seconds / steps * 1e6:.1f}", f"{seconds / loop:.0%}"] for name, seconds in parts.items()]
    table = dict(columns=["part", "us per agent step", "share"], rows=rows, notes=[about])
    print(f"{about}\n{results.markdown(table['columns'], rows)}")
    if save:
        results.save(save, total / 60, table=table, runs=[dict(seconds=loop, steps=steps, sps=steps / loop)])


if __name__ == "__main__":
    main()
