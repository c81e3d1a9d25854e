#!/usr/bin/env bash
# PufferLib 3.0.0's own trainer for the suite `tetris`, in a venv of its own: the pufferlib 3.0.0 sdist from PyPI
# (its trainer pufferlib/pufferl.py, its configs, its Ocean Tetris and the CPU build of its _C advantage op) on
# torch 2.13.0, Python 3.11. Then:
#   PUFFERLIB_PYTHON=bench_envs/pufferlib/bin/python python benchmarks/launch.py tetris
# VENV (default bench_envs/pufferlib) and PYTHON (default python3.11) may be set; takes a few minutes.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
V=${VENV:-$ROOT/bench_envs/pufferlib}
PY=${PYTHON:-python3.11}
SRC=$ROOT/bench_envs/src

"$PY" -m venv "$V"
# PufferLib 3.0.0's own requirements (its setup.py) that the trainer imports, at versions that build beside torch 2.13
"$V/bin/pip" install -q torch==2.13.0 "numpy<2.0" gymnasium==0.29.1 gym==0.23.1 psutil rich rich_argparse \
    heavyball==1.7.2 pyro-ppl tensorboard setuptools wheel ninja

mkdir -p "$SRC" && cd "$SRC"
[ -f pufferlib-3.0.0.tar.gz ] || curl -sSfLO \
  https://files.pythonhosted.org/packages/7c/e1/5292f9b69c6263707b40ba04a87e6b9bcc177281d31092f77afd90c412f1/pufferlib-3.0.0.tar.gz
echo "7df3a3e3f5f894d78d2a1f5374097890aec01473183e748abefe4f3faa10eaa9  pufferlib-3.0.0.tar.gz" | sha256sum -c
rm -rf pufferlib-3.0.0 && tar -xzf pufferlib-3.0.0.tar.gz && cd pufferlib-3.0.0

# The one change to PufferLib: setup.py builds one Ocean env, Tetris, instead of all of them. NO_OCEAN=1 skips its
# downloads of raylib and box2d for the other envs, but 3.0.0's NO_OCEAN path stops with a NameError
# (c_extension_paths), so that block is pointed at Tetris and always run.
"$V/bin/python" - <<'EOF'
path = "setup.py"
text = open(path).read()
old = "c_extensions = []\nif not NO_OCEAN:\n    c_extension_paths = glob.glob('pufferlib/ocean/**/binding.c', recursive=True)"
new = "c_extensions = []\nif True:  # Ocean Tetris only\n    c_extension_paths = ['pufferlib/ocean/tetris/binding.c']"
assert text.count(old) == 1
open(path, "w").write(text.replace(old, new))
EOF

# setup.py builds _C as a CUDA extension wherever `nvcc` is on PATH (and then needs CUDA_HOME): hide it, so that _C
# is built for the CPU, as the CPU build of torch needs.
NO_NVCC=$(echo "$PATH" | tr ':' '\n' | while read -r dir; do [ -x "$dir/nvcc" ] || echo "$dir"; done | paste -sd:)
env PATH="$V/bin:$NO_NVCC" NO_OCEAN=1 MAX_JOBS=1 "$V/bin/pip" install -q --no-deps --no-build-isolation .

# A check: Tetris steps and the advantage op runs (pufferlib's import links a `resources` folder into the working
# folder, hence a temporary one)
CHECK=$(mktemp -d) && cd "$CHECK" && "$V/bin/python" - <<'EOF' 2>&1 | grep -v "Gym has been\|Please upgrade to Gymnasium\|migration guide"
import numpy as np
import torch
import pufferlib
import pufferlib.pufferl as pufferl
from pufferlib.ocean.tetris.tetris import Tetris

env = Tetris(num_envs=2)
env.reset(seed=0)
env.step(np.zeros(2, dtype=np.int32))
pufferl.compute_puff_advantage(*(torch.rand(2, 8) for _ in range(4)), torch.zeros(2, 8), 0.99, 0.9, 1.0, 1.0)
print("ok: pufferlib", pufferlib.__version__, "torch", torch.__version__, "tetris", env.observations.shape)
EOF
cd / && rm -rf "$CHECK"
