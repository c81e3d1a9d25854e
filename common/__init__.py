"""Shared plumbing for the single-file scripts: environment construction, logging, checkpoints.

Algorithm code (networks, rollouts, GAE, losses) deliberately does *not* live here: each script
holds its own, so one file is the whole algorithm.
"""
