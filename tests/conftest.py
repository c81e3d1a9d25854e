import os

# The repository root: pytest puts it on sys.path (pyproject.toml's pythonpath), so the tests import the scripts and
# common/ from the checkout they run in.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
