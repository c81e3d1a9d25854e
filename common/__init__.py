"""What every script shares and none of them is about: env construction (envs.py, vector.py, tetris.py,
normalize.py), logging (logs.py), and the run's plumbing (run.py: resume, checkpoints, evaluation timing, Ctrl-C
and exit codes, the command line; distributed.py: torchrun; checkpoint.py: atomic files and clear errors).

The reinforcement learning (networks, rollouts, advantages, sampling, losses, the update loop) deliberately does
*not* live here: each script holds its own, so one file is the whole algorithm. docs/design.md has the map.
"""
