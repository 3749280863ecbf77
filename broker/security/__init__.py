"""TLS, SASL, SCRAM credentials and ACLs: who a client is and what it may do."""
