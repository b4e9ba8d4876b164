"""Serving a class: HAProxy in front of several replicas of the app (make serve)."""
