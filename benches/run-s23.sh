export PYTHONPATH=. PYTHONUNBUFFERED=1
timeout 540 python3 benches/fused_layouts.py > $OUT/layouts.log 2>&1; tail -5 $OUT/layouts.log
