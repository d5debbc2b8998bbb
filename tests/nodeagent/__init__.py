"""Node agent tests."""
