#!/usr/bin/env bash
# `sanpath report` in a real browser: headless Chromium loads the HTML file
# offline, the rendered DOM must hold the four charts (four variant series,
# the bound curve, the path-length charts) and the numbers `sanpath collapse`
# prints, and the screenshot must be a picture, not a blank page.
# Usage: report_browser.sh SANPATH SHARED_DIR TMP_DIR
set -euo pipefail
sanpath=$1
shared=$2
tmp=$3/report_browser
rm -rf "$tmp"
mkdir -p "$tmp"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
command -v chromium >/dev/null || fail "chromium is not installed (./scripts/install-deps test installs it)"
command -v python3 >/dev/null || fail "python3 is not installed"

# 1. The report of the embedded default; stderr is not a terminal: silent.
"$sanpath" report --out "$tmp/report.html" 2>"$tmp/report.err" || fail "sanpath report exited with $?"
[ -s "$tmp/report.html" ] || fail "no report written"
[ ! -s "$tmp/report.err" ] || fail "output on stderr although it is not a terminal: $(head -c 300 "$tmp/report.err")"
[ "$(ls -A "$tmp")" = "$(printf 'report.err\nreport.html')" ] || fail "files besides the report were left behind: $(ls -A "$tmp")"

# The numbers to find: the SAN's last layer as `sanpath collapse` prints it.
"$sanpath" collapse --format json >"$tmp/collapse.json" 2>/dev/null || fail "sanpath collapse failed"

# 2. The DOM as Chromium built it from the file (no network: a file:// URL,
# and the page references nothing outside itself).
chrome() {
  timeout 180 chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --user-data-dir="$(mktemp -d "$tmp/profile.XXXXXX")" "$@"
}
chrome --dump-dom "file://$tmp/report.html" >"$tmp/dom.html" 2>"$tmp/chromium-dom.log" ||
  fail "chromium --dump-dom failed: $(tail -5 "$tmp/chromium-dom.log")"
[ -s "$tmp/dom.html" ] || fail "chromium dumped an empty DOM"

python3 - "$tmp/report.html" "$tmp/dom.html" "$tmp/collapse.json" <<'EOF'
import decimal, json, re, sys
from html.parser import HTMLParser

source, dom, collapse = (open(p, encoding="utf-8").read() for p in sys.argv[1:4])
errors = []
def check(ok, what):
    if not ok:
        errors.append(what)

# Self-contained: no script, no stylesheet link, no image or frame source, no
# URL other than the SVG namespace.
check("<script" not in source.lower(), "the report holds a <script>")
check(not re.search(r"<link\b", source, re.I), "the report links an external resource")
check(not re.search(r"\ssrc\s*=", source, re.I), "the report has a src= attribute")
urls = set(re.findall(r"(?:https?|ftp)://[^\s\"'<>)]+", source))
check(urls <= {"http://www.w3.org/2000/svg"}, f"external URLs in the report: {sorted(urls)}")

class Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack, self.elements, self.text_in = [], [], {}
        self.cell = None
        self.cells = {}
        self.ticks = []
        self.in_tick = False
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        parents = [e for e in self.stack]
        self.elements.append((tag, a, [p[1].get("id") for p in parents if p[1].get("id")]))
        self.stack.append((tag, a))
        if tag == "td" and "data-variant" in a:
            self.cell = (a["data-variant"], a["data-layer"])
            self.cells[self.cell] = ""
        self.in_tick = tag == "text" and "tick" in a.get("class", "")
    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        self.handle_endtag(tag)
    def handle_endtag(self, tag):
        while self.stack:
            t, a = self.stack.pop()
            if t == "td":
                self.cell = None
            if t == tag:
                break
        self.in_tick = False
    def handle_data(self, data):
        if self.cell:
            self.cells[self.cell] += data
        if self.in_tick:
            self.ticks.append(data.strip())

d = Dom()
d.feed(dom)
svgs = {a.get("id") for t, a, _ in d.elements if t == "svg"}
for chart in ["chart-collapse", "chart-bounds", "chart-path-counts", "chart-path-shares"]:
    check(chart in svgs, f"svg#{chart} missing (svgs: {sorted(x for x in svgs if x)})")

def inside(chart, tag=None, cls=None):
    return [(t, a) for t, a, ids in d.elements
            if chart in ids and (tag is None or t == tag) and (cls is None or cls in a.get("class", "").split())]

series = [a.get("data-name") for t, a in inside("chart-collapse", "g", "series")]
check(series == ["SAN", "SAN+MLP", "SAN+skip", "full"], f"collapse series: {series}")
for sid in ["san", "san-mlp", "san-skip", "full"]:
    check(len(inside("chart-collapse-" + sid, "circle", "point")) + len(inside("chart-collapse-" + sid, "path", "upper-bound")) == 13,
          f"series {sid}: not 13 points (layers 0..12)")
    check(len(inside("chart-collapse-" + sid, "path", "line")) == 1, f"series {sid}: no line")
check(len(inside("chart-bounds-uniform", "path", "line")) == 1, "no bound curve in chart-bounds")
check(len(inside("chart-bounds-measured", "path", "line")) == 1, "no measured curve in chart-bounds")
check(len(inside("chart-path-counts", "rect", "bar")) == 13, "chart-path-counts: not 13 bars (lengths 0..12)")
check(len(inside("chart-path-shares", "circle", "point")) + len(inside("chart-path-shares", "path", "upper-bound")) == 13,
      "chart-path-shares: not 13 points")
legend = [a.get("data-name") for t, a in inside("chart-collapse", "g", "legend-item") if a.get("data-name")]
check(legend == ["SAN", "SAN+MLP", "SAN+skip", "full"], f"collapse legend: {legend}")

# Axis labels in scientific notation, down to the SAN's bottom decade (1e-1113622 at layer 12).
check("1e-1000000" in d.ticks or "1e-1200000" in d.ticks, f"no 1e-1000000/1e-1200000 tick on the collapse axis: {d.ticks[:20]}")

# The numbers of `sanpath collapse --format json` (every confirmed digit), as a table cell shows them: rounded to
# min(confirmed, 20) significant digits, that count in brackets.
c = json.loads(collapse)
for v in c["variants"]:
    last = v["layers"][-1]
    cell = d.cells.get((v["name"], str(last["layer"])), "")
    full = last["relative_residual"]
    shown = min(last["digits"], 20)
    mantissa, exponent = full.split("e")
    rounded = decimal.Context(prec=shown, rounding=decimal.ROUND_HALF_EVEN).create_decimal(mantissa)
    if rounded >= 10:  # 9.99... rounded up to 10: one more decade
        rounded, exponent = rounded / 10, str(int(exponent) + 1)
    want = f"{rounded:.{shown - 1}f}e{exponent} [{shown}]"
    check(cell == want, f"{v['name']} layer {last['layer']}: report shows '{cell}', collapse prints {full} "
                        f"({last['digits']} digits): expected '{want}'")
san_last = c["variants"][0]["layers"][-1]["relative_residual"]
exponent = san_last.split("e")[1]
check(exponent.startswith("-") and int(exponent) < -300, f"SAN's last exponent {exponent} is not below -300")
check(f"e{exponent}" in dom, f"exponent e{exponent} not in the DOM")

# The tables.
tables = {a.get("id") for t, a, _ in d.elements if t == "table"}
for t in ["table-setup", "table-collapse", "table-bounds", "table-paths"]:
    check(t in tables, f"table#{t} missing")
check(re.search(r">\s*HOLDS\s*<", dom) is not None, "no HOLDS verdict in the bounds table")
check("embedded default" in dom, "the model is not named")
check("bits" in dom, "the precision is not named")

if errors:
    print("\n".join("FAIL: " + e for e in errors), file=sys.stderr)
    sys.exit(1)
print(f"DOM ok: 4 charts, SAN last layer {san_last}")
EOF

# 3. The screenshot is a picture: decode the PNG (zlib + PNG filters) and
# count colours and non-white pixels; the series colours must be there.
chrome --screenshot="$tmp/report.png" --window-size=1200,2000 --hide-scrollbars "file://$tmp/report.html" \
  >"$tmp/chromium-shot.log" 2>&1 || fail "chromium --screenshot failed: $(tail -5 "$tmp/chromium-shot.log")"
[ -s "$tmp/report.png" ] || fail "no screenshot written"

python3 - "$tmp/report.png" <<'EOF'
import struct, sys, zlib

data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, header = 8, b"", None
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        header = struct.unpack(">IIBBBBB", body)
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
width, height, depth, ctype, _, _, interlace = header
assert depth == 8 and ctype in (2, 6) and interlace == 0, f"unexpected PNG format {header}"
bpp = 3 if ctype == 2 else 4
raw = zlib.decompress(idat)
stride = width * bpp
rows, prev, i = [], bytearray(stride), 0
for _ in range(height):
    f = raw[i]
    line = bytearray(raw[i + 1:i + 1 + stride])
    i += 1 + stride
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0
        b = prev[x]
        c = prev[x - bpp] if x >= bpp else 0
        if f == 1:
            line[x] = (line[x] + a) & 255
        elif f == 2:
            line[x] = (line[x] + b) & 255
        elif f == 3:
            line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(bytes(line))
    prev = line
colours, nonwhite = {}, 0
for line in rows:
    for x in range(0, stride, bpp):
        rgb = line[x:x + 3]
        colours[rgb] = colours.get(rgb, 0) + 1
        if rgb != b"\xff\xff\xff":
            nonwhite += 1
total = width * height
share = nonwhite / total
wanted = {"SAN red": b"\xd6\x27\x28", "SAN+skip green": b"\x2c\xa0\x2c", "SAN+MLP blue": b"\x1f\x77\xb4"}
missing = [name for name, rgb in wanted.items() if colours.get(rgb, 0) < 20]
problems = []
if len(colours) < 50:
    problems.append(f"only {len(colours)} distinct colours")
if share < 0.03:
    problems.append(f"only {share:.1%} of the pixels are not white")
if missing:
    problems.append("series colours missing: " + ", ".join(missing))
if problems:
    print("FAIL: screenshot looks blank: " + "; ".join(problems), file=sys.stderr)
    sys.exit(1)
print(f"screenshot ok: {width}x{height}, {len(colours)} colours, {share:.1%} non-white")
EOF
echo "report_browser: PASS"
