"""A refactor changes no number: record short fixed-seed runs of every script and env kind, then compare.

    python scripts/fixed_seed_runs.py record before.json      # on the commit before the change
    python scripts/fixed_seed_runs.py record after.json       # on the change
    python scripts/fixed_seed_runs.py compare before.json after.json
    python scripts/fixed_seed_runs.py compare before.json after.json --half-value-loss   # see below
    python scripts/fixed_seed_runs.py compare before.json after.json --redefined         # see REDEFINED

Each run's TensorBoard scalars are read back from its event files; every tag but charts/SPS and perf/* must be
equal at every step, bit for bit. --half-value-loss compares a record made when a2c_cartpole.py's and
ppo_puffer_async.py's losses/value_loss was the squared error itself with one of today's 0.5 x squared error: those
cases' value_loss must be exactly half (a power of two: exact), and losses/clipfrac (then the last minibatch's, now
the update's mean) and losses/old_approx_kl (new) are left out. Records are kept in scripts/fixed_seed_records/.
A run that resumes, and a 2-rank torchrun job, are among the cases.
--only NAME[,NAME] records a few cases. Takes ~6 minutes on 2 cores.
"""

import glob
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]

A2C = "a2c_cartpole.py --eval-episodes 3 ".split()
TETRIS = "ppo_tetris.py --num-envs 64 --num-steps 32 --eval-episodes 4 --max-ticks 200 ".split()
PUFFER = "ppo_puffer_async.py --eval-episodes 3 ".split()
CASES = {  # name: flags, or (flags of the first run, flags of its --resume)
    "a2c-cartpole": A2C + "--total-timesteps 16000 --eval-freq 50 --checkpoint-freq 100".split(),
    "a2c-pendulum": A2C + "--env-id Pendulum-v1 --total-timesteps 12800".split(),
    "a2c-adam-minibatches": A2C
    + "--total-timesteps 8000 --optimizer adam --mini-batches 4 --norm-adv --ent-coef 0.01".split(),
    "a2c-resume": (A2C + "--total-timesteps 4000".split(), "--total-timesteps 8000".split()),
    "a2c-torchrun": A2C + "--total-timesteps 6400 --torchrun".split(),
    "a2c-lstm": A2C + "--env-id popgym-RepeatPreviousEasy-v0 --lstm --total-timesteps 12800 --eval-freq 25".split(),
    "tetris-serial": TETRIS + "--total-timesteps 12288".split(),
    "tetris-workers": TETRIS + "--total-timesteps 8192 --backend Multiprocessing --num-workers 2".split(),
    "tetris-resume": (TETRIS + "--total-timesteps 4096 --checkpoint-freq 1".split(), "--total-timesteps 8192".split()),
    "tetris-torchrun": TETRIS + "--total-timesteps 8192 --torchrun".split(),
    "puffer-tetris": PUFFER + "--total-timesteps 98304 --eval-freq 2".split(),
    "puffer-tetris-lstm": PUFFER + "--lstm --num-envs 64 --total-timesteps 16384".split(),
    "puffer-mpe-serial": PUFFER
    + "--env-id mpe-spread --backend Serial --num-workers 1 --async-factor 1 --num-envs 32".split()
    + "--total-timesteps 24576".split(),
    "puffer-mpe-workers": PUFFER + "--env-id mpe-spread --num-envs 32 --total-timesteps 24576".split(),
    "puffer-cartpole": PUFFER + "--env-id CartPole-v1 --total-timesteps 20480 --eval-freq 10".split(),
    "puffer-acrobot-prio": PUFFER
    + "--env-id Acrobot-v1 --total-timesteps 12800 --prio-alpha 0.6 --target-kl 0.02 --norm-reward".split(),
    "puffer-novel-lstm": PUFFER
    + "--env-id cartpole-novel --lstm --burn-in 5 --tbptt 10 --total-timesteps 16000".split(),
    "puffer-resume": (
        PUFFER + "--env-id CartPole-v1 --total-timesteps 5120 --checkpoint-freq 2".split(),
        "--total-timesteps 10240".split(),
    ),
    "puffer-torchrun": PUFFER + "--env-id CartPole-v1 --total-timesteps 10240 --torchrun".split(),
    "puffer-reference": PUFFER + "--env-id mpe2.simple_reference_v3 --num-envs 16 --total-timesteps 4096".split(),
    "puffer-kinds": PUFFER
    + "--env-id mpe2.simple_world_comm_v3 --num-envs 8 --total-timesteps 6144 --eval-opponents random".split(),
    "puffer-box": PUFFER + "--env-id InvertedPendulum-v5 --total-timesteps 8192 --eval-freq 2".split(),
    # the code paths of the results tables: MuJoCo at the continuous defaults, POPGym's memory defaults, LunarLander's
    # A2C set, the GRU
    "puffer-halfcheetah": PUFFER + "--env-id HalfCheetah-v5 --total-timesteps 16384 --eval-freq 4".split(),
    "puffer-popgym-lstm": PUFFER + "--env-id popgym-RepeatPreviousEasy-v0 --lstm --total-timesteps 16384".split(),
    "a2c-lunarlander": A2C + "--env-id LunarLander-v3 --total-timesteps 16384".split(),
    "a2c-gru": A2C + "--env-id popgym-RepeatPreviousEasy-v0 --lstm --rnn-type gru --total-timesteps 12800".split(),
    # Atari (the atari extra): the CNN from uint8 frames, whole games logged; with an LSTM on the CNN
    "puffer-atari": PUFFER
    + "--env-id atari-breakout --num-envs 4 --batch-size 256 --total-timesteps 1024 --eval-max-steps 300".split(),
    "puffer-atari-lstm": PUFFER
    + "--env-id atari-pong --lstm --num-envs 4 --horizon 64 --batch-size 256 --total-timesteps 512".split()
    + "--eval-max-steps 100".split(),
    "puffer-extend-ent": (
        PUFFER + "--env-id CartPole-v1 --anneal-ent --ent-coef 0.01 --total-timesteps 5120".split(),
        "--total-timesteps 10240".split(),
    ),
}


def run(argv, cwd):
    if "--torchrun" in argv:
        argv = [a for a in argv if a != "--torchrun"]
        command = TORCHRUN + [os.path.join(ROOT, argv[0])] + argv[1:]
    else:
        command = [sys.executable, os.path.join(ROOT, argv[0])] + argv[1:]
    out = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ROOT})
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({out.returncode}):\n{out.stdout[-2000:]}{out.stderr[-3000:]}")


def scalars(run_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(run_dir, size_guidance={"scalars": 0}).Reload()
    return {
        tag: [(e.step, e.value) for e in events.Scalars(tag)]
        for tag in events.Tags()["scalars"]
        if tag != "charts/SPS" and not tag.startswith("perf/")
    }


def record(path, only=None):
    results = {}
    for name, case in CASES.items():
        if only and name not in only:
            continue
        with tempfile.TemporaryDirectory() as cwd:
            if isinstance(case, tuple):
                first, more = case
            else:
                first = case
                more = None
            run(first, cwd)
            if more is not None:
                (checkpoint,) = glob.glob(os.path.join(cwd, "runs", "*", "*.pt"))
                run([first[0], "--resume", checkpoint] + more, cwd)
            (run_dir,) = glob.glob(os.path.join(cwd, "runs", "*"))
            results[name] = scalars(run_dir)
        print(f"{name}: {sum(len(v) for v in results[name].values())} scalars", flush=True)
    with open(path, "w") as f:
        json.dump(results, f)


# The tags whose meaning was made one across the scripts on purpose, per script (the case names' first word): a record
# made before that change compares with one made after it with --redefined, which leaves exactly these out.
# charts/episodic_return and charts/episodic_length: a point per finished episode (were means over a log interval);
# losses/old_approx_kl and losses/clipfrac: the ranks' mean under torchrun (were rank 0's); eval/*: every evaluation
# plays the episodes of seed + 10,000 (the PPO scripts' were seed + 10,000 + update); tetris/ep_return and
# tetris/ep_length: no longer written (charts/episodic_return and charts/episodic_length are the same games).
REDEFINED = {
    "a2c": ("charts/episodic_return", "charts/episodic_length"),
    "tetris": (
        "charts/episodic_return",
        "charts/episodic_length",
        "losses/old_approx_kl",
        "losses/clipfrac",
        "eval/",
        "tetris/ep_return",
        "tetris/ep_length",
    ),
    "puffer": (
        "charts/episodic_return",
        "charts/episodic_length",
        "losses/old_approx_kl",
        "losses/clipfrac",
        "eval/",
        "tetris/ep_return",
        "tetris/ep_length",
    ),
}


def redefined(name: str, tag: str) -> bool:
    """Whether case `name`'s `tag` is one whose meaning changed (REDEFINED; a prefix ending in / covers its tags)."""
    return any(
        tag == old or tag.startswith(old if old.endswith("/") else old + "/") for old in REDEFINED[name.split("-")[0]]
    )


def same(name: str, tag: str, before, after, half_value_loss: bool) -> bool:
    """Whether a tag's (step, value) pairs are the same in two records (see the module's docstring)."""
    if half_value_loss and tag == "losses/value_loss" and before and after and not name.startswith("tetris"):
        return [step for step, _ in before] == [step for step, _ in after] and all(
            new == old * 0.5 for (_, new), (_, old) in zip(after, before)
        )
    return before == after


def compare(before_path, after_path, half_value_loss=False, redefined_too=False):
    with open(before_path) as f:
        before = json.load(f)
    with open(after_path) as f:
        after = json.load(f)
    failed = 0
    for name in before:
        if name not in after:
            print(f"{name}: not recorded after")
            failed += 1
            continue
        tags = sorted(set(before[name]) | set(after[name]))
        if redefined_too:
            tags = [tag for tag in tags if not redefined(name, tag)]
        if half_value_loss:
            tags = [tag for tag in tags if tag not in ("losses/clipfrac", "losses/old_approx_kl")]
        diffs = [
            tag for tag in tags if not same(name, tag, before[name].get(tag), after[name].get(tag), half_value_loss)
        ]
        print(f"{name}: {'identical' if not diffs else 'DIFFERS in ' + ', '.join(diffs)}")
        failed += bool(diffs)
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    if sys.argv[1] == "record":
        record(sys.argv[2], sys.argv[4].split(",") if len(sys.argv) > 4 and sys.argv[3] == "--only" else None)
    else:
        compare(
            sys.argv[2],
            sys.argv[3],
            half_value_loss="--half-value-loss" in sys.argv[4:],
            redefined_too="--redefined" in sys.argv[4:],
        )
