"""Figure builders: arrays and Traces in, plotly Figures or pandas DataFrames out.

No streamlit here, so a notebook can call every function. Labels arrive already
translated; tokens are escaped before they become labels.
"""
