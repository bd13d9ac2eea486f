#!/usr/bin/env bash
# Session 31's device calls (outputs under benches/results/s31/<call>).
#   A: where a fused channels_last forward's host time goes (launch_probe.py), and the host
#      time of a training step (step_host.py) on 2d-3x7-512.
#   B: the training step's host time by piece (step_pieces.py) on 2d-3x7-512 and 3d-3x5x7.
#   C: A/B of the fused route's launches replayed (Launch, the plans kept, the route decided
#      once per call): the session's start (scratch/old, carried) against the working tree,
#      alternating, on the stride-1 2-D cases: the channels_last forward table, the float32
#      and bfloat16 training tables, and a training step's host time (step_host.py).
#   E: A/B of the TF32 rounding in the kernels: cvt.rna.tf32.f32 against the integer form
#      (GEMMCONV_PROBE_INT_ROUND=1, a toggle _triton.CVT_RNA read while this ran; gone
#      since), alternating: the channels_last forward and the float32
#      training tables on the stride-1 2-D cases, and the rounding copy's test.
#   F: the channels_last float32 forward's tiles with cvt.rna (cl_tile_probe.py).
#   G: the tables on the final code: float32 training, channels_last forward, bfloat16
#      training, NCHW forward. H: the zoo.
#   I: DCGAN and the 2-D U-Net again, with --layers (a command line of its own:
#      python3 -m gemmconv bench --models --model unet2d --model dcgan --layers).
#   J: test_cuda_fused.py and test_cuda_replay.py after the weight gradient's plan took the
#      output gradient's shape into its key (a command line of its own, pytest -m cuda).
#   K: what a call costs beyond its kernel on 2d-64to128 and 2d-3x7-512 (fused_call_probe.py,
#      with a kernel writing a new output each call too): 2d-64to128's channels_last call
#      reads 0.35 ms over its kernel where the others read 0.13-0.23.
#   L: the channels_last tiles of 2d-64to128 and 2d-3x7-512 back to back and from an idle
#      GPU (cl_tile_probe.py --idle).
#   M: the bfloat16 planar forward's tiles (cl_tile_probe.py --bf16-planar: the training
#      step's forward and input gradient run that way), 2d-3x7-512, 2d-64to128, 2d-1024.
#   N: small channels_last layers (DCGAN, VAE, the 2-D U-Net's up-convs) per call, torch
#      against the column routes and the fused route forced (fused_host.py): is SMALL_OUTPUT
#      still right with the fused launches replayed?
#   O: on nvidia-h200-x2 (two H200s), a command line of its own: pytest -m cuda
#      test_cuda_fused.py::test_fused_launches_keep_a_compiled_kernel_per_device and
#      test_cuda.py::test_second_device: 2 passed.
#   T: CUDA tests ($TESTS, all by default). The full run: T1 test_cuda.py and
#      test_cuda_channels_last.py, T the rest (results/s31/T/tests-*.log).
#   D: where the backward's host time goes: inside our Function's backward or around it
#      (engine_probe.py), and the step's pieces again (step_pieces.py), on 2d-3x7-512.
export PYTHONPATH=. PYTHONUNBUFFERED=1
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name --format=csv,noheader
case "$1" in
A)
  timeout 200 python3 benches/launch_probe.py 2d-512x1024,2d-1024 > $O/launch.log 2>&1; cat $O/launch.log
  timeout 100 python3 benches/step_host.py 2d-3x7-512 float32 > $O/step.log 2>&1; cat $O/step.log
  timeout 100 python3 benches/step_host.py 2d-3x7-512 bfloat16 >> $O/step.log 2>&1; tail -3 $O/step.log ;;
B)
  for c in "2d-3x7-512 float32" "2d-3x7-512 bfloat16" "3d-3x5x7 bfloat16"; do
    timeout 150 python3 benches/step_pieces.py $c >> $O/pieces.log 2>&1; done
  grep -v "^ *[0-9]" $O/pieces.log | head -80 ;;
C)
  S2="--case 2d-1024 --case 2d-3x7-512 --case 2d-64to128 --case 2d-512x1024 --case 2d-3x7-padded"
  for v in ${V:-new old new old}; do
    D=.; [ $v = old ] && D=scratch/old   # python -m puts the working directory first
    echo "== $v"
    (cd $D && PYTHONPATH=. python3 -c "import gemmconv; print(gemmconv.__file__)")
    (cd $D && PYTHONPATH=. timeout 100 python3 -m gemmconv bench $S2 --channels-last) > $O/fwd-cl-$v.log 2>&1; grep -A7 "^case" $O/fwd-cl-$v.log
    (cd $D && PYTHONPATH=. timeout 120 python3 -m gemmconv bench $S2 --backward --dtype bfloat16 --repeats 10) > $O/train-bf16-$v.log 2>&1; grep -A7 "^case" $O/train-bf16-$v.log
    PYTHONPATH=$D:benches timeout 60 python3 benches/step_host.py 2d-3x7-512 bfloat16 2>&1 | tail -2
  done 2>&1 | tee $O/ab.log | grep -v "^ *$" ;;
D)
  for c in "2d-3x7-512 float32" "2d-3x7-512 bfloat16" "3d-3x5x7 bfloat16"; do
    timeout 100 python3 benches/engine_probe.py $c; done 2>&1 | tee $O/engine.log
  for c in "2d-3x7-512 float32" "2d-3x7-512 bfloat16"; do
    timeout 150 python3 benches/step_pieces.py $c >> $O/pieces.log 2>&1; done
  grep -v "^ *[0-9]" $O/pieces.log | grep -v "^$\|Ordered\|List reduced\|ncalls" | head -40 ;;
E)
  S2="--case 2d-1024 --case 2d-3x7-512 --case 2d-64to128 --case 2d-512x1024 --case 2d-3x7-padded"
  for v in ${V:-rna int rna int}; do
    I=0; [ $v = int ] && I=1
    echo "== $v"
    GEMMCONV_PROBE_INT_ROUND=$I timeout 100 python3 -m gemmconv bench $S2 --channels-last > $O/fwd-cl-$v.log 2>&1; grep -A7 "^case" $O/fwd-cl-$v.log
    GEMMCONV_PROBE_INT_ROUND=$I timeout 150 python3 -m gemmconv bench $S2 --backward --repeats 10 > $O/train-$v.log 2>&1; grep -A7 "^case" $O/train-$v.log
  done 2>&1 | tee $O/ab.log | grep -v "^ *$"
  timeout 100 python3 -m pytest -q -m cuda -p no:cacheprovider tests/test_cuda_fused.py -k "rounded or (matches_float64 and float32)" 2>&1 | tail -3 ;;
F)
  timeout 500 python3 benches/cl_tile_probe.py > $O/tiles.log 2>&1; cat $O/tiles.log ;;
G)
  timeout 120 python3 -m gemmconv bench --full --backward --repeats 10 --json $O/train.json > $O/bench-train.log 2>&1; grep -A20 "^case" $O/bench-train.log
  timeout 60 python3 -m gemmconv bench --full --channels-last --json $O/fwd-cl.json > $O/bench-fwd-cl.log 2>&1; grep -A20 "^case" $O/bench-fwd-cl.log
  timeout 140 python3 -m gemmconv bench --full --backward --dtype bfloat16 --repeats 10 --json $O/train-bf16.json > $O/bench-train-bf16.log 2>&1; grep -A20 "^case" $O/bench-train-bf16.log
  timeout 70 python3 -m gemmconv bench --full --json $O/fwd.json > $O/bench-fwd.log 2>&1; grep -A20 "^case" $O/bench-fwd.log ;;
H)
  timeout 560 python3 -m gemmconv bench --models --json $O/models.json > $O/models.log 2>&1; tail -60 $O/models.log ;;
K)
  timeout 200 python3 benches/fused_call_probe.py 2d-64to128,2d-3x7-512 > $O/call.log 2>&1; cat $O/call.log ;;
L)
  timeout 300 python3 benches/cl_tile_probe.py 2d-64to128,2d-3x7-512 --idle > $O/tiles.log 2>&1; cat $O/tiles.log ;;
M)
  timeout 400 python3 benches/cl_tile_probe.py 2d-3x7-512,2d-64to128,2d-1024 --bf16-planar > $O/tiles.log 2>&1; cat $O/tiles.log ;;
N)
  timeout 300 python3 benches/fused_host.py > $O/host.log 2>&1; cat $O/host.log ;;
T)
  timeout ${TT:-400} python3 -m pytest -q -m cuda -p no:cacheprovider ${TESTS:-tests} > $O/tests.log 2>&1; tail -15 $O/tests.log ;;
esac
