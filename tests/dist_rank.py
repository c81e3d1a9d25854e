"""One rank of the data-parallel tests (tests/test_distributed.py), started by torchrun:

    torchrun --standalone --nproc-per-node 2 tests/dist_rank.py OUTDIR train SCRIPT [SCRIPT FLAGS...]   (any script)
    torchrun --standalone --nproc-per-node 2 tests/dist_rank.py OUTDIR grad

`train` runs SCRIPT.train (ppo_puffer_async or ppo_tetris) with the flags, as `torchrun SCRIPT.py` would, and
writes OUTDIR/rank<r>.pt: the final parameters, the rank's first observations, its optimizer-step count and
train()'s result. With KL_RANK=r in the environment, rank r alone reports approx_kl = 10 from every minibatch.
`grad` averages one PPO gradient over the ranks' halves of a fixed batch, and rank 0 also computes the
single-process gradient on the union, for each script's network and loss.
"""

import copy
import importlib
import os
import sys

import gymnasium as gym
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def record_first_observations(script, first):
    """Wraps the script's env factory so the first observations this rank's envs give are kept."""
    if script.__name__ == "ppo_puffer_async":
        make = script.make_puffer_vecenv

        def wrapped(*args, **kwargs):
            vecenv = make(*args, **kwargs)
            recv = vecenv.recv

            def recording_recv():
                out = recv()
                if not first:
                    first.append(torch.as_tensor(out[0]).clone())
                return out

            vecenv.recv = recording_recv
            return vecenv

        script.make_puffer_vecenv = wrapped
    else:
        attr = "make_tetris_vecenv" if script.__name__ == "ppo_tetris" else "make_gym_vector_env"
        make = getattr(script, attr)

        def wrapped(*args, **kwargs):
            envs = make(*args, **kwargs)
            reset = envs.reset

            def recording_reset(*a, **k):
                obs, info = reset(*a, **k)
                first.append(torch.as_tensor(obs).clone())
                return obs, info

            envs.reset = recording_reset
            return envs

        setattr(script, attr, wrapped)


def train(outdir, name, flags):
    import tyro

    from common import distributed, presets, run

    script = importlib.import_module(name)
    rank = int(os.environ["RANK"])
    if os.environ.get("KL_RANK") == str(rank):  # this rank's approx_kl is 10 when the ranks average it
        average = distributed.average_gradients

        def high_kl(world, params, loss, *approx_kl):
            return average(world, params, loss, *(torch.tensor(10.0) for _ in approx_kl))

        distributed.average_gradients = high_kl
    steps = [0]
    for optimizer in (torch.optim.Adam, torch.optim.RMSprop):  # a2c_cartpole.py's default is RMSprop

        def counting_step(self, *args, _step=optimizer.step, **kwargs):
            steps[0] += 1
            return _step(self, *args, **kwargs)

        optimizer.step = counting_step
    first = []
    record_first_observations(script, first)
    preset_of = {"a2c_cartpole": presets.a2c_cartpole, "ppo_puffer_async": presets.ppo_puffer_async}.get(name)
    args = tyro.cli(script.Args, args=flags, default=run.defaults(script.Args, name, preset_of, flags))  # as main()
    result = script.train(args)
    params = {k: v.clone() for k, v in result.pop("policy").state_dict().items()}
    result.pop("args", None)
    torch.save(
        {
            "params": params,
            "first_obs": first[0],
            "optimizer_steps": steps[0],
            "torch_threads": torch.get_num_threads(),
            "result": {k: v for k, v in result.items() if isinstance(v, (int, float, str, bool, dict))},
        },
        os.path.join(outdir, f"rank{rank}.pt"),
    )


def grad(outdir):
    """Each rank: the PPO gradient on its half of one fixed batch, averaged by common.distributed.allreduce_mean.
    Rank 0 also: the gradient of the same loss on the whole batch in one process."""
    import ppo_puffer_async
    import ppo_tetris
    from common.distributed import World, allreduce_mean

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    size = dist.get_world_size()
    out = {}
    for name in ("ppo_puffer_async", "ppo_tetris"):
        torch.manual_seed(0)
        rows = 8
        horizon = 5
        obs_dim = 6
        num_actions = 3
        gen = torch.Generator().manual_seed(1)
        obs = torch.randn(rows, horizon, obs_dim, generator=gen)
        actions = torch.randint(0, num_actions, (rows, horizon), generator=gen)
        old_logprobs = torch.log(torch.rand(rows, horizon, generator=gen) * 0.5 + 0.25)
        advantages = torch.randn(rows, horizon, generator=gen)  # already normalized over the whole batch
        old_values = torch.randn(rows, horizon, generator=gen)
        returns = torch.randn(rows, horizon, generator=gen)

        if name == "ppo_puffer_async":
            net_args = ppo_puffer_async.Args(hidden_size=16, lstm=True, lstm_hidden_size=8)
            net = ppo_puffer_async.Policy((obs_dim,), gym.spaces.Discrete(num_actions), net_args)

            def loss_on(model, sel):
                logits, values = model.unroll(
                    obs[sel],
                    model.initial_state(len(sel), torch.device("cpu")),
                    torch.zeros(len(sel), horizon, dtype=torch.bool),
                )
                logprobs, entropy = model.logprob_and_entropy(logits, actions[sel])
                ratio = (logprobs - old_logprobs[sel]).exp()
                masks = torch.ones(len(sel), horizon)
                pg_loss, v_loss = ppo_puffer_async.ppo_loss(
                    ratio,
                    advantages[sel],
                    values,
                    old_values[sel],
                    returns[sel],
                    masks,
                    weights=None,
                    clip_coef=0.2,
                    vf_clip_coef=0.2,
                )
                return pg_loss + 0.5 * v_loss - 0.01 * ppo_puffer_async.masked_mean(entropy, masks)

        else:
            net = ppo_tetris.Agent(obs_dim, num_actions, hidden_size=16)

            def loss_on(model, sel):
                flat = lambda x: x[sel].reshape(len(sel) * horizon, *x.shape[2:])  # noqa: E731
                _, logprobs, entropy, values = model.get_action_and_value(flat(obs), flat(actions))
                ratio = (logprobs - flat(old_logprobs)).exp()
                pg_loss, v_loss = ppo_tetris.ppo_loss(
                    ratio, flat(advantages), values, flat(old_values), flat(returns), clip_coef=0.2, clip_vloss=True
                )
                return pg_loss - 0.01 * entropy.mean() + 0.5 * v_loss

        union = copy.deepcopy(net)
        half = torch.arange(rank * rows // size, (rank + 1) * rows // size)
        loss_on(net, half).backward()
        local = [p.grad.clone() for p in net.parameters()]
        extras = allreduce_mean(list(net.parameters()), torch.tensor([float(rank), 1.0]), World(rank, size))
        loss_on(union, torch.arange(rows)).backward()
        out[name] = {
            "averaged": [p.grad for p in net.parameters()],
            "local": local,
            "union": [p.grad for p in union.parameters()],
            "extras": extras,
        }
    torch.save(out, os.path.join(outdir, f"rank{rank}.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    outdir = sys.argv[1]
    mode = sys.argv[2]
    os.chdir(outdir)  # runs/ goes there
    torch.set_num_threads(1)
    if mode == "train":
        train(outdir, sys.argv[3], sys.argv[4:])
    else:
        grad(outdir)
