#!/usr/bin/env bash
# The next session's device calls (written in session 73, after its last GPU run).
#   A (about 520 s): tf32_weight_gradient in stages of more output rows a barrier, the kernel
#      alone (rows_wgrad_ncu.py's third argument; the form _cuda picks first, then each
#      candidate, two samples each in turns); then every CUDA test not run on the code since
#      session 71's JTaps template (test_cuda, test_cuda_channels_last but float32,
#      test_cuda_graphs, test_cuda_replay, test_cuda_reuse, test_cuda_depthwise's bfloat16),
#      in 14 processes.
#   G (about 580 s): the four tables with the layouts (not run whole since session 67).
#   Z1 (about 550 s): the zoo but DCGAN and the VAE decoder (session 73): unet2d, depthwise,
#      fcn, hifigan; Z2: unet3d, the float32 channels_last ncu of 2d-64to128's kernel, and
#      the VAE decoder's 3x3 Conv2d layers kernel by kernel (0.14-0.47x in session 73's zoo,
#      about 0.18 ms a call whatever their size: host time or kernels?).
#   V (about 540 s, after A, G and Z2 ran): this session's two CUDA-reaching changes. The
#      weight gradient's stages of more rows alone (the form _cuda picks now, twice); the
#      CUDA tests they reach (test_cuda_fused, test_cuda_channels_last's float32,
#      test_cuda_graphs, test_cuda_reuse, test_cuda's col2im test of a convolution) in 17
#      processes; the VAE decoder's 3x3 convolutions as Z2 timed them, now graphed
#      (ops._ConvReplay); float32 training of the three mma cases; the VAE decoder's zoo.
#   W (about 230 s, after V): the convolutions' graphs up to 2^27 column elements (V's took
#      2^25: the VAE decoder's layers of 64x64 and more launched eagerly). Their tests; the
#      VAE layers again, and CONV_BENCH's conv2d-strided (80M elements) graphed and eager
#      (the limit set back to 2^25), GPU-bound; the VAE decoder's zoo.
source benches/run-lib.sh "$1"
rows_forms() {   # CASE FORM...: each "ROWS,STAGES" (or "-": _cuda's pick), twice in turns
  c=$1; shift
  for t in 1 2; do for f in "$@"; do
    echo "$f: $(timeout 40 python3 benches/rows_wgrad_ncu.py $c 1 ${f#-} 2>&1 | tail -1)"
  done; done
}
case "$1" in
A) gpu
  node
  { rows_forms 2d-3x7-512 - 4,2 3,3 3,2; rows_forms 2d-64to128 - 3,2
    rows_forms 2d-1024 - 5,2 3,3; } | tee $O/wgrad-rows.log
  TC=$(( $(left 520) - 20 )) sharded_tests "cuda:6:tests/test_cuda.py" \
    "cl:2:tests/test_cuda_channels_last.py:not float32" \
    "graphs:4:tests/test_cuda_graphs.py tests/test_cuda_replay.py tests/test_cuda_reuse.py" \
    "dw:2:tests/test_cuda_depthwise.py:bfloat16" ;;
G) gpu
  node
  TB=170 table train-f32-layouts --layouts --backward
  TB=170 table train-bf16-layouts --layouts --backward --dtype bfloat16
  TB=110 table fwd-f32-layouts --layouts
  TB=110 table fwd-bf16-layouts --layouts --dtype bfloat16 ;;
Z1) gpu
  node
  zoo_model unet2d 200; zoo_model depthwise 100; zoo_model fcn 130; zoo_model hifigan 120 ;;
Z2) gpu
  node
  zoo_model unet3d 200
  wgrad_ncu 2d-64to128
  { layer "Conv2d(512, 512, 3, padding=1)" --input 16,512,8,8 --channels-last --dtype bfloat16
    layer "Conv2d(64, 64, 3, padding=1)" --input 16,64,64,64 --channels-last --dtype bfloat16
    layer "Conv2d(64, 64, 3, padding=1)" --input 16,64,64,64; } | tee $O/vae-convs.log ;;
V) gpu
  node
  { rows_forms 2d-3x7-512 -; rows_forms 2d-1024 -; rows_forms 2d-64to128 -; } | tee $O/wgrad-rows.log
  TC=210 sharded_tests "fused:8:tests/test_cuda_fused.py" "cl:3:tests/test_cuda_channels_last.py:float32" \
    "graphs:3:tests/test_cuda_graphs.py" "reuse:2:tests/test_cuda_reuse.py" \
    "cuda:1:tests/test_cuda.py:no_receiving_rows"
  { layer "Conv2d(512, 512, 3, padding=1)" --input 16,512,8,8 --channels-last --dtype bfloat16
    layer "Conv2d(64, 64, 3, padding=1)" --input 16,64,64,64 --channels-last --dtype bfloat16
    layer "Conv2d(64, 64, 3, padding=1)" --input 16,64,64,64; } | tee $O/vae-convs.log
  timeout 130 python3 -m gemmconv bench --case 2d-1024 --case 2d-3x7-512 --case 2d-64to128 \
    --layouts --backward > $O/train-f32-mma.log 2>&1; grep -A5 "^case" $O/train-f32-mma.log
  [ $(left 550) -gt 100 ] && zoo_model vae-decoder $(( $(left 550) - 10 )) ;;
W) gpu
  node
  TC=120 sharded_tests "graphs:3:tests/test_cuda_graphs.py:convolution"
  eager() { echo "== (eager: columns over 2^25 not graphed)"; timeout 120 python3 -c "import runpy, sys
import gemmconv.ops as o; o.GRAPHED_CONV_MAX_COLUMNS = 1 << 25
sys.argv = ['layer.py'] + sys.argv[1:]; runpy.run_path('benches/layer.py', run_name='__main__')" "$@" 2>&1 | grep -v "Warn\|_warn_once" | head -12; }
  { layer "Conv2d(64, 64, 3, padding=1)" --input 16,64,64,64 --channels-last --dtype bfloat16
    layer "Conv2d(64, 64, 3, padding=1)" --input 16,64,64,64
    layer "Conv2d(32, 3, 3, padding=1)" --input 16,32,128,128
    layer "Conv2d(32, 64, 3, stride=2, padding=1)" --input 16,32,256,256
    eager "Conv2d(32, 64, 3, stride=2, padding=1)" --input 16,32,256,256
    layer "Conv2d(32, 64, 3, stride=2, padding=1)" --input 16,32,256,256 --dtype bfloat16
    eager "Conv2d(32, 64, 3, stride=2, padding=1)" --input 16,32,256,256 --dtype bfloat16
  } | tee $O/convs.log
  [ $(left 290) -gt 90 ] && zoo_model vae-decoder $(( $(left 290) - 10 )) ;;
esac
