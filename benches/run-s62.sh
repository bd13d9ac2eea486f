#!/usr/bin/env bash
# Session 62's device calls (outputs under $OUT/<call>), written in session 61, which got
# only an H100 for its last 1,000 s of device time (results/s61):
#   T: every CUDA test file on an H200 (session 61 ran them on an H100: T on code whose
#      defaults it then reverted, U test_cuda_fused on the final code, cut at 90%).
#   O: the weight gradient's boxes walked H first against W first (wgrad_order_probe.py):
#      session 61's model of its memory traffic says the reads of its copies could fall to
#      a third. If H first wins, fused.BOXES_DOWN_H = True, then test_cuda_fused, the
#      training tables (float32 and bfloat16, both formats) and the zoo.
#   N: the two leads of session 61 (benches/NOTES.md): ncu on 2d-1024's float32 weight
#      gradient kernel (the taps form; its limit is not shared-memory bandwidth), both
#      formats, and its boxes walked H first (DRAM bytes against the traffic model); and what the channels_last float32 backward allocates beyond its count
#      (backward_alloc_probe.py, the allocator's record).
#   A, B: session 59's plan for session 60 (run-s61.sh A and B), not yet run by any session.
source benches/run-lib.sh "$1"   # $O, and count, t, summary, layer, gpu, all_tests, table, ...
case "$1" in
T) gpu
  all_tests ;;
O) gpu
  node
  probe 560 wgrad-order wgrad_ab_probe.py BOXES_DOWN_H ;;   # (run as wgrad_order_probe.py)
N) gpu
  probe 120 alloc backward_alloc_probe.py
  for f in "" --channels-last --down-h; do
    timeout 200 ncu --clock-control none --kernel-name regex:weight_gradient --launch-skip 2 \
      --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
      --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
      --section LaunchStats --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct \
      python3 benches/wgrad_ncu.py 2d-1024 $f > $O/ncu$f.txt 2>&1
  done
  grep -h "weight_gradient\|Duration\|Throughput\|Pipe\|Stall\|Registers Per\|Occupancy\|Shared Memory\|L2 Hit\|Issue\|DRAM\|dram__\|lts__" $O/ncu*.txt | head -100 ;;
A|B) bash benches/run-s61.sh "$1" ;;
esac
