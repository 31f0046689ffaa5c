"""testcurator package."""
