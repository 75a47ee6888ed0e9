"""What every part of the bench shares: options and bounds, the run's environment,
statistics, the progress display, event loops, measurement loops, the result
document and throwaway TLS files."""
