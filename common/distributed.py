"""Data-parallel training under torchrun: every script runs the same way as one process or as N ranks.

    torchrun --standalone --nproc-per-node 2 ppo_tetris.py

Each rank plays its own envs (seeded seed + RANK_SEED_OFFSET * rank), starts from rank 0's weights, and
after every backward pass averages its gradients with the others in one flat all_reduce, so every rank
takes the same optimizer step and the parameters stay identical, bit for bit. The same message carries the
scalars every rank must decide on alike (a non-finite loss, approx_kl for --target-kl), so all ranks take
the same branches and none is left waiting in a collective (CleanRL's ppo_atari_multigpu.py lets one
rank's target_kl break leave the others hanging). A plain `python` run is rank 0 of 1 and never touches
torch.distributed.
"""

import gc
import os
import signal
import sys
from dataclasses import dataclass

import torch
import torch.distributed as dist

# Rank r's envs are seeded seed + RANK_SEED_OFFSET * r + i: every rank plays its own games (PufferLib's
# ranks all play the same ones).
RANK_SEED_OFFSET = 100_000


@dataclass
class World:
    """This process's place in a torchrun job."""

    rank: int = 0
    size: int = 1


def init_world(dist_backend: str, device: torch.device) -> tuple:
    """(World, device) from torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, ...). Under torchrun
    with --device cuda each rank takes GPU LOCAL_RANK of its node."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size == 1:
        return World(), device
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
    backend = dist_backend if dist_backend != "auto" else ("nccl" if device.type == "cuda" else "gloo")
    if backend == "nccl" and device.type != "cuda":
        raise ValueError("--dist-backend nccl needs --device cuda (NCCL reduces GPU tensors); on CPU use gloo")
    dist.init_process_group(backend)
    return World(dist.get_rank(), size), device


def allreduce_mean(params, extras: torch.Tensor, world: World) -> torch.Tensor:
    """Averages the gradients of `params` over the ranks in one flat all_reduce, with `extras` (scalars every
    rank must decide on alike) in the same message; returns the averaged extras. DDP overlaps its all_reduce
    with the backward pass and was 7% faster per minibatch (benchmarks/bench_distributed.py), but it cannot
    carry those scalars, nor see a recurrent unroll. Every rank then holds the same bits, so the same
    optimizer step keeps the parameters identical."""
    grads = [p.grad for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads] + [extras.to(grads[0].dtype)])
    dist.all_reduce(flat)
    flat /= world.size
    for grad, mean in zip(grads, flat[: -len(extras)].split([g.numel() for g in grads])):
        grad.copy_(mean.view_as(grad))
    return flat[-len(extras) :]


def gather(world: World, local):
    """Every rank's `local` (any picklable), in rank order. One rank: [local], no copy."""
    if world.size == 1:
        return [local]
    everyone = [None] * world.size
    dist.all_gather_object(everyone, local)
    return everyone


def allreduce_gradients(world: World, params, loss: torch.Tensor, *extras: torch.Tensor, update: int, step: int):
    """After backward: under torchrun, the gradients averaged over the ranks, with a non-finite-loss flag and
    `extras` (e.g. approx_kl) averaged in the same message, so every rank takes the same branches. A non-finite
    loss on any rank stops the run with one line (FloatingPointError). Returns the extras (averaged)."""
    checks = torch.stack([(~torch.isfinite(loss)).float(), *extras])
    if world.size > 1:
        checks = allreduce_mean(params, checks, world)
    if checks[0] > 0:
        raise FloatingPointError(
            f"loss became {loss.item() if not torch.isfinite(loss) else 'non-finite on a rank'} at update {update} "
            f"(step {step:,}); lower --learning-rate or --max-grad-norm"
        )
    return checks[1] if len(extras) == 1 else tuple(checks[1:])


def pool(world: World, *lists):
    """Each list concatenated over the ranks, in rank order, in one all_gather; every rank calls it at the same
    updates. One process: the lists themselves."""
    everyone = gather(world, lists)
    return [[x for rank in everyone for x in rank[i]] for i in range(len(lists))]


def join_ranks(world: World, model: torch.nn.Module, run_name: str, seed: int) -> str:
    """Under torchrun: rank 0's weights and run name on every rank, and each rank other than 0 its own stream of
    actions and minibatch orders (rank 0 keeps a one-process run's). Returns the run name."""
    for tensor in model.state_dict().values():
        dist.broadcast(tensor, src=0)
    if world.rank != 0:
        torch.manual_seed(seed)
    return gather(world, run_name)[0]


def leave_world(world: World) -> None:
    """Under torchrun: leaves the process group; after a clean end (no exception on its way out), waits for every
    rank first (a rank that exits while another is still in its last collective can abort it)."""
    if world.size > 1 and dist.is_initialized():
        if sys.exc_info()[0] is None:
            dist.barrier()
        dist.destroy_process_group()
        gc.collect()  # free Gloo's worker threads now, not at interpreter exit, where tearing them down can abort


class StopRequest:
    """Under torchrun, Ctrl-C (SIGINT to every rank, then torchrun's own SIGINT or SIGTERM) only sets a flag.
    The ranks agree on it at the end of an update (`pool` the flags), so all stop after the same update and
    none is left waiting in a collective; rank 0 saves. In one process it does nothing: Ctrl-C raises
    KeyboardInterrupt at once, which train() catches around its loop."""

    def __init__(self, world: World):
        self.requested = False
        if world.size > 1:
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, self.request)

    def request(self, signum, frame) -> None:
        self.requested = True
