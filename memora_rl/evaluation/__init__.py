"""Offline evaluation of policies: runs, metrics, reports, plots and comparisons."""
