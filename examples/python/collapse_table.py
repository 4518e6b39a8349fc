#!/usr/bin/python3
"""The README's collapse table (`sanpath collapse`) from Python: the embedded
default model under its four variants, the relative residual of every layer
in high precision with the digits printed in brackets (at most 20, all confirmed).

    /usr/bin/python3 examples/python/collapse_table.py
"""
import sanpath

result = sanpath.collapse()  # the embedded default model and input, automatic precision
columns = result.relative_residuals()  # {variant: [Number per layer]}

# As the CLI's table: at most the 20 digits asked (x.decimal(20); str(x) has every confirmed one), and
# in brackets the digits printed.
def cell(x):
    if x.below_resolution:
        return f"{x} [{x.digits}]"
    text = x.decimal(20)
    return f"{text} [{len(text.split('e')[0].lstrip('-').replace('.', ''))}]"


rows = [[cell(x) for x in (column[layer] for column in columns.values())]
        for layer in range(len(next(iter(columns.values()))))]
width = max([30] + [len(c) + 2 for row in rows for c in row])  # as the CLI: wider for long exponents
print("layer  " + "".join(f"{name:{width}}" for name in columns).rstrip())
for layer, cells in enumerate(rows):
    print(f"{layer:<7}" + "".join(f"{c:{width}}" for c in cells).rstrip())
print()
for name, analysis in zip(result.variants, result.analyses):
    print(f"{name}: precision {analysis.precision}, checked at {analysis.check}")
