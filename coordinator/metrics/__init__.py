"""Metrics, health and readiness on their own port (--metrics-port): what operators run
kafka-lag-exporter, Burrow and a JMX exporter for, from the server's own state.

Importing this package costs nothing: prometheus-client is loaded only by `endpoint`, when
the port is asked for; `stats` holds the counters the coordinator feeds either way.
"""
