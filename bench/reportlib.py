"""What bench/report and bench/report-ids share: reading the result rows, writing numbers, the
noise of a figure measured in rounds, and the frame of their SVG plots. Standard library only;
not run on its own (the two scripts import it from their own directory).

A results file holds rows `section  candidate  parameter  round  value`, tab-separated; `meta`
rows (candidate: the name, value: any text) describe the run.
"""

import statistics
from collections import defaultdict


# Reading the rows.

def load(path):
    """The rows of a results file: ({(section, candidate, parameter): [value of each round]},
    {meta name: text})."""
    values, meta = defaultdict(list), {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            section, candidate, param, _round, value = line.split("\t")
            if section == "meta":
                meta[candidate] = value
            else:
                values[(section, candidate, param)].append(float(value))
    return values, meta


# Numbers.

def num(x, digits=0):
    """x with thousands separators and the given decimals; "—" for no figure (None)."""
    return "—" if x is None else f"{x:,.{digits}f}"


def count(n, word):
    return f"{n} {word}" + ("" if n == 1 else "s")


def ratio(a, b):
    return a / b if b else float("nan")


def mib(b):
    return None if b is None else b / 2**20


# Noise: how far a figure measured in rounds can move between runs.

def noise(values):
    """Half the spread (max - min) of one figure's rounds: how far its median can move between
    runs. None with fewer than two rounds: nothing to judge by."""
    if len(values) < 2:
        return None
    return (max(values) - min(values)) / 2


def scaled(k, n):
    return None if n is None else k * n


def noise_sum(*ns):
    return None if any(n is None for n in ns) else sum(ns)


def difference(a_vals, b_vals):
    """median(a) - median(b) and its noise: the two figures' half-spreads added."""
    return (statistics.median(a_vals) - statistics.median(b_vals),
            noise_sum(noise(a_vals), noise(b_vals)))


def verdict(margin, n):
    """A target's verdict from its margin (how far the figure is past the target's threshold,
    positive on the right side) and the margin's noise: True (met) or False (not met) only when
    the margin is larger than the noise, None (n/a) when within it or without a noise figure."""
    if n is None or margin != margin or abs(margin) <= n:
        return None
    return margin > 0


def within(ok, n, unit, digits=0):
    """What a measured figure adds about its noise."""
    if n is None:
        return " (one round: no spread to judge by)"
    if ok is None:
        return f"; within noise (± {num(n, digits)} {unit})"
    return f" (noise ± {num(n, digits)} {unit})"


def ns_above(v, n):
    """A timed difference in ns: "below noise (± x)" when not larger than its rounds' spread."""
    if n is None:
        return f"{num(v, 1)} ns (one round: no spread)"
    if v <= n:
        return f"below noise (± {num(n, 1)} ns)"
    return f"{num(v, 1)} ns (± {num(n, 1)})"


# SVG plots.

def axis_top(v):
    """The top of a linear axis from 0 that holds v: the first multiple above v of the place
    value of int(v)'s leading digit (1 for v below 10)."""
    step = 10 ** (len(str(int(v))) - 1)
    return (int(v / step) + 1) * step


class Plot:
    """One plot, 780 × 430 px: a title and a grey line under it (date, machine, ...), an
    optional red note, a plot area within the margins (left, right, top, bottom) with the legend
    to its right. Elements are added in the order they are drawn; text() returns the SVG. The
    callers escape their own text."""

    width, height = 780, 430

    def __init__(self, title, subtitle, note=None, right=230):
        self.left, self.right, self.top, self.bottom = 80, right, 70, 60
        self.pw = self.width - self.left - right
        self.ph = self.height - self.top - self.bottom
        self.out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" '
                    f'height="{self.height}" font-family="sans-serif" font-size="12">',
                    f'<rect width="{self.width}" height="{self.height}" fill="white"/>',
                    f'<text x="20" y="24" font-size="15" font-weight="bold">{title}</text>',
                    f'<text x="20" y="44" font-size="10" fill="#555">{subtitle}</text>']
        if note:
            self.out.append(f'<text x="20" y="56" font-size="10" fill="#a00">{note}</text>')

    def add(self, element):
        self.out.append(element)

    def grid(self, y, label):
        """A horizontal grid line at height y (px) and its label left of the axis."""
        self.out.append(f'<line x1="{self.left}" x2="{self.left + self.pw}" y1="{y:.1f}" '
                        f'y2="{y:.1f}" stroke="#ddd"/>')
        self.out.append(f'<text x="{self.left - 8}" y="{y + 4:.1f}" text-anchor="end">{label}'
                        '</text>')

    def axes(self):
        """The y axis and the x axis, black."""
        left, top, pw, ph = self.left, self.top, self.pw, self.ph
        self.out.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{top + ph}" '
                        'stroke="black"/>')
        self.out.append(f'<line x1="{left}" x2="{left + pw}" y1="{top + ph}" y2="{top + ph}" '
                        'stroke="black"/>')

    def x_tick(self, x, label):
        """A label under the x axis, centred at x (px)."""
        self.out.append(f'<text x="{x:.1f}" y="{self.top + self.ph + 18}" '
                        f'text-anchor="middle">{label}</text>')

    def axis_labels(self, x_label, y_label):
        """What each axis measures: under the x axis, and turned along the y axis."""
        self.out.append(f'<text x="{self.left + self.pw / 2}" y="{self.height - 15}" '
                        f'text-anchor="middle">{x_label}</text>')
        self.out.append(f'<text transform="translate(18,{self.top + self.ph / 2}) rotate(-90)" '
                        f'text-anchor="middle">{y_label}</text>')

    def polyline(self, colour, points, stroke_width):
        """A line through points [(x, y)] in px."""
        self.out.append('<polyline fill="none" stroke-width="%s" stroke="%s" points="%s"/>'
                        % (stroke_width, colour, " ".join(f"{a:.1f},{b:.1f}" for a, b in points)))

    def legend_line(self, n, colour, label):
        """The legend's n-th entry (from 0): a line of the colour, then the label."""
        ly, x = self.top + 10 + n * 22, self.left + self.pw
        self.out.append(f'<line x1="{x + 15}" x2="{x + 40}" y1="{ly}" y2="{ly}" '
                        f'stroke="{colour}" stroke-width="2"/>')
        self.out.append(f'<text x="{x + 46}" y="{ly + 4}">{label}</text>')

    def legend_box(self, n, colour, label):
        """The legend's n-th entry (from 0): a box of the colour, then the label."""
        ly, x = self.top + 10 + n * 22, self.left + self.pw
        self.out.append(f'<rect x="{x + 15}" y="{ly - 6}" width="20" height="12" '
                        f'fill="{colour}"/>')
        self.out.append(f'<text x="{x + 42}" y="{ly + 4}">{label}</text>')

    def text(self):
        return "\n".join(self.out + ["</svg>"]) + "\n"
