#!/usr/bin/env bash
# Session 66's device calls, written in session 65, whose device time ran out after its
# last CUDA change: float32 3-D stride-1 backwards on the fused kernels
# (fused.FLOAT32_BACKWARD_DIMS), timed by f32_3d_backward_probe.py (results/s65/F2: 1.2-2.1x
# faster steps, errors 4.8-5.5e-4 against float64) but not yet run through the CUDA test
# files, whose fused tests now expect those calls on the fused kernels. Each call is
# run-s64.sh's of the same name; in order:
#   T: every CUDA test file (about 470 s on the H100): test_cuda_fused's planar and
#      channels_last backward tests take their four 3-D cases through the fused kernels in
#      float32 now, and test_fused_backward_allocates_at_most_its_bytes its 3-D cases.
#   G: the four tables and the 1-D cases (about 560 s), the first with both of session 65's
#      changes (the grouped kernel on channels_last, the float32 3-D backward).
#   F: f32_backward_probe.py on the 1-D cases (their float32 backward on the column routes
#      since session 27, on the grounds 3-D's was until session 65) and 3d-32to64, whose
#      planar twin session 65 ran out of time for (about 90 s).
#   B: grouped_backward_probe.py: the grouped cases' training steps with the depthwise
#      backward kernel taking them (depthwise.BACKWARD_MAX_INPUTS; it computes grouped calls
#      since session 65, matched float64 through the interpreter; T's
#      test_backward_kernel_of_grouped_calls_matches_float64 runs it on the GPU first).
#      About 90 s. If it wins, raise BACKWARD_MAX_INPUTS where it does.
#   Z1, Z2: the zoo, if the budget allows (about 300 and 650 s); no zoo layer changed route
#      in session 65 (its 3-D layers are k2 s2 or convolutions; no grouped layer of 2-8
#      input channels a group).
#   (Session 66, after an hour of device refusals that took 826 s of its budget: FB runs F
#   and B in one call, G4 the four tables alone (the 1-D rows' code did not change in
#   session 65, whose G timed them), and TFB T, F and B in one 600-s call. What ran:
#   TFB with a planar-input experiment's probe between T and FB (0be06e2, results/s66:
#   the experiment faulted on the GPU and was reverted in 484dc93), TF after the revert,
#   then the float32 training table of G4 by hand.)
case "$1" in
FB) bash benches/run-s66.sh F; bash benches/run-s66.sh B ;;
TFB) bash benches/run-s66.sh T   # then F and B in what is left of a 600-s call
  timeout $((585 - SECONDS)) bash benches/run-s66.sh FB ;;
G4) source benches/run-lib.sh "$1"
  gpu
  node
  TB=120 table fwd-f32-layouts --layouts
  TB=120 table fwd-bf16-layouts --layouts --dtype bfloat16
  TB=170 table train-f32-layouts --layouts --backward
  TB=170 table train-bf16-layouts --layouts --backward --dtype bfloat16 ;;
F) source benches/run-lib.sh "$1"
  gpu
  node
  probe 150 f32-backward f32_backward_probe.py 1d-65536 1d-dil3 3d-32to64 ;;
TF) source benches/run-lib.sh "$1"   # (session 66: test_cuda_fused again, in four processes,
  gpu                                # after T's ran into the reverted experiment's fault)
  t f32 tests/test_cuda_fused.py -k "test_fused_route_matches_float64 and float32" &
  t f16 tests/test_cuda_fused.py -k "test_fused_route_matches_float64 and float16 and not bfloat16" &
  t bf16 tests/test_cuda_fused.py -k "test_fused_route_matches_float64 and bfloat16" &
  t rest tests/test_cuda_fused.py -k "not test_fused_route_matches_float64" &
  summary ;;
B) source benches/run-lib.sh "$1"
  gpu
  node
  probe 200 grouped-backward grouped_backward_probe.py ;;
*) exec bash benches/run-s64.sh "$@" ;;
esac
