"""Partitions on disk in Kafka's own format. Imports nothing above `protocol`."""
