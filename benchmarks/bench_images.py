"""Preparing a tool's image for the model: decode, downscale, encode (dsh_jupyter.images.prepare).

Run from the repository root::

    .venv/bin/python benchmarks/bench_images.py

The python tool's result waits for this, so a typical inline plot (640×480) should cost little next to
running the code that drew it, and a large figure (a 12×8 in plot at 200 dpi, 2400×1600) stays well under
a second. The sizes show how much smaller than the figure's own PNG the model's copy is.
"""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks._summary import goal  # noqa: E402
from dsh_jupyter.images import PreparedImage, prepare  # noqa: E402

GOALS_S = {"640×480 plot": 0.1, "2400×1600 plot": 0.6, "1600×1200 photo": 0.6}


def _plot(width_in: float, height_in: float, dpi: int) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(width_in, height_in), dpi=dpi)
    x = np.linspace(0, 10, 500)
    for k in range(5):
        ax.plot(x, np.sin(x * (k + 1)) + k, label=f"k={k}")
    ax.scatter(np.random.default_rng(1).random(300) * 10, np.random.default_rng(2).random(300) * 5, s=6)
    ax.legend()
    ax.set_title("bench")
    out = io.BytesIO()
    fig.savefig(out, format="png")
    plt.close(fig)
    return out.getvalue()


def _photo() -> bytes:
    from PIL import Image, ImageFilter

    size = (1600, 1200)
    bands = [Image.effect_noise(size, sigma).filter(ImageFilter.GaussianBlur(2)) for sigma in (40, 50, 60)]
    gradient = Image.linear_gradient("L").resize(size)
    photo = Image.merge("RGB", [Image.blend(band, gradient, 0.4) for band in bands])  # many colours, soft detail
    out = io.BytesIO()
    photo.save(out, format="PNG")
    return out.getvalue()


def main() -> int:
    inputs = {"640×480 plot": _plot(6.4, 4.8, 100), "2400×1600 plot": _plot(12, 8, 200), "1600×1200 photo": _photo()}
    prepare("image/png", inputs["640×480 plot"])  # import Pillow's plugins once
    ok = True
    print("prepare(): best of 5")
    for name, data in inputs.items():
        best = float("inf")
        result = None
        for _ in range(5):
            started = time.perf_counter()
            result = prepare("image/png", data)
            best = min(best, time.perf_counter() - started)
        assert isinstance(result, PreparedImage)
        ok &= goal("bench_images", f"prepare() of a {name}", f"{best * 1000:.1f} ms",
                   f"<= {GOALS_S[name] * 1000:.0f} ms",
                   f"{len(data):,} B PNG in, {result.mime} {result.width}×{result.height} {len(result.data):,} B out",
                   best <= GOALS_S[name])
    return 0 if ok else 1

if __name__ == "__main__":
    sys.exit(main())
