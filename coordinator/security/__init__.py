"""Security, off by default: TLS listeners (tls.py) and SASL PLAIN / SCRAM authentication
(sasl.py, scram.py, users.py), as Kafka's SslTransportLayer and SaslServerAuthenticator."""
