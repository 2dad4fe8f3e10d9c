"""The transaction coordinator and the `__transaction_state` log it writes."""
