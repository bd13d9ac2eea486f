#!/usr/bin/env bash
# Session 70's device calls. No GPU ran after session 69's `_cuda._launch` refactor (every
# kernel launch goes through it), so A runs every CUDA test file first, then as much of the
# float32 training table (NCHW and channels_last) as the call's 600 s leave.
#   A: every CUDA test file (run-s35.sh P); then the float32 training table, layouts.
#   G: the other three tables (bfloat16 training, the two forwards), layouts.
source benches/run-lib.sh "$1"
left() { echo $(( ${1:-570} - SECONDS )); }   # seconds left of the call's budget
case "$1" in
A) gpu
  node
  all_tests; cat $O/P.txt | tail -25
  [ $(left) -gt 90 ] && TB=$(left) table train-f32-layouts --layouts --backward ;;
G) gpu
  node
  TB=200 table train-bf16-layouts --layouts --backward --dtype bfloat16
  TB=150 table fwd-bf16-layouts --layouts --dtype bfloat16
  [ $(left) -gt 60 ] && TB=$(left) table fwd-f32-layouts --layouts ;;
esac
