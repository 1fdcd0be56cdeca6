#!/bin/bash
# Runs the multi-threaded conformance binary N times on the GPU machine (issue 27's
# multi-device wgpu hang); a run still going after 90 s is recorded (each thread's name,
# wait channel and system call, and gdb's backtraces where gdb exists) under $OUT, then
# killed. Usage there: source .device/env.sh && bash scripts/gpu-hang-hunt.sh [N]
cd "$DC_BIN" || exit 1
for k in $(seq 1 "${1:-5}"); do
  start=$(date +%s)
  ./conformance-* --test-threads=16 > /tmp/conf$k.log 2>&1 &
  P=$!
  while kill -0 $P 2>/dev/null && [ $(( $(date +%s) - start )) -lt 90 ]; do sleep 1; done
  if kill -0 $P 2>/dev/null; then
    echo "run $k: HUNG after 90 s"
    { for t in /proc/$P/task/*; do echo "$(cat $t/comm) wchan=$(cat $t/wchan) syscall=$(cut -d' ' -f1 $t/syscall)"; done; } > "$OUT/hung$k.txt" 2>&1
    if command -v gdb >/dev/null; then timeout 60 gdb -p $P -batch -ex "thread apply all bt 12" >> "$OUT/hung$k.txt" 2>&1; fi
    kill -9 $P
  else
    wait $P; echo "run $k: rc=$? in $(( $(date +%s) - start )) s; $(grep 'test result' /tmp/conf$k.log)"
  fi
done
