"""What an operator reads and steers: the admin HTTP endpoint, metrics, faults, the web console."""
