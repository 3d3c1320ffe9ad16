"""The progress bar: steps, and the headline metrics of the moment it last drew."""

from rlf.logging.stats import Progress


def test_the_bar_left_on_screen_shows_the_final_metrics(capsys):
    progress = Progress(total=300, initial=0, enabled=True, description="iql on predator-prey")
    asked = []

    def latest(value):
        def metrics():
            asked.append(value)
            return {"epsilon": value, "td_error": 9.0}  # td_error is not a headline metric
        return metrics

    progress.update(100, latest(1.0))
    progress.update(100, latest(0.5))  # within the redraw interval: not asked
    progress.update(100, latest(0.25))
    progress.close()
    assert asked == [1.0, 0.25]
    last = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert "300/300" in last and "epsilon=0.25" in last and "td_error" not in last


def test_a_disabled_bar_never_asks_for_metrics(capsys):
    progress = Progress(total=10, initial=0, enabled=False, description="x")
    progress.update(10, lambda: (_ for _ in ()).throw(AssertionError("asked")))
    progress.close()
    assert capsys.readouterr().err == ""
