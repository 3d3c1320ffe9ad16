"""The ``rlf`` command: training and evaluation (``commands``), ``rlf compare``/``plot``/``experiment``
(``results``) and ``rlf new`` with its templates (``scaffold``)."""


def main(argv: list[str] | None = None) -> int:
    """The console script's entry point (``rlf = "rlf.cli:main"``); the commands load on first call."""
    from rlf.cli.commands import main as run

    return run(argv)


__all__ = ["main"]
