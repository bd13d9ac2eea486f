#!/usr/bin/env bash
# Session 21's GPU runs: the channels_last route's tests, per-kernel profiles and benches.
export PYTHONPATH=. PYTHONUNBUFFERED=1
R=$OUT; O=/tmp/o; mkdir -p $O
L() { n=$1; shift; timeout 60 python3 benches/layer.py "$@" --channels-last > $O/layer-$n.log 2>&1; }
L s5d2 "ConvTranspose2d(32, 64, (3, 3), stride=(5, 5), padding=(1, 1), dilation=(2, 2))" --input 16,32,64,128
L s2grouped3 "ConvTranspose3d(32, 32, 3, stride=2, padding=1, groups=4)" --input 4,32,32,64,128
L 1024 "ConvTranspose2d(64, 64, 3, padding=1)" --input 8,64,1024,1024
L dcgan-train "ConvTranspose2d(512, 256, 4, stride=2, padding=1)" --input 128,512,8,8 --backward
timeout 200 python3 -m pytest -q -m cuda tests/test_cuda_channels_last.py -p no:cacheprovider > $O/cltests.log 2>&1
tail -3 $O/cltests.log
timeout 120 python3 -m gemmconv bench --full --channels-last --png $O/x.png > $O/bench-fwd-cl.log 2>&1
timeout 150 python3 -m gemmconv bench --full --channels-last --backward --repeats 10 --png $O/y.png > $O/bench-train-cl.log 2>&1
grep -h "geometric\|^2d\|^3d" $O/bench-*-cl.log
tar czf $R/run.tgz -C $O .
