#!/usr/bin/env bash
# Two CPU-bound processes switched on and off at random (on and off spells of 0.5-4 s) for $1 seconds.
end=$((SECONDS + $1)); RANDOM=${2:-7}
while [ $SECONDS -lt $end ]; do
  python3 -c "while True: pass" & a=$!; python3 -c "while True: pass" & b=$!
  sleep "$(awk -v r=$RANDOM 'BEGIN{printf "%.2f", 0.5 + 3.5 * r / 32767}')"
  kill $a $b; wait $a $b 2>/dev/null
  sleep "$(awk -v r=$RANDOM 'BEGIN{printf "%.2f", 0.5 + 3.5 * r / 32767}')"
done
