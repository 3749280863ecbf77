"""Kafka's wire formats: framing, headers, message bodies (through kio), record batches.

Nothing in this package does I/O or holds state; it turns bytes into values and back.
"""
