"""Data-parallel training under torchrun, 2 CPU ranks (gloo), for all three scripts: identical parameters on
every rank, the averaged gradient equal to the union batch's, ranks playing different games, agreed early
stops (target_kl on one rank only, Ctrl-C), resume on every rank, and a killed rank ending the job with a
message instead of a hang.
"""

import os
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest
import torch

from conftest import ROOT

# each test starts two ranks, one core each: they run one after another under pytest -n, and only in the known-good set
pytestmark = [pytest.mark.xdist_group("torchrun"), pytest.mark.one_set]

RANK = os.path.join(ROOT, "tests", "dist_rank.py")
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
# Small, fast runs of 5 updates (a2c: 30) of 3 epochs x 2 minibatches (a2c: one step each).
FLAGS = {
    "ppo_puffer_async": "--env-id CartPole-v1 --num-envs 4 --horizon 16 --num-minibatches 2 --update-epochs 3 "
    f"--total-timesteps {2 * 4 * 16 * 5}",
    "ppo_tetris": "--num-envs 8 --num-steps 16 --num-minibatches 2 --update-epochs 3 "
    f"--total-timesteps {2 * 8 * 16 * 5}",
    "a2c_cartpole": f"--num-envs 4 --num-steps 5 --log-freq 5 --total-timesteps {2 * 4 * 5 * 30}",
}
FLAGS = {script: flags.split() for script, flags in FLAGS.items()}
UPDATES = {"ppo_puffer_async": 5, "ppo_tetris": 5, "a2c_cartpole": 30}
STEPS_PER_RANK = {"ppo_puffer_async": 4 * 16, "ppo_tetris": 8 * 16, "a2c_cartpole": 4 * 5}
OPTIMIZER_STEPS = {"ppo_puffer_async": 5 * 3 * 2, "ppo_tetris": 5 * 3 * 2, "a2c_cartpole": 30}


def torchrun(tmp_path, *argv, env=None, timeout=120):
    out = subprocess.run(
        TORCHRUN + [RANK, str(tmp_path)] + list(argv),
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(2)], out.stdout


@pytest.mark.parametrize("script", sorted(FLAGS))
def test_two_ranks_end_bit_identical_and_play_different_games(tmp_path, script):
    (rank0, rank1), stdout = torchrun(tmp_path, "train", script, *FLAGS[script], "--seed", "3")
    assert rank0["result"]["update"] == rank1["result"]["update"] == UPDATES[script]
    assert rank0["result"]["global_step"] == 2 * UPDATES[script] * STEPS_PER_RANK[script]
    for key, value in rank0["params"].items():
        assert torch.equal(value, rank1["params"][key]), key
    # Every rank took every step (a rank that skipped the averaging would have drifted: checked by mutation).
    assert rank0["optimizer_steps"] == rank1["optimizer_steps"] == OPTIMIZER_STEPS[script]
    assert not torch.equal(rank0["first_obs"], rank1["first_obs"])
    assert stdout.count("done: step") == 1  # rank 0 alone reports


def test_ranks_share_the_cores_one_torch_thread_each(tmp_path):
    """Tetris's default is 2 torch threads for its one process; under torchrun each rank takes one instead (two
    ranks of 2 threads would fight over 2 cores), unless --torch-threads is given."""
    tetris = ["--num-envs", "8", "--horizon", "16", "--num-minibatches", "2", "--total-timesteps", str(2 * 8 * 16)]
    for flags, threads in [([], 1), (["--torch-threads", "2"], 2)]:
        ranks, _ = torchrun(tmp_path, "train", "ppo_puffer_async", *tetris, *flags)
        assert [rank["torch_threads"] for rank in ranks] == [threads, threads]


def test_averaged_gradient_equals_the_union_batch_gradient(tmp_path):
    ranks, _ = torchrun(tmp_path, "grad")
    for script in ("ppo_puffer_async", "ppo_tetris"):
        zero = ranks[0][script]
        one = ranks[1][script]
        for averaged0, averaged1, union, local in zip(zero["averaged"], one["averaged"], zero["union"], zero["local"]):
            assert torch.equal(averaged0, averaged1)
            assert torch.allclose(averaged0, union, atol=1e-6, rtol=0), (averaged0 - union).abs().max()
        # ... which a rank's own half-batch gradient is not.
        assert max((local - union).abs().max() for union, local in zip(zero["union"], zero["local"])) > 1e-3
        assert torch.equal(zero["extras"], torch.tensor([0.5, 1.0]))  # the extras are averaged too


@pytest.mark.parametrize("script", ["ppo_puffer_async", "ppo_tetris"])
def test_target_kl_hit_on_one_rank_stops_both_after_the_same_epoch(tmp_path, script):
    # Rank 1 alone reports approx_kl 10 > 1; the mean over ranks (5.x) decides, so both stop every
    # update after its first epoch (2 minibatches) instead of 3 epochs. A rank deciding alone would
    # leave the other waiting in all_reduce: the timeout would end the test.
    flags = [*FLAGS[script], "--target-kl", "1.0"]
    (rank0, rank1), _ = torchrun(tmp_path, "train", script, *flags, env={"KL_RANK": "1"}, timeout=90)
    assert rank0["optimizer_steps"] == rank1["optimizer_steps"] == 5 * 2
    assert rank0["result"]["update"] == rank1["result"]["update"] == 5


def start_job(tmp_path, script, *flags):
    log = open(tmp_path / "job.log", "w")
    proc = subprocess.Popen(
        TORCHRUN + [os.path.join(ROOT, f"{script}.py"), *flags],
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"},
    )
    deadline = time.time() + 60
    while "run " not in (tmp_path / "job.log").read_text():
        assert time.time() < deadline and proc.poll() is None, (tmp_path / "job.log").read_text()[-3000:]
        time.sleep(0.2)
    time.sleep(2.0)  # a few updates in
    return proc


def rank_processes(proc):
    ranks = {}
    for child in psutil.Process(proc.pid).children(recursive=True):
        try:
            rank = child.environ().get("RANK")
        except psutil.Error:
            continue
        if rank is not None and "torch.distributed.run" not in " ".join(child.cmdline()):
            ranks.setdefault(int(rank), child)
    return ranks


@pytest.mark.parametrize("script", ["ppo_puffer_async", "a2c_cartpole"])
def test_killing_one_rank_ends_the_job_with_a_message(tmp_path, script):
    proc = start_job(tmp_path, script, *FLAGS[script][:-1], "100000000", "--checkpoint-freq", "0")
    try:
        ranks = rank_processes(proc)
        assert sorted(ranks) == [0, 1]
        started = time.time()
        ranks[1].kill()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            # rank 0 has not ended by itself (torchrun would SIGKILL it at 30 s): SIGABRT makes faulthandler
            # (PYTHONFAULTHANDLER) write where each of its threads waits into the log, which the failure shows
            ranks[0].send_signal(signal.SIGABRT)
            proc.wait(timeout=40)
        elapsed = time.time() - started
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    log = (tmp_path / "job.log").read_text()
    assert proc.returncode != 0
    assert elapsed < 15, f"{elapsed:.1f} s:\n{log[-6000:]}"
    assert "rank      : 1" in log and "SIGKILL" in log, log[-3000:]  # torchrun's root cause names the rank
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in ranks.values())


@pytest.mark.parametrize("script", ["ppo_tetris", "a2c_cartpole"])
def test_ctrl_c_stops_every_rank_after_the_same_update_and_resume_restores_both(tmp_path, script):
    proc = start_job(tmp_path, script, *FLAGS[script][:-1], "100000000", "--checkpoint-freq", "0")
    try:
        ranks = rank_processes(proc)
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: every process of the job
        proc.wait(timeout=40)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    log = (tmp_path / "job.log").read_text()
    assert "interrupted at step" in log, log[-3000:]
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in ranks.values())
    checkpoint = next((tmp_path / "runs").glob(f"*/{script}.pt"))
    saved = torch.load(checkpoint, weights_only=False)
    update_size = 2 * STEPS_PER_RANK[script]
    assert saved["world_size"] == 2 and saved["global_step"] == saved["update"] * update_size

    # Both ranks load it and go on for 2 more updates, identical.
    more = str(saved["global_step"] + 2 * update_size)
    (rank0, rank1), _ = torchrun(tmp_path, "train", script, "--resume", str(checkpoint), "--total-timesteps", more)
    assert rank0["result"]["update"] == rank1["result"]["update"] == saved["update"] + 2
    for key, value in rank0["params"].items():
        assert torch.equal(value, rank1["params"][key]), key
    # One process cannot take over a 2-rank run: the update size would change.
    command = [sys.executable, os.path.join(ROOT, f"{script}.py"), "--resume", str(checkpoint)]
    out = subprocess.run(
        [*command, "--total-timesteps", str(int(more) * 2)], cwd=tmp_path, capture_output=True, text=True
    )
    assert out.returncode == 1
    assert "error: --resume: that run had 2 rank(s) and this one has 1" in out.stderr


@pytest.mark.parametrize("script", ["ppo_tetris", "a2c_cartpole"])
def test_a_ctrl_c_on_one_rank_stops_both_after_the_same_update(tmp_path, script):
    """SIGINT to rank 1 alone (a signal sent to one process, not the terminal's to all): rank 1's request reaches rank 0
    in the update's own collectives, both save the same update and end; none waits alone in a collective."""
    proc = start_job(tmp_path, script, *FLAGS[script][:-1], "100000000", "--checkpoint-freq", "0")
    try:
        ranks = rank_processes(proc)
        ranks[1].send_signal(signal.SIGINT)
        proc.wait(timeout=40)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    log = (tmp_path / "job.log").read_text()
    assert "interrupted at step" in log, log[-3000:]
    saved = torch.load(next((tmp_path / "runs").glob(f"*/{script}.pt")), weights_only=False)
    assert f"interrupted at step {saved['global_step']:,}:" in log
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in ranks.values())


def test_the_multi_node_line_works_with_two_nodes_on_one_machine(tmp_path):
    # The multi-node command of docs/distributed.md (c10d rendezvous, one agent per node), both "nodes" here.
    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "2",
        "--nproc-per-node",
        "1",
        "--rdzv-id",
        "test",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"localhost:{port}",
        RANK,
        str(tmp_path),
        "train",
        "ppo_tetris",
        *FLAGS["ppo_tetris"],
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    nodes = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        for _ in range(2)
    ]
    try:
        outputs = [node.communicate(timeout=120)[0] for node in nodes]
    finally:
        for node in nodes:
            node.kill()
    assert all(node.returncode == 0 for node in nodes), "\n".join(o[-2000:] for o in outputs)
    rank0 = torch.load(tmp_path / "rank0.pt", weights_only=False)
    rank1 = torch.load(tmp_path / "rank1.pt", weights_only=False)
    assert rank0["result"]["update"] == rank1["result"]["update"] == 5
    for key, value in rank0["params"].items():
        assert torch.equal(value, rank1["params"][key]), key
