"""Label placement for charts drawn at a fixed size: each label goes where its box overlaps no other label, no
point marker and stays inside the plot, preferring spots next to its point and away from lines (the roof, the
ridge rules, arrows). A label with no free spot is left out (its point's tooltip still names it).

Geometry is in pixels of the plot area, y downwards (as SVG draws it). Text widths are estimated from DejaVu
Sans advance widths (the usual sans-serif of Linux browsers and of vl-convert), rounded up, so that a label
box drawn by a browser with a narrower font is never larger than the box placed here.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

# DejaVu Sans advance widths in em, rounded up; characters not listed count as WIDE.
_NARROW = dict.fromkeys("il.,:;'|!", 0.32) | dict.fromkeys("jfrt()[]/ I", 0.42)
_MEDIUM = dict.fromkeys("abcdeghknopqsuvxyz_-", 0.64) | dict.fromkeys("0123456789", 0.64)
_WIDE = 0.80
_EXTRA = dict.fromkeys("mwMW=%", 1.0)
LINE_HEIGHT = 1.25  # em: the box height of one line of text


def text_width(text: str, size: float, bold: bool = False) -> float:
    """The width in pixels of `text` at font size `size` (an upper bound for DejaVu Sans and narrower fonts)."""
    em = sum(_NARROW.get(c) or _MEDIUM.get(c) or _EXTRA.get(c) or _WIDE for c in text)
    return em * size * (1.1 if bold else 1.0)


@dataclass(frozen=True)
class Box:
    """An axis-aligned rectangle: x0 <= x1, y0 <= y1."""

    x0: float
    y0: float
    x1: float
    y1: float

    @staticmethod
    def around(cx: float, cy: float, w: float, h: float) -> Box:
        return Box(cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)

    def overlaps(self, other: Box) -> bool:
        return self.x0 < other.x1 and other.x0 < self.x1 and self.y0 < other.y1 and other.y0 < self.y1

    def inside(self, outer: Box) -> bool:
        return self.x0 >= outer.x0 and self.y0 >= outer.y0 and self.x1 <= outer.x1 and self.y1 <= outer.y1


@dataclass(frozen=True)
class Placement:
    """Where a label went: its centre, its box, its rotation (0, or 270 for text read bottom to top) and, when it
    sits away from its point, the leader line from the point's edge to the box's edge."""

    cx: float
    cy: float
    box: Box
    angle: int = 0
    leader: tuple[float, float, float, float] | None = None


# Directions tried around a point, in order of preference: right, above-right, below-right, above, below, left...
_DIRECTIONS = [(1, 0), (1, -1), (1, 1), (0, -1), (0, 1), (-1, 0), (-1, -1), (-1, 1)]


@dataclass
class Layout:
    """A plot area of `width` x `height` pixels. `hard` boxes (point markers) are never covered by a label;
    `soft` boxes (pieces of lines) are avoided when a spot without them exists."""

    width: float
    height: float
    pad: float = 2.0
    hard: list[Box] = field(default_factory=list)
    soft: list[tuple[Box, float]] = field(default_factory=list)
    labels: list[Box] = field(default_factory=list)
    anchors: list[tuple[float, float]] = field(default_factory=list)

    @property
    def area(self) -> Box:
        return Box(0, 0, self.width, self.height)

    def add_marker(self, x: float, y: float, r: float, anchor: bool = True) -> None:
        """A point's marker (never covered); an `anchor` is a point labels are read against."""
        self.hard.append(Box(x - r, y - r, x + r, y + r))
        if anchor:
            self.anchors.append((x, y))

    def _ambiguous(self, box: Box, x: float, y: float) -> bool:
        """Whether another point is nearer to `box` than its own point at (x, y): the label would read as that
        point's."""
        own = _distance(box, x, y)
        return any(_distance(box, ax, ay) < own - 1 for ax, ay in self.anchors if (ax, ay) != (x, y))

    def add_line(
        self, points: list[tuple[float, float]], step: float = 4.0, half: float = 1.5, weight: float = 1.0
    ) -> None:
        """A polyline to keep labels off: sampled every `step` pixels as small soft boxes; a line with a lower
        `weight` (a dashed rule) is crossed more readily."""
        for (ax, ay), (bx, by) in itertools.pairwise(points):
            n = max(1, math.ceil(math.hypot(bx - ax, by - ay) / step))
            for i in range(n + 1):
                x, y = ax + (bx - ax) * i / n, ay + (by - ay) * i / n
                self.soft.append((Box(x - half, y - half, x + half, y + half), weight))

    def _free(self, box: Box) -> bool:
        grown = Box(box.x0 - self.pad, box.y0 - self.pad, box.x1 + self.pad, box.y1 + self.pad)
        return (
            box.inside(self.area)
            and not any(grown.overlaps(b) for b in self.labels)
            and not any(box.overlaps(b) for b in self.hard)
        )

    def _crossings(self, box: Box) -> float:
        return sum(w for b, w in self.soft if box.overlaps(b))

    def near_point(
        self,
        text: str,
        x: float,
        y: float,
        r: float,
        size: float,
        bold: bool = False,
        rings: int = 3,
        prefer: tuple[float, float] | None = None,
        diagonal: bool = True,
    ) -> Placement | None:
        """Place `text` next to the point at (x, y) whose marker has radius `r`: first beside it on the side
        `prefer` points to (by default its right), then the other sides, then further out (with a leader line), up
        to `rings` steps of 14 px away. Without `diagonal`, only beside, above or below it (a label at a corner
        of a point in a row of points reads as its neighbour's)."""
        w, h = text_width(text, size, bold) + 2, size * LINE_HEIGHT
        # the cost of each direction: its rank by default; with `prefer`, how far it turns from that direction
        if prefer is not None and any(prefer):
            norm = math.hypot(*prefer)
            turn = [6 * (1 - (d[0] * prefer[0] + d[1] * prefer[1]) / (norm * math.hypot(*d))) for d in _DIRECTIONS]
        else:
            turn = [i * 0.5 for i in range(len(_DIRECTIONS))]
        best: tuple[float, Placement] | None = None
        for ring in range(rings + 1):
            gap = 3 + 14 * ring
            for i, (ux, uy) in enumerate(_DIRECTIONS):
                if ux and uy and not diagonal:
                    continue
                cx = x + ux * (w / 2 + r + gap)
                cy = y + uy * (h / 2 + r + gap * (0.6 if ux else 1))
                box = Box.around(cx, cy, w, h)
                if not self._free(box):
                    continue
                cost = ring * 10 + self._crossings(box) * 4 + turn[i] + (15 if self._ambiguous(box, x, y) else 0)
                if best is None or cost < best[0]:
                    best = (cost, Placement(cx, cy, box, 0, _leader(x, y, r, box) if ring else None))
            if best is not None and best[0] < (ring + 1) * 10:
                break  # nothing further out can beat a spot found on this ring
        if best is None:
            return None
        self.labels.append(best[1].box)
        return best[1]

    def along_vertical(self, text: str, x: float, size: float) -> Placement | None:
        """Place `text` rotated to read upwards beside the vertical line at `x` (a ridge): from the top of the plot
        down, on its left side first, clear of points and labels."""
        w, h = size * LINE_HEIGHT, text_width(text, size) + 2  # the box of the rotated text
        best: tuple[float, Placement] | None = None
        y = 4 + h / 2
        while y + h / 2 <= self.height - 4:
            for side, cx in enumerate((x - w / 2 - 2, x + w / 2 + 2)):
                box = Box.around(cx, y, w, h)
                if self._free(box):
                    cost = y / 8 + side * 3 + self._crossings(box) * 4
                    if best is None or cost < best[0]:
                        best = (cost, Placement(cx, y, box, 270))
            y += 8
        if best is None:
            return None
        self.labels.append(best[1].box)
        return best[1]


def _distance(box: Box, x: float, y: float) -> float:
    return math.hypot(max(box.x0 - x, 0.0, x - box.x1), max(box.y0 - y, 0.0, y - box.y1))


def _leader(x: float, y: float, r: float, box: Box) -> tuple[float, float, float, float]:
    """From the marker's edge towards the box's centre, to where that line enters the box."""
    cx, cy = (box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2
    dx, dy = cx - x, cy - y
    d = math.hypot(dx, dy) or 1.0
    s = max(abs(dx) / ((box.x1 - box.x0) / 2), abs(dy) / ((box.y1 - box.y0) / 2)) or 1.0
    return (x + dx / d * r, y + dy / d * r, cx - dx / s, cy - dy / s)
