"""State machines that span partitions: producer ids, transactions, consumer groups."""
