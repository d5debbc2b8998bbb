"""Test helpers shared by component and end-to-end tests."""
