#!/usr/bin/env bash
# Session 67's device calls, written in session 66. No CUDA code changed after session 66's
# last GPU run (TF: test_cuda_fused on 74a4e75, 632 passed; T's six other files, 4,641), so
# no test run is needed first. Session 66 lost 826 s of its budget to refused starts and
# ran on an H100; what it could not run, in order:
#   G: the four tables and the 1-D cases (about 560 s), the first full set with session
#      65's changes (the grouped kernel on channels_last, the float32 3-D fused backward);
#      session 66 timed only the float32 training table (results/s66/G).
#   Z1, Z2: the zoo (about 300 and 650 s), last run in session 63, on an H100; issue 21
#      asks for it on an H200.
# Each call is run-s64.sh's of the same name.
exec bash benches/run-s64.sh "$@"
