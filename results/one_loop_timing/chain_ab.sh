#!/bin/bash
# interleaved: before, after, x7
for i in 1 2 3 4 5 6 7; do
  echo "before $(OMP_NUM_THREADS=1 python /tmp/exp/chain_time.py /tmp/before)"
  echo "after $(OMP_NUM_THREADS=1 python /tmp/exp/chain_time.py /work/main)"
done
