"""The cold-start verdict: slow model loads and slow first requests after a version loads."""
