"""Development only: benchmarks, load tests and the timed server behind ``make bench``.

Nothing in the app imports this package; it may use Playwright and Streamlit internals.
"""
