"""Data-parallel training under torchrun (`torchrun --standalone --nproc-per-node 2 ppo_tetris.py`). Each rank plays
its own envs, starts from rank 0's weights, and after every backward pass averages its gradients with the others in
one flat all_reduce, so the parameters stay identical, bit for bit. The same message carries what every rank must
decide alike (a non-finite loss, approx_kl for --target-kl), so none is left waiting in a collective (CleanRL's
cleanrl/ppo_atari_multigpu.py at commit fe8d8a03 breaks on its own rank's approx_kl after an epoch, which can leave
the others hanging in the next minibatch's all_reduce). One process is rank 0 of 1.
"""

import gc
import os
import signal
import sys
from dataclasses import dataclass

import torch
import torch.distributed as dist

# rank r's envs: seed + RANK_SEED_OFFSET * r + i. PufferLib 3.0.0's pufferlib/pufferl.py seeds every rank's envs with
# the same config seed, so its ranks all play the same games.
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
    """Averages the gradients of `params` over the ranks in one flat all_reduce, with the scalars `extras` in the
    same message; returns them averaged. DDP overlaps its all_reduce with the backward pass (docs/distributed.md
    times both), but it cannot carry those scalars, nor see a recurrent unroll."""
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


def average_gradients(world: World, params, *scalars: torch.Tensor) -> list:
    """After backward, under torchrun: the gradients of `params` averaged over the ranks, with `scalars` (the loss,
    approx_kl: what every rank must decide on alike) averaged in the same message; returns the scalars. In one
    process: nothing to average, the scalars as they are."""
    if world.size == 1:
        return list(scalars)
    return list(allreduce_mean(params, torch.stack(scalars), world))


def pool(world: World, *lists):
    """Each list concatenated over the ranks, in rank order, in one all_gather; every rank calls it at the same
    updates. One process: the lists themselves."""
    everyone = gather(world, lists)
    return [[x for rank in everyone for x in rank[i]] for i in range(len(lists))]


def join_ranks(world: World, model: torch.nn.Module, seed: int) -> None:
    """Under torchrun: rank 0's weights on every rank, and each rank other than 0 its own stream of actions and
    minibatch orders, seeded `seed` (rank 0 keeps a one-process run's)."""
    for tensor in model.state_dict().values():
        dist.broadcast(tensor, src=0)
    if world.rank != 0:
        torch.manual_seed(seed)


def leave_world(world: World) -> None:
    """Under torchrun: leaves the process group; after a clean end (no exception on its way out), waits for every
    rank first (a rank that exits while another is still in its last collective can abort it)."""
    if world.size > 1 and dist.is_initialized():
        if sys.exc_info()[0] is None:
            dist.barrier()
        dist.destroy_process_group()
        gc.collect()  # free Gloo's worker threads now, not at interpreter exit, where tearing them down can abort


class StopRequest:
    """Ctrl-C (SIGINT, SIGTERM) asks the run to stop after the update it is in, whole, then save it. Under torchrun
    every rank gets it (and more from torchrun); the ranks `pool` their flags at the end of an update, so all stop
    after the same one. In one process a second Ctrl-C stops at once: KeyboardInterrupt, nothing saved."""

    def __init__(self, world: World):
        self.requested = False
        self.world = world
        self.previous = {sig: signal.signal(sig, self.request) for sig in (signal.SIGINT, signal.SIGTERM)}

    def request(self, signum, frame) -> None:
        if self.requested and self.world.size == 1:
            self.release()
            raise KeyboardInterrupt
        if not self.requested and self.world.rank == 0:
            print("\nCtrl-C: the run saves and stops after this update (Ctrl-C again: at once, unsaved)", flush=True)
        self.requested = True

    def release(self) -> None:
        """The signal handlers as they were before the run."""
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
