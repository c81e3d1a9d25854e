import os

# The repository root: pytest puts it on sys.path (pyproject.toml's pythonpath), so the tests import the scripts and
# common/ from the checkout they run in.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def puffer_args(env_id: str = "tetris", **flags):
    """ppo_puffer_async.py's flags for `env_id` as a run of it takes them: its preset (common/presets.py), then
    `flags` (what the command line would give)."""
    import ppo_puffer_async
    from common import presets

    preset = presets.ppo_puffer_async(env_id, flags.get("env_kwargs", ""))
    return ppo_puffer_async.Args(**{**preset, **flags})


def a2c_args(env_id: str = "CartPole-v1", **flags):
    """a2c_cartpole.py's flags for `env_id`: its preset (common/presets.py), then `flags`."""
    import a2c_cartpole
    from common import presets

    return a2c_cartpole.Args(**{**presets.a2c_cartpole(env_id), **flags})
