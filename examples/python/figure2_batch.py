#!/usr/bin/python3
"""The paper's Figure 2 over a batch, from Python: the embedded default model
(random BERT-shaped, L=12) on 4 random inputs of 8 tokens, its four curves
under the paper's conventions — `sanpath collapse --random-input 8 --batch 4
--seed 1 --conventions paper` as one call.

Beside the mean over the inputs (what Figure 2 plots) it prints the mean and
standard deviation of log10 of each input's own relative residual: after a
few layers the SAN's residuals of different inputs are hundreds of orders of
magnitude apart, so their mean is the largest one divided by the batch size
and log10 is the scale on which the inputs average.

    /usr/bin/python3 examples/python/figure2_batch.py
"""
import statistics

import sanpath

result = sanpath.collapse(input=sanpath.random_batch(8, 4, seed=1), conventions="paper", threads=2)
print(f"{len(result.runs)} inputs, conventions: {result.conventions}")
for v, (name, layers) in enumerate(result.statistics().items()):
    print(f"\n{name}")
    cells = [f"{stat.mean} [{stat.mean.digits}]" for stat in layers]  # every confirmed digit and its count
    width = max([36] + [len(c) + 2 for c in cells])
    print(f"{'layer':<7}{'mean over the inputs [digits]':<{width}}log10 of each input's value: mean ± std")
    for layer, cell in enumerate(cells):
        logs = [run.analyses[v].layers[layer].relative_residual.log10 for run in result.runs]
        spread = (f"{statistics.mean(logs):.3f} ± {statistics.stdev(logs):.3f}" if None not in logs
                  else "(an input below resolution)")
        print(f"{layer:<7}{cell:<{width}}{spread}")
