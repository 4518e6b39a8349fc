#!/usr/bin/python3
"""The README's collapse table (`sanpath collapse`) from Python: the embedded
default model under its four variants, the relative residual of every layer
in high precision with its confirmed digits in brackets.

    /usr/bin/python3 examples/python/collapse_table.py
"""
import sanpath

result = sanpath.collapse()  # the embedded default model and input, automatic precision
columns = result.relative_residuals()  # {variant: [Number per layer]}

rows = [[f"{str(x)} [{x.digits}]" for x in (column[layer] for column in columns.values())]
        for layer in range(len(next(iter(columns.values()))))]
width = max([30] + [len(c) + 2 for row in rows for c in row])  # as the CLI: wider for long exponents
print("layer  " + "".join(f"{name:{width}}" for name in columns).rstrip())
for layer, cells in enumerate(rows):
    print(f"{layer:<7}" + "".join(f"{c:{width}}" for c in cells).rstrip())
print()
for name, analysis in zip(result.variants, result.analyses):
    print(f"{name}: precision {analysis.precision}, checked at {analysis.check}")
