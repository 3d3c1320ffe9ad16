"""The CSV file and the console progress bar the core's loggers (``rlf.logging.loggers``) write with."""

from __future__ import annotations

import csv
import time
from collections.abc import Callable
from pathlib import Path

# -- CSV ----------------------------------------------------------------------------------------


class CsvLog:
    """Append rows to a CSV whose columns may grow: a new key rewrites the header once.

    Each ``write`` is flushed, so a crash loses at most the rows being written. The file is one of
    the run directory's (recorded as rlf's) and is never written through a symlink.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self.columns: list[str] = []
        self._handle = None
        if self.path.exists() and self.path.stat().st_size:
            with self.path.open(newline="") as handle:
                self.columns = next(csv.reader(handle), [])
        self._open()

    def _open(self) -> None:
        from rlf.storage.files import open_for_write

        self._handle = open_for_write(self.path.parent, self.path.name, "a")
        self._writer = csv.DictWriter(self._handle, fieldnames=self.columns, restval="")
        if self._handle.tell() == 0 and self.columns:
            self._writer.writeheader()

    def write(self, row: dict[str, float]) -> None:
        self.write_many([row])

    def write_many(self, rows: list[dict[str, float]]) -> None:
        """Rows in order, then one flush (a short episode every few env steps makes flushes add up)."""
        for row in rows:
            new = [key for key in row if key not in self.columns]
            if new:
                self._widen(new)
            self._writer.writerow({k: _fmt(v) for k, v in row.items()})
        self._handle.flush()

    def _widen(self, new: list[str]) -> None:
        self._handle.close()
        rows = []
        if self.path.exists() and self.path.stat().st_size:
            with self.path.open(newline="") as handle:
                rows = list(csv.DictReader(handle))
        self.columns = self.columns + new
        from rlf.storage.rundir import rewrite_csv

        rewrite_csv(self.path, self.columns, rows)
        self._open()

    def close(self) -> None:
        if self._handle and not self._handle.closed:
            self._handle.close()


def _fmt(value) -> str:
    if isinstance(value, float):
        return repr(value) if not value.is_integer() or abs(value) >= 1e15 else str(int(value))
    return str(value)


# -- console ------------------------------------------------------------------------------------


class Progress:
    """A tqdm bar over env steps with steps/s, ETA and the latest headline metrics."""

    HEADLINE = ("return", "length", "loss", "epsilon", "capture", "x_pos")

    def __init__(self, total: int, initial: int, enabled: bool, description: str):
        self.bar = None
        self._shown_at = 0.0
        self._latest: Callable[[], dict[str, float]] | None = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=initial, unit="step", unit_scale=True, desc=description,
                            dynamic_ncols=True, smoothing=0.1, mininterval=0.5)

    def update(self, steps: int, latest: Callable[[], dict[str, float]]) -> None:
        """``latest`` is only called when the bar is about to redraw: metrics cost nothing in between."""
        if self.bar is None:
            return
        self._latest = latest
        now = time.monotonic()
        if now - self._shown_at >= self.bar.mininterval:
            self._shown_at = now
            self._show(latest)
        self.bar.update(steps)

    def _show(self, latest: Callable[[], dict[str, float]]) -> None:
        shown = {k: f"{v:.3g}" for k, v in latest().items()
                 if any(k == h or k.endswith("/" + h) or k.startswith(h) for h in self.HEADLINE)}
        if shown:
            self.bar.set_postfix(shown, refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            if self._latest is not None:  # the last line left on screen shows the final values
                self._show(self._latest)
            self.bar.close()
