"""Reserved for later issues (see the issue tracker)."""
