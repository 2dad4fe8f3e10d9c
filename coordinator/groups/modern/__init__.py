"""What KIP-848 consumer groups and KIP-932 share groups share (Kafka's group/modern): the
ModernGroup base, its manager (records kept under the runtime contract, sessions,
subscription metadata), the server-side assignors and member reconciliation."""
