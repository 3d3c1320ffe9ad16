"""Run output: the callback and logger contracts, the csv, TensorBoard and progress loggers, running
statistics for them and episode videos."""
