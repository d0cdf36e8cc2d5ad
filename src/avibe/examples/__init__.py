"""Bundled example tasks (package data)."""
