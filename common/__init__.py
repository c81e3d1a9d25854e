"""What every script shares and none of them is about: env construction (gym_envs.py, puffer_envs.py, tetris.py,
vector.py, normalize.py), logging (logs.py), and the run's plumbing as plain functions that train() calls (run.py:
flags, resume, the run's directory, Ctrl-C and exit codes; distributed.py: torchrun; checkpoint.py: atomic
files and clear errors). The learning and the training loop itself deliberately do *not* live here: each script's
train() holds its own, so one file is the whole algorithm. docs/design.md has the map.
"""
