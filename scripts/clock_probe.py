"""At what SM clock does each GEMM run under sustained load, and what fraction of that clock's tensor peak does it
reach?

The M = 4096 FP8 GEMMs are power-limited on the H200: the SM clock drops from 1980 MHz to ~1.6 GHz (NOTES v16:
1.62 GHz for the 256x128 tile under ncu, 1.69 GHz for its multicast form). A kernel that spends less power per
MAC runs at a higher clock, so "x DeepGEMM" mixes two things: work per clock and clock. This probe separates
them for finegemm and the cuBLAS peers (DeepGEMM is not on the lent machine): each peer's call runs back to back
for ``SECONDS`` (L2 not flushed: sustained load, power at steady state) while a sampler reads the SM clock and
the board power every ~50 ms; reported per peer and shape are us a call, TFLOPS, median clock and power, and
the TFLOPS as a share of the dense e4m3 peak at the measured clock (4096 MACs a clock an SM; BF16: 2048).

Usage (GPU): PYTHONPATH=. python3 scripts/clock_probe.py [M,N,K ...]   (writes $OUT/clock_probe.json)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time

import torch

from finegemm.bench.inputs import make_inputs
from finegemm.bench.peers import Refused, make_peers
from finegemm.bench.suites import dense_cases

SHAPES = [(4096, 7168, 16384), (4096, 4096, 7168), (4096, 2112, 7168), (4096, 24576, 1536)]
PEERS = ["finegemm-sm90", "cublas-block", "cublas-tensor", "cublas-bf16"]
SECONDS = float(os.environ.get("CLOCK_PROBE_SECONDS", "1.5"))


class Sampler:
    """Reads ``clocks.sm`` (MHz) and ``power.draw`` (W) from nvidia-smi in a thread until stopped."""

    def __init__(self, period_s: float = 0.05) -> None:
        self.period_s = period_s
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        cmd = ["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
               f"--id={torch.cuda.current_device()}"]
        while not self._stop.is_set():
            out = subprocess.run(cmd, capture_output=True, text=True).stdout.strip().split(",")
            if len(out) == 2:
                self.samples.append((float(out[0]), float(out[1])))
            time.sleep(self.period_s)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def sustained(fn, seconds: float) -> tuple[float, list[tuple[float, float]]]:
    """Runs ``fn`` back to back for ``seconds`` after a 0.3 s warm-up: (us a call, the sampler's readings taken
    while the timed calls ran)."""
    end = time.time() + 0.3
    while time.time() < end:
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    calls = 0
    with Sampler() as sampler:
        start.record()
        end = time.time() + seconds
        while time.time() < end:
            for _ in range(20):
                fn()
            calls += 20
        stop.record()
        torch.cuda.synchronize()
    return start.elapsed_time(stop) * 1e3 / calls, sampler.samples


def main() -> None:
    shapes = [tuple(int(x) for x in a.split(",")) for a in sys.argv[1:]] or SHAPES
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    result = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, seconds=SECONDS, rows=[])
    path = os.path.join(os.environ.get("OUT", "."), "clock_probe.json")
    peers = make_peers(PEERS)
    for case in dense_cases(shapes):
        inp = make_inputs(case, dev, seed=0)
        flops = 2 * case.m * case.n * case.k
        for peer in peers:
            row = dict(shape=case.name, peer=peer.name)
            try:
                prepared = peer.prepare(case, inp)
                with prepared.context():
                    us, samples = sustained(prepared.fn, SECONDS)
                mhz = statistics.median(s[0] for s in samples)
                watts = statistics.median(s[1] for s in samples)
                macs_per_clock = 2048 if peer.name == "cublas-bf16" else 4096
                peak = 2 * macs_per_clock * sms * mhz * 1e6 / 1e12
                tflops = flops / us / 1e6
                row.update(us=us, TFLOPS=tflops, sm_MHz=mhz, watts=watts, samples=len(samples),
                           peak_at_clock_TFLOPS=peak, pct_of_peak_at_clock=100 * tflops / peak)
                print(f"{case.name:>18} {peer.name:>14}: {us:8.1f} us {tflops:7.1f} TFLOPS at {mhz:6.0f} MHz "
                      f"{watts:5.0f} W = {100 * tflops / peak:5.1f} % of that clock's peak", flush=True)
            except Refused as e:
                row["refused"] = str(e)[:200]
            except Exception as e:  # noqa: BLE001
                row["error"] = repr(e)[:300]
                print(f"{case.name:>18} {peer.name:>14}: error {row['error']}", flush=True)
            result["rows"].append(row)
            json.dump(result, open(path, "w"), indent=1)
        del inp
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
