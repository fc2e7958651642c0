"""Side-by-side benchmark harness: finegemm and its peers, one process, one timer, one run.

Modules, one job each:

- :mod:`.suites`   the cases (shapes, FLOP and byte counts) of every suite, pure Python;
- :mod:`.inputs`   fresh random inputs per case, quantized with finegemm's casts, and float64 references;
- :mod:`.peers`    the implementations compared (finegemm per backend, cuBLAS blockwise / per-tensor /
  BF16 through torch, DeepGEMM when importable), each turning a case into a callable or a refusal;
- :mod:`.timer`    CUDA-event timing with L2 flush, CUDA-graph mode, host overhead, copy bandwidth;
- :mod:`.sysinfo`  GPU, clocks, versions, git commit;
- :mod:`.runner`   runs every case x peer: correctness first, then time;
- :mod:`.report`   terminal table, summary and JSON; :mod:`.plot` the optional PNG;
- :mod:`.cli`      ``add_arguments`` / ``main`` for ``python -m finegemm bench`` (and ``python -m finegemm.bench``).
"""
