"""Protocol plugins, registered by URL scheme."""
