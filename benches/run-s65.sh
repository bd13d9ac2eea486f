#!/usr/bin/env bash
# Session 65's device calls, written in session 64 (whose device time ran out before its
# last CUDA change could run). Each call is run-s64.sh's of the same name; the order:
#   R: the grouped kernel's vector form (session 64, after its device time; never run on a
#      GPU): grouped_probe.py --no-sizes, its direct arm with GROUPED_CHANNELS_LAST on,
#      against the column routes, planar and channels_last (session 64's P: planar won
#      every case, channels_last lost every case by 1.0-1.9x, scalar loads and stores),
#      then test_cuda_depthwise's grouped cases, which force the flag on. About 150 s.
#   Then, on the machine still warm if nothing needs changing, else after the flag's
#   change (GROUPED_CHANNELS_LAST on where the vector form won):
#   T: every CUDA test file (about 380 s): the vector form, explain's direct-kernel line.
#   G: the four tables and the 1-D cases (about 520 s).
#   Z1, Z2: the zoo, if the budget allows (about 300 and 650 s).
exec bash benches/run-s64.sh "$@"
