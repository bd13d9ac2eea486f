"""Where does a user's capture of a converted model's step differ from the eager step?
(tests/test_cuda_graphs.py's test_a_converted_models_training_step_captured_whole, the VAE
decoder planar in TF32: gradients 2.72e-5 apart in session 52's E and session 54's E, the
eager step 6e-8 from itself; passed in other runs.)

Each trial runs in a process of its own (the failure came in some processes, not others):
the test's steps (three warm-up steps on a side stream, one captured, the capture replayed
on a new input, then eager), with every cuBLASLt algorithm choice and every layout choice
recorded, and whether a CUDA graph was being captured when it was made (gemmconv's own,
in the warm-up steps, or the user's). Per trial: the output's and the gradients'
differences, the five parameters whose gradients differ most, and the choices made during
a capture.

    PYTHONPATH=. python benches/capture_probe.py [TRIALS] [MODEL] [LAYOUT]

(Session 55's A: the eager step against a second eager step read 6e-6 in every trial, the
capture against the first eager step 6e-6 or 4e-9. With DETERMINISTIC=1 in the environment
a trial sets torch.backends.cudnn.deterministic, so that torch's own convolutions sum in a
fixed order, and every choice is listed with the step that made it.)
"""
import copy
import os
import subprocess
import sys

import torch

from whole_graph_probe import captured   # (benches/, as the probes' own imports)

TRIALS = int(sys.argv[1]) if len(sys.argv) > 1 else 6
MODEL = sys.argv[2] if len(sys.argv) > 2 else "vae-decoder"
LAYOUT = sys.argv[3] if len(sys.argv) > 3 else "planar"


def rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.detach().double(), ref.detach().double()
    return float((out - ref).norm() / max(float(ref.norm()), 1e-30))


def trial() -> None:
    import gemmconv
    from gemmconv import gemm, zoo

    choices = []
    phase = ["warm-up or capture"]
    lt_choice, layout_choice = gemm._lt_choice, gemm._layout_choice

    def recorded_lt(product, call, alignment, device, pointers):
        answer = lt_choice(product, call, alignment, device, pointers)
        choices.append(("algorithm", call.args[:5], alignment,
                        phase[0], torch.cuda.is_current_stream_capturing()))
        return answer

    def recorded_layout(a, b, out):
        answer = layout_choice(a, b, out)
        choices.append(("layout", tuple(out.shape), answer,
                        phase[0], torch.cuda.is_current_stream_capturing()))
        return answer
    gemm._lt_choice, gemm._layout_choice = recorded_lt, recorded_layout
    torch.backends.cudnn.conv.fp32_precision = "tf32"
    torch.backends.cudnn.deterministic = os.environ.get("DETERMINISTIC") == "1"
    entry = zoo.by_name([MODEL])[0]
    torch.manual_seed(0)
    model = entry.build(True).to("cuda").train()
    x = entry.input(True, "cuda", generator=torch.Generator().manual_seed(1))
    if LAYOUT == "channels_last":
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    ours = gemmconv.convert(copy.deepcopy(model))
    grad = torch.randn(ours(x).shape, generator=torch.Generator().manual_seed(2)).to("cuda")
    if LAYOUT == "channels_last":
        grad = grad.contiguous(memory_format=torch.channels_last)
    names = [n for n, _ in ours.named_parameters()]

    def step():
        out = ours(x)
        return [out, *torch.autograd.grad(out, list(ours.parameters()), grad)]
    replay, replayed = captured(step)
    in_capture = [c for c in choices if c[-1]]   # (ours, of the warm-up, and the user's)
    with torch.no_grad():
        x.copy_(torch.randn(x.shape, generator=torch.Generator().manual_seed(3)))
    phase[0] = "replay"
    replay()
    torch.cuda.synchronize()
    phase[0] = "eager"
    eager = step()
    phase[0] = "again"
    again = step()
    flat = lambda rs: torch.cat([t.detach().double().flatten() for t in rs[1:]])  # noqa: E731
    print(f"output {rel(replayed[0], eager[0]):.1e}, gradients {rel(flat(replayed), flat(eager)):.1e}"
          f" (eager against eager {rel(flat(again), flat(eager)):.1e}); choices {len(choices)}, "
          f"{len(in_capture)} during a capture", flush=True)
    for label, other in (("capture", replayed), ("again", again)):
        worst = sorted(((rel(r, e), n) for n, r, e in zip(names, other[1:], eager[1:])),
                       reverse=True)[:5]
        print(f"  {label} against eager, most apart: "
              + ", ".join(f"{n} {d:.1e}" for d, n in worst), flush=True)
    for choice in in_capture:
        print(f"  during a capture: {choice}", flush=True)
    for choice in choices:
        if choice[-2] != "warm-up or capture":
            print(f"  after the capture: {choice}", flush=True)


def main() -> None:
    if len(sys.argv) > 4 and sys.argv[4] == "--trial":
        trial()
        return
    print(torch.cuda.get_device_name(), flush=True)
    for i in range(TRIALS):
        print(f"trial {i}:", flush=True)
        subprocess.run([sys.executable, __file__, str(TRIALS), MODEL, LAYOUT, "--trial"],
                       check=False, timeout=300)


if __name__ == "__main__":
    main()
