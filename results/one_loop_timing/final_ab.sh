#!/bin/bash
# Issue 56, at its end: the chain decoder in /tmp/before (441061a, before the one loop) and /work/main, and a
# chain-shaped tree in /tmp/pre56 (4bd07e1, its own chain path) and /work/main (the chain decoder), interleaved x9.
here="$(dirname "$0")"
for i in 1 2 3 4 5 6 7 8 9; do
  echo "chain before $(OMP_NUM_THREADS=1 python "$here/chain_time.py" /tmp/before)"
  echo "chain after $(OMP_NUM_THREADS=1 python "$here/chain_time.py" /work/main)"
  echo "tree-chain before $(OMP_NUM_THREADS=1 python "$here/chain_time.py" /tmp/pre56 tree-chain)"
  echo "tree-chain after $(OMP_NUM_THREADS=1 python "$here/chain_time.py" /work/main tree-chain)"
done
