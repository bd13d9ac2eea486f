export PYTHONPATH=. PYTHONUNBUFFERED=1
O=/tmp/o; mkdir -p $O
N() { n=$1; shift; timeout 120 ncu --kernel-name regex:interleaved --launch-skip 2 --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis python3 benches/layer.py "$@" --channels-last > $O/ncu-$n.log 2>&1; }
N s5d2 "ConvTranspose2d(32, 64, (3, 3), stride=(5, 5), padding=(1, 1), dilation=(2, 2))" --input 16,32,64,128
N s2grouped3 "ConvTranspose3d(32, 32, 3, stride=2, padding=1, groups=4)" --input 4,32,32,64,128
tar czf $OUT/ncu.tgz -C $O .
grep -h "Duration\|Memory Throughput\|Compute (SM) Throughput\|Registers Per\|Achieved Occupancy\|Theoretical Occupancy\|Executed Ipc\|Stall\|DRAM Throughput" $O/ncu-*.log | head -40
