"""The fetch service: fetchlist reader -> host queues -> workers -> parse -> segment writers."""
