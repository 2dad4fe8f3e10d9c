package main

func runFranzTxn(bootstrap string, res *result) error { return nil }
