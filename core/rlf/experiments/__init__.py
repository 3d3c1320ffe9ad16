"""Many runs at once: experiment files, the results of finished runs (IQM, bootstrap CIs) and their plots."""
