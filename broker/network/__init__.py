"""The Kafka protocol front: connections, their requests in order, and the dispatch to handlers."""
