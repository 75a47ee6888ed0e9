"""Rendering a result document: the markdown report and its PNG plots."""
