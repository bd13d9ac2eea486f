#!/usr/bin/env bash
# Session 47's device calls (outputs under $OUT/<call>; logs kept in benches/results/s47/).
#   A (ran on commit e2140c8, since reverted): the fused forward's row kernel with
#      persistent programs (1 or 2 a multiprocessor, each looping over tiles with its loops
#      of taps flattened into one, tl.range(flatten=True)) against a program a tile, on the
#      cost model's tiles: `two_rows_probe.py --persistent`, the five 2-D stride-1 cases,
#      bfloat16 and float32, planar and channels_last.
#   B: planar row tiles whose box pads the grid least with runs of 64 or 32 bytes along W,
#      against the chosen runs of 128 (two_rows_probe.py --run), bfloat16 and float32.
#   C: the 16-bit weight gradient's taps a program again (wgrad_taps_probe.py, 1 to 4, on the
#      code after the weight-gradient kernels' merge, whose 16-bit code is unchanged); then
#      the merge's one change of code, the moved form's own store at one tap a program
#      (1d-65536's and 1d-dil3's float32 weight gradients: 150 -> 94 and 72 -> 58 registers
#      offline), as float32 training steps, the code before the merge (abold/) and after in
#      turns. (The archive failed there: the device's copy has no commit of this session,
#      so both turns ran the merged code; ab.log shows its repeatability only.)
#   D: every CUDA test file (run-s35.sh P) on the final code, then the bfloat16 training
#      table.
#      (11 failed, every one a float32 tile of 64 x 32 with the input moved: the merged
#      kernel's helper did not compile there; mended in the next commit.)
#   E: after the mend: test_cuda_fused and test_cuda_graphs again, then the forward table.
#   F: the channels_last forward table, the float32 training table, and the model zoo's
#      DCGAN, VAE decoder and FCN-32s (bench --models, both convert modes).
#   G: the float32 weight gradient with the input moved on tiles of 64 x 32 (2d-512x1024,
#      2d-3x7-padded, 1d-dil3): its moved tile as A (mma.sync: M = 32) against the output
#      gradient's as A through registers (SWAP: wgmma) and the output gradient moved
#      (moved_swap_probe.py); then the float32 training table's cases of 32 channels.
#   H: with SWAP the default: test_cuda_fused and test_cuda_graphs again (their float32
#      tiles of 64 x 32 with the input moved take it), then the float32 training table.
#   I: the rest of the zoo that fits the device time left: the 2-D U-Net, HiFi-GAN and the
#      depthwise decoder (bench --models, 110 s a model).
export PYTHONUNBUFFERED=1 PYTHONPATH=.
O=${OUT:-/tmp}/$1; rm -rf $O; mkdir -p $O
source benches/run-lib.sh   # count, t, depthwise_tests, summary, layer, gpu, all_tests, table
case "$1" in
A) gpu
  for o in "--dtype bfloat16 --planar" "--dtype bfloat16" "--planar" ""; do
    timeout 140 python3 benches/two_rows_probe.py --persistent $o 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/persistent.log; done ;;
B) gpu
  for o in "--dtype bfloat16 --run 64" "--dtype bfloat16 --run 32" "--run 64" "--dtype bfloat16 --run 64 --sweep 64"; do
    timeout 100 python3 benches/two_rows_probe.py --planar $o 2>&1 | grep -v "Warn\|_warn_once" | tee -a $O/runs.log; done ;;
C) gpu
  timeout 200 python3 benches/wgrad_taps_probe.py 2>&1 | grep -v "Warn\|_warn_once" | tee $O/taps.log
  rm -rf abold; mkdir abold; git archive $OLD gemmconv | tar -x -C abold
  for i in 1 2; do for p in abold .; do echo "== $p"; PYTHONPATH=$p timeout 100 python3 -m gemmconv bench --case 1d-65536 --case 1d-dil3 --case 2d-1024 --backward --repeats 10 2>&1 | grep -A4 "^case"; done; done | tee $O/ab.log ;;
D) gpu
  all_tests
  table bench-train-bf16 --backward --dtype bfloat16 --repeats 10 ;;
E) gpu
  t fused tests/test_cuda_fused.py &
  t graphs tests/test_cuda_graphs.py &
  summary
  TB=90 table bench-fwd ;;
F) gpu
  TB=90 table bench-fwd-cl --channels-last
  table bench-train --backward --repeats 10
  MODELS="dcgan vae fcn32s" TZ=${TZ:-75} bash benches/run-s35.sh Z | tee $O/zoo.txt; cp $OUT/Z/*.log $O/ 2>/dev/null; rm -rf $OUT/Z ;;
G) gpu
  timeout 200 python3 benches/moved_swap_probe.py 2>&1 | grep -v "Warn\|_warn_once" | tee $O/swap.log
  timeout 150 python3 -m gemmconv bench --case 2d-512x1024 --case 2d-3x7-padded --case 1d-dil3 --case 2d-stride5 --backward --repeats 10 > $O/bench-train.log 2>&1; grep -A8 "^case" $O/bench-train.log ;;
H) gpu
  t fused tests/test_cuda_fused.py &
  t graphs tests/test_cuda_graphs.py &
  summary
  table bench-train --backward --repeats 10 ;;
I) gpu
  MODELS="unet2d hifigan depthwise" TZ=${TZ:-110} bash benches/run-s35.sh Z | tee $O/zoo.txt; cp $OUT/Z/*.log $O/ 2>/dev/null; rm -rf $OUT/Z ;;
esac
