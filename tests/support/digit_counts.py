"""Checks that every digit count printed by sanpath describes the string beside it.

    python3 digit_counts.py json|csv|table FILE...

A count describes a value's printed significant digits: the digits of its
mantissa ("6.2723e-1" has 5). JSON and CSV print every confirmed digit, so a
count that belongs to one value (digits_by_quantity, a statistic's "digits",
"<name>_digits", a CSV "digits" column beside one value) equals them, and a
count that is the least over several values (a layer's "digits", a path row's)
is at most each one's. A table prints at most --digits of them, and the count
in brackets beside a value ("6.2723e-1 [5]", "mean ± std [5]") equals the
digits printed. A value below resolution ("< 1e-N") has no digit confirmed:
its own count is 0 (or null, unconfirmed). Prints one line per disagreement
and exits 1 when there is any; exits 1 too when a file has no count at all
(the check would be empty).
"""
import csv
import io
import json
import re
import sys

SCI = re.compile(r"^-?\d(\.\d+)?e[-+]?\d+$")
problems = []
seen = 0


def sig(s):
    """Significant digits of a printed value: its mantissa's digits."""
    return len(s.split("e")[0].lstrip("-").replace(".", ""))


def own(where, s, d):
    """A count d that belongs to the one value s."""
    global seen
    seen += 1
    if d is None or s == "0":  # unconfirmed; an exact zero has every digit
        return
    if s.startswith("< "):
        if d != 0:
            problems.append(f"{where}: {s!r} is below resolution but counts {d} digits")
    elif not SCI.match(s):
        problems.append(f"{where}: {s!r} is not a printed value (count {d})")
    elif sig(s) != max(d, 1):
        problems.append(f"{where}: {s!r} has {sig(s)} significant digits, its count says {d}")


def least(where, strings, d):
    """A count d that is the least over several values: no value prints fewer digits."""
    global seen
    seen += 1
    if d is None:
        return
    for k, s in strings:
        if SCI.match(s) and sig(s) < d:
            problems.append(f"{where}.{k}: {s!r} has {sig(s)} significant digits, fewer than the count {d} beside it")


def flat(o, prefix=""):
    """(key path joined by '_', string) of every string under o, not entering
    objects that carry counts of their own ("digits", "digits_by_quantity"),
    nor counts and enclosures, and leaving out a value with a count of its own
    ("stddev" beside "stddev_digits")."""
    out = []
    for k, v in o.items():
        if "digits" in k or k == "intervals" or k + "_digits" in o:
            continue
        name = prefix + k
        if isinstance(v, str):
            out.append((name, v))
        elif isinstance(v, dict) and "digits" not in v and "digits_by_quantity" not in v:
            out.extend(flat(v, name + "_" if k != "measures" else ""))
        elif isinstance(v, list) and all(isinstance(x, str) for x in v):
            out.extend((f"{name}[{i}]", x) for i, x in enumerate(v))
    return out


def find(where, strings, name):
    """The string that digits_by_quantity's `name` describes."""
    exact = [s for k, s in strings if k == name]
    if len(exact) == 1:
        return exact[0]
    near = [s for k, s in strings if k.endswith("_" + name) or k.startswith(name + "_")]
    if len(near) == 1:
        return near[0]
    problems.append(f"{where}: no single value named {name!r} beside digits_by_quantity ({[k for k, _ in strings]})")
    return None


def check_json(o, where):
    if isinstance(o, list):
        for i, v in enumerate(o):
            check_json(v, f"{where}[{i}]")
        return
    if not isinstance(o, dict):
        return
    strings = flat(o)
    for k, v in o.items():
        w = f"{where}.{k}"
        if k == "digits_by_quantity":
            for name, d in v.items():
                s = find(w, strings, name)
                if s is not None:
                    own(f"{w}.{name}", s, d)
        elif k == "digits" and isinstance(v, dict):  # a statistic's counts, one per value
            for name, d in v.items():
                if isinstance(o.get(name), str):
                    own(f"{w}.{name}", o[name], d)
        elif k == "digits" and (isinstance(v, int) or v is None):
            least(where, strings, v)
        elif k.endswith("_digits") and k != "correct_digits" and isinstance(o.get(k[: -len("_digits")]), str):
            own(w, o[k[: -len("_digits")]], v)
        check_json(v, w)


def check_csv(text, where):
    rows = list(csv.DictReader(io.StringIO(text)))
    for i, r in enumerate(rows):
        w = f"{where} row {i + 1}"
        counted = set()
        for k, v in r.items():  # "X_digits": the count of column X (of X_mean in a statistic's row)
            if k.endswith("_digits") and v:
                x = k[: -len("_digits")]
                col = x if x in r else x + "_mean"
                own(f"{w}.{col}", r[col], int(v))
                counted.add(col)
        if "digits" not in r or r["digits"] == "":
            continue
        d = int(r["digits"])
        if "mean" in r:  # a statistic row: the count is the mean's
            own(f"{w}.mean", r["mean"], d)
        else:  # the least over the row's values without a count of their own
            values = [(k, v) for k, v in r.items()
                      if v and "digits" not in k and k not in counted and k + "_digits" not in r]
            least(w, values, d)


CELL = re.compile(r"(?<![\w.])(-?\d(?:\.\d+)?e[-+]?\d+|< 1e-?\d+)(?: ± \S+)? \[(\d+|\?)\]")


VALUE = re.compile(r"(?<![\w.])-?\d(?:\.\d+)?e[-+]?\d+")


def check_table(text, where):
    heads = None  # the headings of a table with a "digits" column, for the rows below them
    for n, line in enumerate(text.split("\n"), 1):
        for m in CELL.finditer(line):
            own(f"{where} line {n}", m.group(1), None if m.group(2) == "?" else int(m.group(2)))
        cells = re.split(r"\s{2,}", line.strip())
        if "digits" in cells and not VALUE.search(line):
            heads = cells
            continue
        if not line.strip():
            heads = None
        if heads is None or len(cells) != len(heads):
            continue
        count = cells[heads.index("digits")]
        if count.isdigit():  # the row's least count: no value in the row prints fewer digits
            least(f"{where} line {n}", [(str(i), v) for i, v in enumerate(VALUE.findall(line))], int(count))


def main():
    kind, files = sys.argv[1], sys.argv[2:]
    for f in files:
        before = seen
        text = open(f, encoding="utf-8").read()
        if kind == "json":
            check_json(json.loads(text), f)
        elif kind == "csv":
            check_csv(text, f)
        else:
            check_table(text, f)
        if seen == before:
            problems.append(f"{f}: no digit count found")
    for p in problems:
        print(p)
    print(f"{seen} counts checked, {len(problems)} disagree")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
