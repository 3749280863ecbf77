"""The commands beside the broker: admin, produce/consume, dump-log, and the small wire client they share."""
