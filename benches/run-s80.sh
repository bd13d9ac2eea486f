#!/usr/bin/env bash
# Device calls prepared by session 79 for the next session (its calls ran on an H100; the
# four tables timed out on a cold machine, and the bfloat16 forward table's 3-D planar rows
# read 9-37% slower than session 74's on code whose transposed forward has not changed
# since: results/s79/C).
#   R (about 300 s, first): the bfloat16 forward of the 3-D cases, both layouts, by the
#      tree's code and by session 74's (cddd938), in turns, twice each: the slowdown's
#      check. Before the call, here (scratch/ is not tracked; carry it):
#        mkdir -p scratch/s74 && git archive cddd938 gemmconv | tar -x -C scratch/s74
#   T (up to 580 s; after R): the four tables, with time for a cold machine's compiles
#      (each row also goes to the log's stderr lines as it finishes, since 81f79cb).
#   Z (up to 580 s): the zoo's models B of session 79 did not reach: hifigan, unet2d, unet3d.
source benches/run-lib.sh "$1"
three_d="--case 3d-3x5x7 --case 3d-64cube --case 3d-96cube --case 3d-stride2-dil2"
case "$1" in
R) gpu
  node
  for round in 1 2; do for code in scratch/s74 .; do
    echo "== $code, round $round"
    PYTHONPATH=$code timeout 100 python3 -m gemmconv bench --layouts --dtype bfloat16 $three_d \
      > $O/fwd-bf16-3d-$(basename $code)-$round.log 2>&1
    grep -A6 "^case" $O/fwd-bf16-3d-$(basename $code)-$round.log | grep -v "^---"
  done; done ;;
T) gpu
  node
  TB_TRAIN=170 TB_FWD=110 four_tables ;;
Z) gpu
  node
  zoo_models ${LIMIT:-580} hifigan unet2d unet3d ;;
esac
