#!/usr/bin/env bash
# Session 30's device calls (outputs under benches/results/s30/<call>).
#   A: the fused forward's boxes (fwd_box_probe.py: filling W first against the least
#      padding box), then the float32 forward tables, NCHW and channels_last, on the fitted
#      boxes, and the bfloat16 training table (the 16-bit weight gradient's boxes fitted too).
#   B: planar outputs' boxes with runs of 64 bytes along W (fwd_box_probe.py on the 2-D
#      cases), what a fused call costs beyond its kernel (fused_call_probe.py), and the
#      float32 forward table.
#   C: the 16-bit fused backward with W's taps folded into the channels (fold_probe.py),
#      the planar boxes with runs of 128 bytes (fwd_box_probe.py), the float32 forward
#      table and the bfloat16 training table.
#   D: every CUDA test on the final code (the fold limited to 32 bytes of channels after C:
#      3d-96cube's 24 lost folded).
#   E: the tables on the final code: float32 training, channels_last forward, bfloat16
#      training, NCHW forward. F: the zoo.
#   G: the depthwise decoder again with --layers (F's convert(model, sample=x) swapped its
#      four up-convs in the bfloat16 NCHW forward, which then ran 0.74x); run as a command
#      line of its own: python -m gemmconv bench --models --model depthwise --layers.
#   H: step_profile.py on 3d-3x5x7 and 2d-3x7-512, bfloat16 training: kernels a step, ours
#      and torch's (run as a command line of its own).
#   I: fused_host_profile.py (cProfile of a fused channels_last forward, 2d-512x1024).
#   J: step_gaps.py on 3d-3x5x7 and 2d-3x7-512, bfloat16 (the profiler's own overhead
#      swamps the gaps: read K instead). K: step_host.py, the host time of a training
#      step's forward and backward, ours and torch's. I, J and K ran as command lines of
#      their own (python3 benches/<probe>.py <case> <dtype>).
export PYTHONPATH=. PYTHONUNBUFFERED=1
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name --format=csv,noheader
case "$1" in
A)
  timeout 240 python3 benches/fwd_box_probe.py > $O/box.log 2>&1; cat $O/box.log
  timeout 80 python3 -m gemmconv bench --full --json $O/fwd.json > $O/bench-fwd.log 2>&1; grep -A20 "^case" $O/bench-fwd.log
  timeout 70 python3 -m gemmconv bench --full --channels-last --json $O/fwd-cl.json > $O/bench-fwd-cl.log 2>&1; grep -A20 "^case" $O/bench-fwd-cl.log
  timeout 130 python3 -m gemmconv bench --full --backward --dtype bfloat16 --repeats 10 --json $O/train-bf16.json > $O/bench-train-bf16.log 2>&1; grep -A20 "^case" $O/bench-train-bf16.log ;;
B)
  timeout 150 python3 benches/fwd_box_probe.py 2d-1024,2d-3x7-512,2d-64to128,2d-512x1024 > $O/box.log 2>&1; cat $O/box.log
  timeout 200 python3 benches/fused_call_probe.py > $O/call.log 2>&1; cat $O/call.log
  timeout 80 python3 -m gemmconv bench --full --json $O/fwd.json > $O/bench-fwd.log 2>&1; grep -A20 "^case" $O/bench-fwd.log ;;
C)
  timeout 150 python3 benches/fold_probe.py > $O/fold.log 2>&1; cat $O/fold.log
  timeout 100 python3 benches/fwd_box_probe.py 2d-1024,2d-3x7-512,2d-64to128 > $O/box.log 2>&1; grep planar $O/box.log
  timeout 80 python3 -m gemmconv bench --full --json $O/fwd.json > $O/bench-fwd.log 2>&1; grep -A20 "^case" $O/bench-fwd.log
  timeout 130 python3 -m gemmconv bench --full --backward --dtype bfloat16 --repeats 10 --json $O/train-bf16.json > $O/bench-train-bf16.log 2>&1; grep -A20 "^case" $O/bench-train-bf16.log ;;
D)
  timeout 570 python3 -m pytest -q -m cuda tests -p no:cacheprovider > $O/tests.log 2>&1; tail -4 $O/tests.log ;;
E)
  timeout 120 python3 -m gemmconv bench --full --backward --repeats 10 --json $O/train.json > $O/bench-train.log 2>&1; grep -A20 "^case" $O/bench-train.log
  timeout 60 python3 -m gemmconv bench --full --channels-last --json $O/fwd-cl.json > $O/bench-fwd-cl.log 2>&1; grep -A20 "^case" $O/bench-fwd-cl.log
  timeout 140 python3 -m gemmconv bench --full --backward --dtype bfloat16 --repeats 10 --json $O/train-bf16.json > $O/bench-train-bf16.log 2>&1; grep -A20 "^case" $O/bench-train-bf16.log
  timeout 70 python3 -m gemmconv bench --full --json $O/fwd.json > $O/bench-fwd.log 2>&1; grep -A20 "^case" $O/bench-fwd.log ;;
F)
  timeout 560 python3 -m gemmconv bench --models --json $O/models.json > $O/models.log 2>&1; tail -60 $O/models.log ;;
esac
