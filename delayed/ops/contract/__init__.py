"""`delayed contract`: make and check the contract of go-delayed handlers (see delayed.contract)."""
